-- semforceunlock.lua: delete every permit of a semaphore whoever holds it,
-- and wake its waiters.
-- KEYS[1] the permits (a sorted set)
-- KEYS[2] the permits' hold counts (a hash)
-- KEYS[3] the permits' fencing tokens (a hash)
-- KEYS[4] the semaphore's Pub/Sub channel
-- Returns {1, 0} deleted; {0, 0} there was nothing; {-2, i} KEYS[i] is of
-- another type (every key left as it is).
local types = {'zset', 'hash', 'hash'}
local found = false
for i = 1, 3 do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'none' then
    if t ~= types[i] then
      return {-2, i}
    end
    found = true
  end
end
if not found then
  return {0, 0}
end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('PUBLISH', KEYS[4], 'forced')
return {1, 0}
