-- fairleave.lua: take a waiter out of a fair lock's queue (its wait ended),
-- and wake the new head if the lock is free.
-- KEYS[1] the lock hash
-- KEYS[2] the lock's Pub/Sub channel
-- KEYS[3] the queue (list of owner ids)
-- KEYS[4] the waiters' deadlines (sorted set, Redis time in ms)
-- ARGV[1] the waiter's owner id
-- Returns {removed, head}: removed is 1 if the waiter had a place, else 0;
-- head is the owner id of the waiter woken ('' if none). The message is
-- "fair\n<ARGV[1]>\n<head>", as fairrelease.lua's.
local removed = redis.pcall('LREM', KEYS[3], 0, ARGV[1])
if type(removed) == 'table' then
  return {0, ''}
end
if type(redis.pcall('ZREM', KEYS[4], ARGV[1])) == 'table' then
  return {0, ''}
end
if removed == 0 or redis.call('EXISTS', KEYS[1]) == 1 then
  return {removed, ''}
end
local head = queueHead(KEYS[3], KEYS[4], millis(redis.call('TIME')))
if not head then
  return {removed, ''}
end
redis.call('PUBLISH', KEYS[2], 'fair\n' .. ARGV[1] .. '\n' .. head)
return {removed, head}
