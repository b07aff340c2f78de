-- pause.lua: pause a ledger, saying who, why and until when, or resume it
-- (see claim.lua for the ledger's other fields).
-- KEYS[1] the ledger hash: its fields paused (1 while paused), pausedby,
--         pausenote, pausedat (ms on the server's clock), pauseduntil (ms
--         on the server's clock; absent: until a resume), pausefinish (the
--         owner id of the finish that paused it, see finish.lua) and
--         failures (failed finishes in a row, see finish.lua)
-- ARGV[1] 1 pause, 0 resume
-- ARGV[2] lifetime of KEYS[1] in milliseconds
-- ARGV[3] who paused
-- ARGV[4] why
-- ARGV[5] until when, ms on the server's clock; 0 until a resume
-- A pause replaces the one in force. A resume clears the pause and the
-- failures in a row. A pause whose pauseduntil has passed is over: claim.lua
-- and finish.lua read it so, and its fields stay until the next pause or
-- resume.
-- Returns 1 done; 0 ARGV[5] is not after the server's clock (nothing
-- written); -6 KEYS[1] is not a hash.
local t = redis.call('TYPE', KEYS[1])
t = t.ok or t
if t ~= 'hash' and t ~= 'none' then
  return -6
end
if ARGV[1] ~= '1' then
  redis.call('HDEL', KEYS[1], 'paused', 'pausedby', 'pausenote', 'pausedat', 'pauseduntil', 'pausefinish', 'failures')
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
local now = millis(redis.call('TIME'))
local untilMs = tonumber(ARGV[5]) or 0
if untilMs ~= 0 and untilMs <= now then
  return 0
end
redis.call('HSET', KEYS[1], 'paused', 1, 'pausedby', ARGV[3], 'pausenote', ARGV[4], 'pausedat', now)
if untilMs ~= 0 then
  redis.call('HSET', KEYS[1], 'pauseduntil', untilMs)
else
  redis.call('HDEL', KEYS[1], 'pauseduntil')
end
redis.call('HDEL', KEYS[1], 'pausefinish')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
