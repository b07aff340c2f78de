-- Appends one entry to the audit trail, a capped stream.
--
-- KEYS[1]  the audit stream (redis.key_prefix .. ":audit")
-- ARGV[1]  keep: the latest entries kept
-- ARGV[2]  max age in ms: no entry older is kept (on the server's clock);
--          the stream expires that long after its last entry
-- ARGV[3]  the append's nonce, random: a client's retry of the same append
--          finds it among the latest entries and appends nothing
-- ARGV[4..] the entry's fields and values
--
-- Returns the entry's id ("<ms>-<seq>", the server's time of the append):
-- the new one, or that of the earlier run with the same nonce.
local latest = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 16)
for _, e in ipairs(latest) do
  local f = e[2]
  for i = 1, #f, 2 do
    if f[i] == 'nonce' and f[i + 1] == ARGV[3] then
      return e[1]
    end
  end
end
local id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], '*', 'nonce', ARGV[3], unpack(ARGV, 4))
local ms = tonumber(string.match(id, '^(%d+)'))
redis.call('XTRIM', KEYS[1], 'MINID', string.format('%d', math.max(ms - tonumber(ARGV[2]), 0)))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return id
