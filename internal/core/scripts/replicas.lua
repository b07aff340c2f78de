-- replicas.lua: keep the fleet's replica reports, on the server's clock.
-- KEYS[1] the reports: a hash of replica id -> "<seen> <until> <report>",
--         seen the time of the replica's last report (Redis time, ms),
--         until the time it counts as live to (seen itself once it said it
--         stopped), report its report, opaque
-- ARGV[1] the replica id; "": only read
-- ARGV[2] how long its report counts as live from now, ms; 0: it stopped now
-- ARGV[3] its report
-- ARGV[4] keep, ms: a report gone (past its until) for this long is dropped
-- Returns {now, id, value, id, value, ...}: the server's time (ms) and the
-- reports left, after the replica's own is recorded and the old ones
-- dropped. A key of another type fails the call (WRONGTYPE), untouched.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
local keep = tonumber(ARGV[4])
if ARGV[1] ~= '' then
  redis.call('HSET', KEYS[1], ARGV[1], string.format('%d %d %s', now, now + ttl, ARGV[3]))
  -- The hash outlives its newest report by keep; never shortened.
  if redis.call('PTTL', KEYS[1]) < ttl + keep then
    redis.call('PEXPIRE', KEYS[1], ttl + keep)
  end
end
local all = redis.call('HGETALL', KEYS[1])
local out = {now}
for i = 1, #all, 2 do
  local untilms = tonumber(string.match(all[i + 1], '^%d+ (%d+) '))
  if untilms == nil or untilms + keep <= now then
    redis.call('HDEL', KEYS[1], all[i])
  else
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
  end
end
return out
