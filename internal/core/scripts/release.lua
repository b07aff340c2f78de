-- release.lua: drop holds of the caller's lease; the last one deletes the
-- lock and publishes on its channel to wake waiters.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's Pub/Sub channel
-- KEYS[3] the release mark of this owner (a string, see ARGV[5])
-- ARGV[1] owner id
-- ARGV[2] holds the caller's lease has now
-- ARGV[3] holds to drop
-- ARGV[4] the message to publish: the releasing owner id
-- ARGV[5] how long the release mark lives, in milliseconds
-- Returns 1 released (key deleted); 2 holds dropped, still held; 0 the caller
-- does not hold the lock (nothing touched); -5 the hold count differs.
--
-- Idempotent: it compares the count before it sets it, so a client retry
-- after a lost reply changes nothing; and the release that deletes the
-- lock leaves a mark for ARGV[5] ms, so that a retry of it answers 1 again
-- instead of "not held" (as Redisson keeps an unlock's result per request).
local holds = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(holds) == 'table' then
  return 0
end
holds = tonumber(holds)
if not holds then
  if redis.call('EXISTS', KEYS[3]) == 1 then
    return 1
  end
  return 0
end
local expected = tonumber(ARGV[2])
local drop = tonumber(ARGV[3])
if holds == expected then
  if holds <= drop then
    redis.call('DEL', KEYS[1])
    redis.call('SET', KEYS[3], 1, 'PX', ARGV[5])
    redis.call('PUBLISH', KEYS[2], ARGV[4])
    return 1
  end
  redis.call('HSET', KEYS[1], ARGV[1], holds - drop)
  return 2
end
if holds == expected - drop then
  return 2
end
return -5
