-- forceunlock.lua: delete a lock whoever holds it, and wake its waiters.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's Pub/Sub channel
-- Returns 1 deleted; 0 there was no lock; -2 KEYS[1] is not a hash (left as
-- it is).
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then
  return 0
end
if t ~= 'hash' then
  return -2
end
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', KEYS[2], 'forced')
return 1
