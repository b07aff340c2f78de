-- fairrelease.lua: drop holds of the caller's lease of a fair lock; the
-- last one deletes the lock and wakes the head of the queue alone.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's Pub/Sub channel
-- KEYS[3] the queue (list of owner ids)
-- KEYS[4] the waiters' deadlines (sorted set, Redis time in ms)
-- ARGV[1] owner id
-- ARGV[2] holds the caller's lease has now
-- ARGV[3] holds to drop
-- Returns {status, head}: status as release.lua (1 released, 2 holds
-- dropped, 0 not held, -5 hold count differs); head is the owner id of the
-- waiter woken by the release ('' if none). The message published is
-- "fair\n<ARGV[1]>\n<head>": the waiter it names tries again; every other
-- waiter ignores it.
--
-- Idempotent, as release.lua.
local holds = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(holds) == 'table' then
  return {0, ''}
end
holds = tonumber(holds)
if not holds then
  return {0, ''}
end
local expected = tonumber(ARGV[2])
local drop = tonumber(ARGV[3])
if holds == expected then
  if holds > drop then
    redis.call('HSET', KEYS[1], ARGV[1], holds - drop)
    return {2, ''}
  end
elseif holds == expected - drop then
  return {2, ''}
else
  return {-5, ''}
end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = ''
local h = redis.pcall('LINDEX', KEYS[3], 0)
while h and type(h) ~= 'table' do
  local d = redis.pcall('ZSCORE', KEYS[4], h)
  if type(d) == 'table' then
    break
  end
  d = tonumber(d)
  if d and d > now then
    head = h
    break
  end
  redis.call('LPOP', KEYS[3])
  redis.call('ZREM', KEYS[4], h)
  h = redis.call('LINDEX', KEYS[3], 0)
end
redis.call('PUBLISH', KEYS[2], 'fair\n' .. ARGV[1] .. '\n' .. head)
return {1, head}
