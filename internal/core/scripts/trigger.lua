-- trigger.lua: count one more manual request in a ledger, and record it
-- with its number, in the same step, in the ledger that claims the
-- requests' numbers (the ledger of manual runs).
-- KEYS[1] the ledger hash that counts (see claim.lua): its field triggers
--         (the requests counted)
-- KEYS[2] the ledger hash that claims them (KEYS[1] itself, or another of
--         the same lock): its fields trig:<id> (the number of request id,
--         so that a retry of it counts nothing again), req:<n> (request n:
--         "<Redis time in ms>\n<id>", and "\n<params, a JSON object>" when
--         it is ordered: claim.lua runs the requests so recorded in their
--         order, none passed over) and reqlow (the lowest n whose record
--         may still be there); done is read
-- ARGV[1] lifetime of KEYS[1] and KEYS[2] in milliseconds
-- ARGV[2] the request's id, unique to it: a retry of the same request,
--         while its record is kept, counts nothing again
-- ARGV[3] the parameters, a JSON object ("{}" none): the request is
--         ordered; "" it is not (a job without parameters)
-- The records of the requests done (the ledger's field done) are dropped,
-- at most 1000 a call: the history entry of the run keeps the params; and
-- so are those of the requests more than 1000 before this one.
-- Returns n, the request's number; -6 KEYS[1] or KEYS[2] is not a hash.
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)
  t = t.ok or t
  if t ~= 'hash' and t ~= 'none' then
    return -6
  end
end
local again = redis.call('HGET', KEYS[2], 'trig:' .. ARGV[2])
if again then
  return tonumber(again)
end
local n = redis.call('HINCRBY', KEYS[1], 'triggers', 1)
local done = tonumber(redis.call('HGET', KEYS[2], 'done')) or 0
local low = tonumber(redis.call('HGET', KEYS[2], 'reqlow')) or 1
-- At most 1000 requests are kept: those further back go too, done or not
-- (a ledger whose done does not move, one of a job on every replica).
-- Records are of requests before n only (done may be far beyond them,
-- in a ledger that also claims ticks).
local upto = math.min(math.max(done, n - 1001), low + 999, n - 1)
if upto >= low then
  for m = low, upto do
    local r = redis.call('HGET', KEYS[2], 'req:' .. m)
    if r then
      local id = string.match(r, '^[^\n]*\n([^\n]*)')
      if id then
        redis.call('HDEL', KEYS[2], 'trig:' .. id)
      end
      redis.call('HDEL', KEYS[2], 'req:' .. m)
    end
  end
  low = upto + 1
end
local rec = millis(redis.call('TIME')) .. '\n' .. ARGV[2]
if ARGV[3] ~= '' then
  rec = rec .. '\n' .. ARGV[3]
end
-- (reqlow is always there once a request is: claim.lua reads the records
-- only in a ledger that has it.)
redis.call('HSET', KEYS[2], 'trig:' .. ARGV[2], n, 'req:' .. n, rec, 'reqlow', low)
redis.call('PEXPIRE', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n
