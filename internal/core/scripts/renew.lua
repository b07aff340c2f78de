-- renew.lua: extend the caller's lease (the watchdog).
-- KEYS[1] the lock hash
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- Returns 1 renewed; 0 the caller no longer holds the lock (gone, another
-- owner, or the key was replaced by something that is not a lock).
local held = redis.pcall('HEXISTS', KEYS[1], ARGV[1])
if held == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
