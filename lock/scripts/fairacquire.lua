-- fairacquire.lua: take a fair lock in queue order, or keep the caller's
-- place in the queue (its heartbeat).
-- KEYS[1] the lock: a hash of owner -> holds (shared with the reentrant lock)
-- KEYS[2] the fencing token high-water mark (a string)
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
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The head of the queue, with expired places dropped. Key types are
-- checked by the first command on each key (pcall), not by TYPE.
local head = redis.pcall('LINDEX', KEYS[3], 0)
if type(head) == 'table' then
  return {-6, 0}
end
local headDeadline
while head do
  local d = redis.pcall('ZSCORE', KEYS[4], head)
  if type(d) == 'table' then
    return {-6, 0}
  end
  d = tonumber(d)
  if d and d > now then
    headDeadline = d
    break
  end
  redis.call('LPOP', KEYS[3])
  redis.call('ZREM', KEYS[4], head)
  head = redis.call('LINDEX', KEYS[3], 0)
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
    return {1, tonumber(redis.call('GET', KEYS[2])) or 0}
  end
end
if pttl == -2 and (not head or head == owner) then
  local token = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local last = redis.pcall('SET', KEYS[2], token, 'PX', ARGV[3], 'GET')
  if type(last) == 'table' and last.err then
    return {-4, 0}
  end
  last = tonumber(last)
  if last and last >= token then
    token = last + 1
    redis.call('SET', KEYS[2], token, 'PX', ARGV[3])
  end
  redis.call('HSET', KEYS[1], owner, 1)
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
local ttl = tonumber(ARGV[4])
local mine = redis.pcall('ZSCORE', KEYS[4], owner)
if type(mine) == 'table' then
  return {-6, 0}
end
if not mine then
  if not head then
    head = owner
  end
  redis.call('RPUSH', KEYS[3], owner)
end
redis.call('ZADD', KEYS[4], now + ttl, owner)
-- Both keys live as long as the longest place in them.
if redis.call('PTTL', KEYS[4]) < ttl then
  redis.call('PEXPIRE', KEYS[3], ttl)
  redis.call('PEXPIRE', KEYS[4], ttl)
end
local sleep = tonumber(ARGV[6])
if head == owner then
  if pttl > 0 then
    sleep = math.min(sleep, pttl)
  end
  return {0, math.max(sleep, 1), 0}
end
if redis.call('LINDEX', KEYS[3], 1) == owner then
  if headDeadline then
    sleep = math.min(sleep, headDeadline - now + 1)
  end
  return {0, math.max(sleep, 1), 1}
end
return {0, math.max(sleep, 1), 2}
