-- members.lua: keep a group's membership, on the server's clock.
-- KEYS[1] the group: a sorted set of member -> the time until which it
--         counts as live (Redis time, ms)
-- ARGV[1] the member
-- ARGV[2] how long it counts as live from now, ms; 0: it leaves now
-- Drops the members whose time has passed, and returns the live ones.
-- A key of another type fails the call (WRONGTYPE), untouched.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
else
  redis.call('ZREM', KEYS[1], ARGV[1])
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
-- The group lives as long as its last member.
-- It is read before its lifetime is set: with a lifetime of 1 ms, a
-- server that stalls mid-script would otherwise expire the key under it.
local live = redis.call('ZRANGE', KEYS[1], 0, -1)
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
if last[2] then
  redis.call('PEXPIRE', KEYS[1], math.max(tonumber(last[2]) - now, 1))
end
return live
