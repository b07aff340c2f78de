-- replicareport.lua: record a replica's report, on the server's clock.
-- KEYS[1] the reports: a hash of replica id -> "<seen> <until> <first>
--         <nonce> <report>", seen the time of its last report (Redis time,
--         ms), until the time it counts as live to (seen itself once it
--         said it stopped), first the time of the first report of its
--         process (its nonce), nonce its process's, report its report,
--         opaque
-- KEYS[2] when each report is dropped: a sorted set of replica id ->
--         until + keep (ms), in KEYS[1]'s hash slot
-- ARGV[1] the replica id
-- ARGV[2] its process's nonce (no spaces)
-- ARGV[3] how long its report counts as live from now, ms; 0: it stopped now
-- ARGV[4] its report
-- ARGV[5] keep, ms: a report gone (past its until) for this long is dropped
-- Returns 1 when recorded; 0 when ignored: a report (ARGV[3] > 0) of a
-- process (id and nonce) already recorded as stopped, sent before its stop
-- and run after it. First the reports due (until + keep <= now) are
-- dropped, each once: a call costs O(log n) amortised, never the whole
-- hash. keep must be positive. A key of another type fails the call
-- (WRONGTYPE), untouched.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[3])
local keep = tonumber(ARGV[5])
local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
local old = redis.call('HGET', KEYS[1], ARGV[1])
for _, id in ipairs(due) do
  redis.call('HDEL', KEYS[1], id)
  if id == ARGV[1] then
    old = false
  end
end
if #due > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
end
local first = now
if old then
  local seen, untilms, first0, nonce = string.match(old, '^(%d+) (%d+) (%d+) (%S+) ')
  if nonce == ARGV[2] then
    if seen == untilms and ttl > 0 then
      return 0
    end
    first = tonumber(first0)
  end
end
redis.call('HSET', KEYS[1], ARGV[1], string.format('%d %d %d %s %s', now, now + ttl, first, ARGV[2], ARGV[4]))
redis.call('ZADD', KEYS[2], now + ttl + keep, ARGV[1])
-- Both keys outlive the newest report by keep; never shortened.
for _, k in ipairs(KEYS) do
  if redis.call('PTTL', k) < ttl + keep then
    redis.call('PEXPIRE', k, ttl + keep)
  end
end
return 1
