-- fairacquire.lua: take a fair lock in queue order, or keep the caller's
-- place in the queue (its heartbeat).
-- KEYS[1] the lock: a hash of owner -> holds, <owner>:token -> token (shared
--         with the reentrant lock)
-- KEYS[2] the fencing token counter (a string)
-- KEYS[3] the queue: a list of waiting owner ids, first come first
-- KEYS[4] the waiters' deadlines: a sorted set of owner id -> Redis time in ms
-- ARGV[1] owner id (a new lease's, unique to this acquisition)
-- ARGV[2] lease in milliseconds
-- ARGV[3] lifetime of KEYS[2] in milliseconds
-- ARGV[4] how long a place lasts without a heartbeat, in milliseconds
-- ARGV[5] 1: wait in the queue; 0: one attempt, never queued (TryLock)
-- ARGV[6] the longest sleep to answer with: the heartbeat period, ms
-- Returns {1, token} acquired; {0, sleep, position} the caller waits at
-- position (0: the head, 1: next, 2: further back) and tries again within
-- sleep ms or when woken;
-- {0, pttl, -1} not acquired and not queued (ARGV[5] is 0); {-2, 0} KEYS[1]
-- is not a hash; {-3, 0} KEYS[1] has no TTL; {-4, 0} KEYS[2] is not a
-- string; {-6, 0} KEYS[3] or KEYS[4] is of another type.
--
-- Deadlines come from the server's clock (TIME), never a client's. Places
-- whose deadline has passed are dropped from the head of the queue, so a
-- waiter that died delays the ones behind it by at most ARGV[4]. The script
-- is idempotent: a repeat after a lost reply finds the caller holding the
-- lock, or refreshes its place.
local owner = ARGV[1]
local t = redis.call('TIME')
local now = millis(t)
-- Key types are checked by the first command on each key (pcall), not by
-- TYPE.
local head, headDeadline, bad = queueHead(KEYS[3], KEYS[4], now)
if bad then
  return {-6, 0}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl ~= -2 then
  local held = redis.pcall('HEXISTS', KEYS[1], owner)
  if type(held) == 'table' then
    return {-2, 0}
  end
  if pttl == -1 then
    return {-3, 0}
  end
  if held == 1 then
    -- A repeat of a call that acquired: the lease starts again now.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return {1, leaseToken(KEYS[1], owner, KEYS[2])}
  end
end
if pttl == -2 and (not head or head == owner) then
  local token = newToken(KEYS[2], ARGV[3], t)
  if not token then
    return {-4, 0}
  end
  redis.call('HSET', KEYS[1], owner, 1, owner .. ':token', token)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if head == owner then
    redis.call('LPOP', KEYS[3])
    redis.call('ZREM', KEYS[4], owner)
  end
  return {1, token}
end
if ARGV[5] ~= '1' then
  return {0, math.max(pttl, 0), -1}
end
local sleep, pos = keepPlace(KEYS[3], KEYS[4], owner, now, tonumber(ARGV[4]), tonumber(ARGV[6]), head, headDeadline, pttl)
if not sleep then
  return {-6, 0}
end
return {0, sleep, pos}
