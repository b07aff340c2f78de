-- acquire.lua: take a reentrant lock, or add a hold to the caller's lease.
-- KEYS[1] the lock: a hash of owner -> holds, and <owner>:token -> the
--         lease's fencing token
-- KEYS[2] the fencing token counter (a string): the token of the lock's
--         current or last lease (see newToken in lib.lua)
-- ARGV[1] owner id
-- ARGV[2] lease in milliseconds
-- ARGV[3] holds the caller's lease has now: 0 for a new lease
-- ARGV[4] lifetime of KEYS[2] in milliseconds
-- Returns {1, token} acquired; {0, pttl} held by another owner;
-- {-1, 0} the caller's lease is no longer in Redis; {-2, 0} KEYS[1] is not a
-- hash; {-3, 0} KEYS[1] has no TTL; {-4, 0} KEYS[2] is not a string;
-- {-5, holds} the hold count differs from the caller's.
--
-- The script is idempotent, so a client retry after a lost reply does no
-- harm: a new lease's owner id is unique, and a re-entry names the count it
-- expects (compare and set).
local owner = ARGV[1]
local expected = tonumber(ARGV[3])
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 then
  if expected ~= 0 then
    return {-1, 0}
  end
  local token = newToken(KEYS[2], ARGV[4])
  if not token then
    return {-4, 0}
  end
  redis.call('HSET', KEYS[1], owner, 1, owner .. ':token', token)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return {1, token}
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  return {-2, 0}
end
if pttl == -1 then
  return {-3, 0}
end
local holds = tonumber(redis.call('HGET', KEYS[1], owner))
if not holds then
  if expected ~= 0 then
    return {-1, 0}
  end
  return {0, pttl}
end
if holds == expected then
  redis.call('HSET', KEYS[1], owner, holds + 1)
elseif holds ~= expected + 1 then
  return {-5, holds}
elseif expected == 0 then
  -- A repeat of the call that took the lock (a retry after a lost reply):
  -- the lease starts again now, so that the caller's deadline, counted
  -- from this call, is not later than the key's.
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return {1, leaseToken(KEYS[1], owner, KEYS[2])}
