-- pass.lua: record that the ticks of a ledger up to one were passed over,
-- unclaimed, once: of several callers, the first moves the ledger's seen
-- up and appends its history entry; the others find seen there already.
-- An entry with the field skip (a tick skipped: busy, paused, excluded) is
-- recorded once per tick by the ledger's field skipped instead of seen
-- (a claim that found the tick busy or paused moved seen already): the
-- first caller moves skipped to the tick, and seen if it is below it; a
-- tick claimed to run (the ledger's done or running) is not recorded
-- skipped. A busy or paused skip does not stop a later claim of the tick
-- (one replica's busy skip is its own view: a takeover or a queued claim
-- may still run the tick); an excluded one (outcome excluded: a calendar
-- or a freeze, the same for every replica but for a freeze read a moment
-- late) is kept in the field excluded, and a claim of that tick answers
-- done (claim.lua): neither runs it.
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
--         over, whatever the caller's clock says; negative: how far the
--         server's clock may be before it
-- ARGV[7..] the history entry: field-value pairs (none: no entry),
--         coalesced as lib.lua's appendHistory says when it has skip
-- Returns 1 passed; 0 seen (skipped, for a skip) was at ARGV[1] or later,
-- or the server's clock is not ARGV[6] past it (nothing written); -6
-- KEYS[1] is not a hash; -8 KEYS[2] is not a stream (nothing written).
local pass = ARGV[1] ~= ''
local skip = entryField(7, 'skip')
local seen
if pass then
  local f = redis.pcall('HMGET', KEYS[1], 'seen', 'skipped', 'done', 'running')
  if f.err then
    return -6
  end
  seen = tonumber(f[1]) or 0
  local mark = seen
  if skip then
    mark = tonumber(f[2]) or 0
    -- A tick claimed to run (done, or under way) is not recorded skipped.
    local done, running = tonumber(f[3]) or 0, tonumber(f[4]) or 0
    if done == tonumber(ARGV[1]) or running == tonumber(ARGV[1]) and running > done then
      return 0
    end
  end
  if mark >= tonumber(ARGV[1]) then
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
  if skip then
    redis.call('HSET', KEYS[1], 'skipped', ARGV[1])
    if entryField(7, 'outcome') == 'excluded' then
      redis.call('HSET', KEYS[1], 'excluded', ARGV[1])
    end
  end
  if seen < tonumber(ARGV[1]) then
    redis.call('HSET', KEYS[1], 'seen', ARGV[1])
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local _, now = appendHistory(KEYS[2], ARGV[3], 7, tonumber(ARGV[4]))
if now then
  renewHistory(KEYS[2], tonumber(ARGV[4]), tonumber(ARGV[5]), now)
end
return 1
