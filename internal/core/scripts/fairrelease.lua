-- fairrelease.lua: drop holds of the caller's lease of a fair lock; the
-- last one deletes the lock and wakes the head of the queue alone.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's Pub/Sub channel
-- KEYS[3] the queue (list of owner ids)
-- KEYS[4] the waiters' deadlines (sorted set, Redis time in ms)
-- KEYS[5] the release mark of this owner (see release.lua)
-- ARGV[1] owner id
-- ARGV[2] holds the caller's lease has now
-- ARGV[3] holds to drop
-- ARGV[4] how long the release mark lives, in milliseconds
-- Returns {status, head}: status as release.lua (1 released, 2 holds
-- dropped, 0 not held, -5 hold count differs); head is the owner id of the
-- waiter woken by the release ('' if none). The message published is
-- "fair\n<ARGV[1]>\n<head>": the waiter it names tries again; every other
-- waiter ignores it.
--
-- Idempotent, as release.lua: a retry of the release that deleted the lock
-- answers {1, ''} (the head was woken by the first).
local holds = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(holds) == 'table' then
  return {0, ''}
end
holds = tonumber(holds)
if not holds then
  if redis.call('EXISTS', KEYS[5]) == 1 then
    return {1, ''}
  end
  return {0, ''}
end
local expected = tonumber(ARGV[2])
local drop = tonumber(ARGV[3])
if holds == expected then
  if holds > drop then
    redis.call('HSET', KEYS[1], ARGV[1], holds - drop)
    return {2, ''}
  end
elseif holds == expected - drop then
  return {2, ''}
else
  return {-5, ''}
end
redis.call('DEL', KEYS[1])
redis.call('SET', KEYS[5], 1, 'PX', ARGV[4])
return {1, wakeHead(KEYS[3], KEYS[4], KEYS[2], ARGV[1], millis(redis.call('TIME')))}
