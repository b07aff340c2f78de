-- trigger.lua: count one more manual request in a ledger of manual runs,
-- and keep its parameters with its number in the same step.
-- KEYS[1] the ledger hash (see claim.lua): its fields triggers (the
--         requests counted), params:<n> (request n's parameters, a JSON
--         object; absent: none), paramslow (the lowest n whose params:<n>
--         may still be there) and lasttrigger (<id>:<n> of the latest
--         request)
-- ARGV[1] lifetime of KEYS[1] in milliseconds
-- ARGV[2] the request's id, unique to it: a retry of the same request
--         counts nothing again
-- ARGV[3] the parameters, a JSON object; "" none
-- The parameters of the requests done (the ledger's field done) are
-- dropped, at most 1000 a call: the history entry of the run keeps them.
-- Returns n, the request's number; -6 KEYS[1] is not a hash.
local t = redis.call('TYPE', KEYS[1])
t = t.ok or t
if t ~= 'hash' and t ~= 'none' then
  return -6
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
if ARGV[3] ~= '' then
  redis.call('HSET', KEYS[1], 'params:' .. n, ARGV[3])
end
local done = tonumber(redis.call('HGET', KEYS[1], 'done')) or 0
local low = tonumber(redis.call('HGET', KEYS[1], 'paramslow')) or 1
if done >= low then
  for m = math.max(low, done - 999), done do
    redis.call('HDEL', KEYS[1], 'params:' .. m)
  end
  redis.call('HSET', KEYS[1], 'paramslow', done + 1)
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n
