-- semrenew.lua: extend the deadline of the caller's permit (the watchdog).
-- KEYS[1] the permits: a sorted set of owner id -> deadline (Redis time, ms)
-- KEYS[2] the permits' hold counts: a hash of owner id -> holds
-- KEYS[3] the permits' fencing tokens: a hash of owner id -> token
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- Returns 1 renewed; 0 the caller no longer holds a permit (its deadline
-- passed, it was force-unlocked, or a key was replaced by something that is
-- not part of a semaphore, which is left as it is).
--
-- Permits whose deadline has passed are dropped first. Idempotent: a repeat
-- moves the deadline to the same place, give or take the time between the
-- two.
if semWrongType() then
  return 0
end
local now = millis(redis.call('TIME'))
prunePermits(now)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  return 0
end
local lease = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], 'XX', now + lease, ARGV[1])
for i = 1, 3 do
  if redis.call('PTTL', KEYS[i]) < lease then
    redis.call('PEXPIRE', KEYS[i], lease)
  end
end
return 1
