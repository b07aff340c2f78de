-- inspect: read the keys of one lock name; change nothing.
-- KEYS the keys of one lock name (one hash tag, so one Cluster slot)
-- Returns {seconds, microseconds, {type, pttl, value} for each key}: the
-- server's TIME, then for each key its TYPE, its PTTL, and its contents:
-- the string, the hash's fields and values, the sorted set's members and
-- scores, or the list's elements, flat; an empty table for other types.
local t = redis.call('TIME')
local out = {t[1], t[2]}
for _, k in ipairs(KEYS) do
  local ty = redis.call('TYPE', k)['ok']
  local v = {}
  if ty == 'string' then
    v = redis.call('GET', k)
  elseif ty == 'hash' then
    v = redis.call('HGETALL', k)
  elseif ty == 'zset' then
    v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  elseif ty == 'list' then
    v = redis.call('LRANGE', k, 0, -1)
  end
  out[#out + 1] = {ty, redis.call('PTTL', k), v}
end
return out
