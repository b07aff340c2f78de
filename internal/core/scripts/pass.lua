-- pass.lua: record that the ticks of a ledger up to one were passed over,
-- unclaimed, once: of several callers, the first moves the ledger's seen
-- up and appends its history entry; the others find seen there already.
-- KEYS[1] the ledger hash
-- KEYS[2] the ledger's history stream
-- ARGV[1] the tick up to which the ticks are passed over; "": none, the
--         entry is appended whatever seen is, and the ledger is not touched
-- ARGV[2] lifetime of KEYS[1] in milliseconds (see finish.lua's ARGV[13])
-- ARGV[3] how many entries the history keeps (approximately, as
--         finish.lua)
-- ARGV[4] how long the history keeps an entry, ms
-- ARGV[5] how often the history's lifetime is renewed, ms (finish.lua's
--         ARGV[14]); an append here renews it whenever
-- ARGV[6] how long past ARGV[1] the server's clock must be, ms: a tick
--         the fleet may still claim (not yet due on the server's clock, or
--         due so recently that its claim may be on its way) is not passed
--         over, whatever the caller's clock says
-- ARGV[7..] the history entry: field-value pairs (none: no entry)
-- Returns 1 passed; 0 seen was at ARGV[1] or later, or the server's clock
-- is not ARGV[6] past it (nothing written); -6 KEYS[1] is not a hash; -8
-- KEYS[2] is not a stream (nothing written).
local pass = ARGV[1] ~= ''
if pass then
  local f = redis.pcall('HGET', KEYS[1], 'seen')
  if type(f) == 'table' and f.err then
    return -6
  end
  if (tonumber(f) or 0) >= tonumber(ARGV[1]) then
    return 0
  end
  if millis(redis.call('TIME')) - tonumber(ARGV[1]) < tonumber(ARGV[6]) then
    return 0
  end
end
local t = redis.call('TYPE', KEYS[2])['ok']
if t ~= 'stream' and t ~= 'none' then
  return -8
end
if pass then
  redis.call('HSET', KEYS[1], 'seen', ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local _, now = appendHistory(KEYS[2], ARGV[3], 7)
if now then
  renewHistory(KEYS[2], tonumber(ARGV[4]), tonumber(ARGV[5]), now)
end
return 1
