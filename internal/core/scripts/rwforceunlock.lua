-- rwforceunlock.lua: delete a read-write lock whoever holds it, with the
-- marks of its waiting writers, and wake its waiters (rwlib.lua comes
-- first).
-- KEYS[1] the lock (a hash), KEYS[2] the readers' deadlines, KEYS[3] the
--         waiting writers' marks: see rwlib.lua
-- KEYS[4] the lock's Pub/Sub channel
-- Returns 1 deleted; 0 there was no lock; -2 one of the keys is of another
-- type (every key is left as it is).
if rwType() then
  return -2
end
local held = redis.call('EXISTS', KEYS[1])
local marked = redis.call('EXISTS', KEYS[3])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
if held == 1 or marked == 1 then
  redis.call('PUBLISH', KEYS[4], 'forced')
end
return held
