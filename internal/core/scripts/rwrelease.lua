-- rwrelease.lua: drop holds of the caller's lease of a read-write lock; the
-- last one ends the lease, and publishes on the lock's channel when that
-- lets a waiter in (rwlib.lua comes first).
-- KEYS[1] the lock (a hash), KEYS[2] the readers' deadlines, KEYS[3] the
--         waiting writers' marks: see rwlib.lua
-- KEYS[4] the lock's Pub/Sub channel
-- KEYS[5] the release mark of this owner (see release.lua)
-- ARGV[1] 'w' the write lease, 'r' a read lease
-- ARGV[2] owner id
-- ARGV[3] holds the caller's lease has now
-- ARGV[4] holds to drop
-- ARGV[5] the message to publish: the releasing owner id
-- ARGV[6] how long the release mark lives, in milliseconds
-- Returns {status, published}: status 1 released (the lease ended), 2
-- holds dropped, still held, 0 the caller does not hold the lock (nothing
-- touched), -5 the hold count differs; published is 1 if the release
-- published (the write lease ended, or the last lease), else 0.
--
-- Idempotent, as release.lua: it compares the count before it sets it, and
-- a retry of the release that ended the lease answers {1, 0}.
if rwType() then
  return {0, 0}
end
prune()
local mode, owner = ARGV[1], ARGV[2]
if not holding(mode, owner) then
  if redis.call('EXISTS', KEYS[5]) == 1 then
    return {1, 0}
  end
  return {0, 0}
end
local holds = tonumber(redis.call('HGET', KEYS[1], owner)) or 0
local expected = tonumber(ARGV[3])
local drop = tonumber(ARGV[4])
if holds == expected then
  if holds > drop then
    redis.call('HSET', KEYS[1], owner, holds - drop)
    return {2, 0}
  end
elseif holds == expected - drop then
  return {2, 0}
else
  return {-5, 0}
end
redis.call('HDEL', KEYS[1], owner, owner .. ':token')
if mode == 'w' then
  redis.call('HDEL', KEYS[1], 'writer', 'deadline')
else
  redis.call('ZREM', KEYS[2], owner)
end
redis.call('SET', KEYS[5], 1, 'PX', ARGV[6])
local published = 0
if mode == 'w' or free() then
  -- Readers, or a writer, may come in now.
  redis.call('PUBLISH', KEYS[4], ARGV[5])
  published = 1
end
settle()
return {1, published}
