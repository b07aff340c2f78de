-- trigger.lua: count one more manual request in a ledger, and keep its
-- parameters with its number, in the same step, in the ledger that claims
-- the requests' numbers (the ledger of manual runs).
-- KEYS[1] the ledger hash that counts (see claim.lua): its fields triggers
--         (the requests counted) and lasttrigger (<id>:<n> of the latest
--         request)
-- KEYS[2] the ledger hash that claims them (KEYS[1] itself, or another of
--         the same lock): its fields params:<n> (request n's parameters, a
--         JSON object; absent: none) and paramslow (the lowest n whose
--         params:<n> may still be there); done is read
-- ARGV[1] lifetime of KEYS[1] and KEYS[2] in milliseconds
-- ARGV[2] the request's id, unique to it: a retry of the same request
--         counts nothing again
-- ARGV[3] the parameters, a JSON object; "" none
-- The parameters of the requests done (the ledger's field done) are
-- dropped, at most 1000 a call: the history entry of the run keeps them.
-- Returns n, the request's number; -6 KEYS[1] or KEYS[2] is not a hash.
for _, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)
  t = t.ok or t
  if t ~= 'hash' and t ~= 'none' then
    return -6
  end
end
local last = redis.call('HGET', KEYS[1], 'lasttrigger')
if last then
  local id, n = string.match(last, '^(.*):(%d+)$')
  if id == ARGV[2] then
    return tonumber(n)
  end
end
local n = redis.call('HINCRBY', KEYS[1], 'triggers', 1)
redis.call('HSET', KEYS[1], 'lasttrigger', ARGV[2] .. ':' .. n)
local done = tonumber(redis.call('HGET', KEYS[2], 'done')) or 0
local low = tonumber(redis.call('HGET', KEYS[2], 'paramslow')) or 1
if done >= low then
  for m = math.max(low, done - 999), done do
    redis.call('HDEL', KEYS[2], 'params:' .. m)
  end
  redis.call('HSET', KEYS[2], 'paramslow', done + 1)
end
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[2], 'params:' .. n, ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[1])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n
