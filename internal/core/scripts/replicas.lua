-- replicas.lua: read the fleet's replica reports (replicareport.lua).
-- KEYS[1] the reports: a hash of replica id -> "<seen> <until> <first>
--         <nonce> <report>" (see replicareport.lua)
-- KEYS[2] when each report is dropped: a sorted set of replica id ->
--         until + keep (ms)
-- Returns {now, id, value, id, value, ...}: the server's time (ms) and the
-- reports left once those due are dropped. A key of another type fails
-- the call (WRONGTYPE), untouched.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
for _, id in ipairs(due) do
  redis.call('HDEL', KEYS[1], id)
end
if #due > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
end
local all = redis.call('HGETALL', KEYS[1])
local out = {now}
for i = 1, #all do
  out[#out + 1] = all[i]
end
return out
