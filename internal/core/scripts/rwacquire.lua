-- rwacquire.lua: take the read or the write lock of a read-write lock, or
-- add a hold to the caller's lease of it (rwlib.lua comes first).
-- KEYS[1] the lock (a hash), KEYS[2] the readers' deadlines, KEYS[3] the
--         waiting writers' marks: see rwlib.lua
-- KEYS[4] the fencing token counter (a string), shared with the
--         other kinds of lock of the name
-- ARGV[1] 'w' the write lock, 'r' a read lock
-- ARGV[2] owner id (a new lease's, unique to this acquisition)
-- ARGV[3] lease in milliseconds
-- ARGV[4] holds the caller's lease has now: 0 for a new lease
-- ARGV[5] lifetime of KEYS[4] in milliseconds
-- ARGV[6] write: how long the caller's mark lasts when it must wait, in
--         ms; 0 leaves no mark (TryLock)
-- ARGV[7] write: the longest sleep to answer with (the period at which a
--         waiting writer renews its mark), in ms
-- ARGV[8] read: the owner id of the caller's write lease of this lock, or
--         '': the writer may take the read lock too
-- Returns {1, token} acquired; {0, sleep} the caller waits and tries again
-- within sleep ms or when woken; {-1, 0} the caller's lease is no longer
-- in Redis; {-2, 0} KEYS[1] is not a hash; {-3, 0} KEYS[1] has no TTL;
-- {-4, 0} KEYS[4] is not a string; {-5, holds} the hold count differs from
-- the caller's; {-7, i} KEYS[i] (2 or 3) is not a sorted set.
--
-- A new reader waits while another owner holds the write lock, or a
-- waiting writer's mark is live (readers that hold may re-enter); a new
-- writer waits while anyone holds the lock, and leaves its mark. Its sleep
-- ends when the holder's lease or the first reader's runs out, and, for a
-- writer, within ARGV[7]. The script is idempotent, so a client retry after
-- a lost reply does no harm: a new lease's owner id is unique (a repeat
-- finds it holding), and a re-entry names the count it expects (compare
-- and set).
local mode, owner = ARGV[1], ARGV[2]
local expected = tonumber(ARGV[4])
local bad = rwType()
if bad then
  return bad
end
if redis.call('PTTL', KEYS[1]) == -1 then
  return {-3, 0}
end
prune()

local function tokenOf(o)
  return tonumber(redis.call('HGET', KEYS[1], o .. ':token')) or 0
end

if expected ~= 0 then
  -- A re-entry of the caller's lease.
  if not holding(mode, owner) then
    return {-1, 0}
  end
  local n = tonumber(redis.call('HGET', KEYS[1], owner)) or 0
  if n == expected then
    redis.call('HSET', KEYS[1], owner, n + 1)
  elseif n ~= expected + 1 then
    return {-5, n}
  end
  return {1, tokenOf(owner)}
end
if holding(mode, owner) then
  -- A repeat of a call that acquired: the lease starts again now.
  if mode == 'w' then
    redis.call('HSET', KEYS[1], 'deadline', now + tonumber(ARGV[3]))
  else
    redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), owner)
  end
  settle()
  return {1, tokenOf(owner)}
end

local writer = redis.call('HGET', KEYS[1], 'writer')
local sleep
if mode == 'w' then
  if writer then
    sleep = tonumber(redis.call('HGET', KEYS[1], 'deadline')) - now
  elseif redis.call('ZCARD', KEYS[2]) > 0 then
    sleep = tonumber(redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]) - now
  end
  if sleep then
    local mark = tonumber(ARGV[6])
    if mark > 0 then
      redis.call('ZADD', KEYS[3], now + mark, owner)
      local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
      redis.call('PEXPIRE', KEYS[3], tonumber(last[2]) - now)
    end
    return {0, math.max(math.min(sleep, tonumber(ARGV[7])), 1)}
  end
else
  if writer and writer ~= ARGV[8] then
    sleep = tonumber(redis.call('HGET', KEYS[1], 'deadline')) - now
  elseif not writer and redis.call('ZCARD', KEYS[3]) > 0 then
    -- A writer waits: until it has had its turn, or its mark lapses.
    sleep = tonumber(redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')[2]) - now + 1
  end
  if sleep then
    return {0, math.max(sleep, 1)}
  end
end

local token = newToken(KEYS[4], ARGV[5], t)
if not token then
  return {-4, 0}
end
redis.call('HSET', KEYS[1], owner, 1, owner .. ':token', token)
if mode == 'w' then
  redis.call('HSET', KEYS[1], 'writer', owner, 'deadline', now + tonumber(ARGV[3]))
  redis.call('ZREM', KEYS[3], owner)
else
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), owner)
end
settle()
return {1, token}
