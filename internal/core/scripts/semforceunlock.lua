-- semforceunlock.lua: delete every permit of a semaphore whoever holds it,
-- and wake its waiters.
-- KEYS[1] the permits (a sorted set)
-- KEYS[2] the permits' hold counts (a hash)
-- KEYS[3] the permits' fencing tokens (a hash)
-- KEYS[4] the semaphore's Pub/Sub channel
-- Returns {1, 0} deleted a live permit; {0, 0} there was none (the keys,
-- which can outlive their last permit when its deadline moved earlier, are
-- deleted all the same, without a message); {-2, i} KEYS[i] is of another
-- type (every key left as it is).
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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
if live == 0 then
  return {0, 0}
end
redis.call('PUBLISH', KEYS[4], 'forced')
return {1, 0}
