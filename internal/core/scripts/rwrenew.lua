-- rwrenew.lua: extend the caller's lease of a read-write lock (the
-- watchdog; rwlib.lua comes first).
-- KEYS[1] the lock (a hash), KEYS[2] the readers' deadlines, KEYS[3] the
--         waiting writers' marks: see rwlib.lua
-- ARGV[1] 'w' the write lease, 'r' a read lease
-- ARGV[2] owner id
-- ARGV[3] lease in milliseconds
-- Returns 1 renewed: the lease ends ARGV[3] ms from now; 0 the caller no
-- longer holds the lock (its deadline passed, it was released or forced,
-- or a key was replaced by something that is not a lock).
if rwType() then
  return 0
end
prune()
if not holding(ARGV[1], ARGV[2]) then
  return 0
end
local deadline = now + tonumber(ARGV[3])
if ARGV[1] == 'w' then
  redis.call('HSET', KEYS[1], 'deadline', deadline)
else
  redis.call('ZADD', KEYS[2], deadline, ARGV[2])
end
settle()
return 1
