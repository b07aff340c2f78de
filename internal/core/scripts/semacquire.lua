-- semacquire.lua: take a permit of a semaphore, or add a hold to the
-- caller's permit.
-- KEYS[1] the permits: a sorted set of owner id -> deadline (Redis time, ms)
-- KEYS[2] the permits' hold counts: a hash of owner id -> holds
-- KEYS[3] the permits' fencing tokens: a hash of owner id -> token
-- KEYS[4] the fencing token counter (a string), shared by every
--         kind of lock of the same name
-- ARGV[1] owner id (a new permit's id is unique to its acquisition)
-- ARGV[2] lease in milliseconds
-- ARGV[3] holds the caller's permit has now: 0 for a new permit
-- ARGV[4] lifetime of KEYS[4] in milliseconds
-- ARGV[5] the number of permits
-- Returns {1, token} acquired, or a hold added (the permit's token);
-- {0, sleep} every permit is taken, and the earliest deadline among them is
-- sleep ms away; {-1, 0} the caller's permit is no longer in Redis;
-- {-2, i} KEYS[i] is of another type; {-3, i} KEYS[i] has no TTL;
-- {-4, 0} KEYS[4] is not a string; {-5, holds} the hold count differs
-- from the caller's.
--
-- Deadlines come from the server's clock (TIME). Permits whose deadline has
-- passed are dropped first, with their holds and tokens. The keys live at
-- least as long as the longest permit. The script is idempotent, so a client
-- retry after a lost reply does no harm: a repeat of a new permit's call
-- finds the permit and replies with its token, and a re-entry names the
-- count it expects (compare and set).
local owner = ARGV[1]
local lease = tonumber(ARGV[2])
local expected = tonumber(ARGV[3])
local types = {'zset', 'hash', 'hash'}
for i = 1, 3 do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'none' then
    if t ~= types[i] then
      return {-2, i}
    end
    if redis.call('PTTL', KEYS[i]) == -1 then
      return {-3, i}
    end
  end
end
local t = redis.call('TIME')
local now = millis(t)
prunePermits(now)
local held = redis.call('ZSCORE', KEYS[1], owner)
if expected ~= 0 then
  local holds = tonumber(redis.call('HGET', KEYS[2], owner))
  if not held or not holds then
    return {-1, 0}
  end
  if holds == expected then
    redis.call('HSET', KEYS[2], owner, holds + 1)
  elseif holds ~= expected + 1 then
    return {-5, holds}
  end
  return {1, tonumber(redis.call('HGET', KEYS[3], owner)) or 0}
end
if held then
  -- A repeat of a call that acquired: the permit's lease starts again now.
  redis.call('ZADD', KEYS[1], 'XX', now + lease, owner)
  for i = 1, 3 do
    if redis.call('PTTL', KEYS[i]) < lease then
      redis.call('PEXPIRE', KEYS[i], lease)
    end
  end
  return {1, tonumber(redis.call('HGET', KEYS[3], owner)) or 0}
end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[5]) then
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, math.max(tonumber(first[2]) - now, 1)}
end
local token = newToken(KEYS[4], ARGV[4], t)
if not token then
  return {-4, 0}
end
redis.call('ZADD', KEYS[1], now + lease, owner)
redis.call('HSET', KEYS[2], owner, 1)
redis.call('HSET', KEYS[3], owner, token)
for i = 1, 3 do
  if redis.call('PTTL', KEYS[i]) < lease then
    redis.call('PEXPIRE', KEYS[i], lease)
  end
end
return {1, token}
