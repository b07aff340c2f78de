-- freeze.lua: keep the fleet's freezes, on the server's clock.
-- KEYS[1] the freezes: a hash of id -> "until\ncreated\njobs\nnote", until
--         and created in ms on the server's clock
-- KEYS[2] the counter the ids are numbered by (never expires: an id is
--         not given twice)
-- KEYS[3] the requests answered lately: a hash of nonce -> what the add
--         made ("id\ncreated") or "del", which lives ARGV[3] ms after the
--         last add or del, so that a client's retry of one (go-redis resends
--         a script whose reply was lost) is answered as the first call was
--         and changes nothing
-- ARGV[1] "add", "del" or "list"
-- ARGV[2] the request's nonce, made by the caller (add and del)
-- ARGV[3] how long a nonce is remembered, in ms (add and del)
-- add:    ARGV[4] until (ms), ARGV[5] the jobs' pattern, ARGV[6] the note
-- del:    ARGV[4] the id
-- First drops the freezes whose until has passed; KEYS[1] lives until its
-- last freeze ends.
-- Returns {status, now, ...}, now the server's time (ms):
--   add  {1, now, id, created (ms, a string)}; {0, now}: until is not after now (nothing
--        added); a retry: {1, now, id, created} of the freeze it made
--   del  {1, now}; {0, now}: no such freeze (or it has ended); a retry of
--        a del that ended one: {1, now}
--   list {1, now, id, value, id, value, ...}
-- A key of another type fails the call (WRONGTYPE), untouched.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local live, last = {}, 0
for i = 1, #all, 2 do
  local u = tonumber(string.match(all[i + 1], '^(%d+)')) or 0
  if u > now then
    live[#live + 1] = all[i]
    live[#live + 1] = all[i + 1]
    last = math.max(last, u)
  else
    redis.call('HDEL', KEYS[1], all[i])
  end
end
local reply = {1, now}
local prior = false
if ARGV[1] ~= 'list' then
  prior = redis.call('HGET', KEYS[3], ARGV[2])
end
if prior then
  if ARGV[1] == 'add' then
    local id, created = string.match(prior, '^([^\n]*)\n(%d+)$')
    reply[3] = id
    reply[4] = created
  end
  return reply
end
if ARGV[1] == 'add' then
  local u = tonumber(ARGV[4])
  if u <= now then
    return {0, now}
  end
  local id = 'f' .. redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], id, ARGV[4] .. '\n' .. now .. '\n' .. ARGV[5] .. '\n' .. ARGV[6])
  redis.call('HSET', KEYS[3], ARGV[2], id .. '\n' .. now)
  redis.call('PEXPIRE', KEYS[3], ARGV[3])
  last = math.max(last, u)
  reply[3] = id
  reply[4] = '' .. now
elseif ARGV[1] == 'del' then
  reply[1] = redis.call('HDEL', KEYS[1], ARGV[4])
  if reply[1] == 1 then
    redis.call('HSET', KEYS[3], ARGV[2], 'del')
    redis.call('PEXPIRE', KEYS[3], ARGV[3])
  end
else
  for i = 1, #live do
    reply[i + 2] = live[i]
  end
end
if last > now then
  redis.call('PEXPIRE', KEYS[1], last - now)
end
return reply
