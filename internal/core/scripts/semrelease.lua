-- semrelease.lua: drop holds of the caller's permit; the last one gives the
-- permit back and publishes on the semaphore's channel to wake waiters.
-- KEYS[1] the permits: a sorted set of owner id -> deadline (Redis time, ms)
-- KEYS[2] the permits' hold counts: a hash of owner id -> holds
-- KEYS[3] the permits' fencing tokens: a hash of owner id -> token
-- KEYS[4] the semaphore's Pub/Sub channel
-- KEYS[5] the release mark of this owner (see release.lua)
-- ARGV[1] owner id
-- ARGV[2] holds the caller's permit has now
-- ARGV[3] holds to drop
-- ARGV[4] the message to publish: the releasing owner id
-- ARGV[5] how long the release mark lives, in milliseconds
-- Returns 1 released (the permit is back); 2 holds dropped, still held;
-- 0 the caller holds no permit (nothing of anyone else's touched, and a key
-- of another type left as it is); -5 the hold count differs.
--
-- Permits whose deadline has passed are dropped first. After a release the
-- keys live as long as the longest permit left, or are deleted with the
-- last. Idempotent: it compares the count before it sets it, so a client
-- retry after a lost reply changes nothing, and a retry of the release
-- that gave the permit back answers 1 again.
if semWrongType() then
  return 0
end
local now = millis(redis.call('TIME'))
prunePermits(now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  if redis.call('EXISTS', KEYS[5]) == 1 then
    return 1
  end
  return 0
end
local holds = tonumber(redis.call('HGET', KEYS[2], ARGV[1]))
if not holds then
  return 0
end
local expected = tonumber(ARGV[2])
local drop = tonumber(ARGV[3])
if holds == expected then
  if holds > drop then
    redis.call('HSET', KEYS[2], ARGV[1], holds - drop)
    return 2
  end
elseif holds == expected - drop then
  return 2
else
  return -5
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('SET', KEYS[5], 1, 'PX', ARGV[5])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if #last == 0 then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
else
  local ttl = math.max(tonumber(last[2]) - now, 1)
  for i = 1, 3 do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
redis.call('PUBLISH', KEYS[4], ARGV[4])
return 1
