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
-- position (0: the head) and tries again within sleep ms or when woken;
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
local lt = redis.call('TYPE', KEYS[1])['ok']
if lt ~= 'none' and lt ~= 'hash' then
  return {-2, 0}
end
local qt = redis.call('TYPE', KEYS[3])['ok']
local zt = redis.call('TYPE', KEYS[4])['ok']
if (qt ~= 'none' and qt ~= 'list') or (zt ~= 'none' and zt ~= 'zset') then
  return {-6, 0}
end
-- Drop expired places from the head.
while true do
  local head = redis.call('LINDEX', KEYS[3], 0)
  if not head then
    break
  end
  local d = tonumber(redis.call('ZSCORE', KEYS[4], head))
  if d and d > now then
    break
  end
  redis.call('LPOP', KEYS[3])
  redis.call('ZREM', KEYS[4], head)
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -1 then
  return {-3, 0}
end
local head = redis.call('LINDEX', KEYS[3], 0)
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
if pttl ~= -2 and redis.call('HEXISTS', KEYS[1], owner) == 1 then
  -- A repeat of a call that acquired.
  return {1, tonumber(redis.call('GET', KEYS[2])) or 0}
end
if ARGV[5] ~= '1' then
  return {0, math.max(pttl, 0), -1}
end
local ttl = tonumber(ARGV[4])
if not redis.call('ZSCORE', KEYS[4], owner) then
  redis.call('RPUSH', KEYS[3], owner)
end
redis.call('ZADD', KEYS[4], now + ttl, owner)
for _, k in ipairs({KEYS[3], KEYS[4]}) do
  if redis.call('PTTL', k) < ttl then
    redis.call('PEXPIRE', k, ttl)
  end
end
local pos = redis.call('LPOS', KEYS[3], owner)
local sleep = tonumber(ARGV[6])
if pos == 0 and pttl > 0 then
  sleep = math.min(sleep, pttl)
elseif pos == 1 then
  local d = tonumber(redis.call('ZSCORE', KEYS[4], head))
  if d then
    sleep = math.min(sleep, d - now + 1)
  end
end
return {0, math.max(sleep, 1), pos}
