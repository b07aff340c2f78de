-- chainfloor.lua: set the ledger's chain floor once, and read it
-- (Ledger.ChainFloor).
-- KEYS[1] the ledger hash
-- ARGV[1] lifetime of KEYS[1] in ms, set if the ledger did not exist (a
--         claim or finish renews it from then on, as any ledger's)
-- Returns the ledger's floor (field chainsince: the server's time, ms, of
-- the first call), as a string.
-- Idempotent: a retry finds the floor set and reads it.
local new = redis.call('EXISTS', KEYS[1]) == 0
redis.call('HSETNX', KEYS[1], 'chainsince', millis(redis.call('TIME')))
if new then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
end
return redis.call('HGET', KEYS[1], 'chainsince')
