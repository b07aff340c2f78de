-- freeze.lua: keep the fleet's freezes, on the server's clock.
-- KEYS[1] the freezes: a hash of id -> "until\ncreated\njobs\nnote", until
--         and created in ms on the server's clock
-- KEYS[2] the counter the ids are numbered by (never expires: an id is
--         not given twice)
-- ARGV[1] "add", "del" or "list"
-- add:    ARGV[2] until (ms), ARGV[3] the jobs' pattern, ARGV[4] the note
-- del:    ARGV[2] the id
-- First drops the freezes whose until has passed; KEYS[1] lives until its
-- last freeze ends.
-- Returns {status, now, ...}, now the server's time (ms):
--   add  {1, now, id}; {0, now}: until is not after now (nothing added)
--   del  {1, now}; {0, now}: no such freeze (or it has ended)
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
if ARGV[1] == 'add' then
  local u = tonumber(ARGV[2])
  if u <= now then
    return {0, now}
  end
  local id = 'f' .. redis.call('INCR', KEYS[2])
  redis.call('HSET', KEYS[1], id, ARGV[2] .. '\n' .. now .. '\n' .. ARGV[3] .. '\n' .. ARGV[4])
  last = math.max(last, u)
  reply[3] = id
elseif ARGV[1] == 'del' then
  reply[1] = redis.call('HDEL', KEYS[1], ARGV[2])
else
  for i = 1, #live do
    reply[i + 2] = live[i]
  end
end
if last > now then
  redis.call('PEXPIRE', KEYS[1], last - now)
end
return reply
