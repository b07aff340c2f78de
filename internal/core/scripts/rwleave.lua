-- rwleave.lua: take a waiting writer's mark away (its wait ended without
-- the lock), and wake the readers it held back (rwlib.lua comes first).
-- KEYS[1] the lock (a hash), KEYS[2] the readers' deadlines, KEYS[3] the
--         waiting writers' marks: see rwlib.lua
-- KEYS[4] the lock's Pub/Sub channel
-- ARGV[1] the writer's owner id
-- ARGV[2] the message to publish: the same owner id
-- Returns 1 if it removed the last live mark while no writer holds the
-- lock, and published so that waiting readers try again; else 0.
if rwType() then
  return 0
end
if redis.call('ZREM', KEYS[3], ARGV[1]) == 0 then
  return 0
end
prune()
if redis.call('ZCARD', KEYS[3]) > 0 or redis.call('HEXISTS', KEYS[1], 'writer') == 1 then
  return 0
end
redis.call('PUBLISH', KEYS[4], ARGV[2])
return 1
