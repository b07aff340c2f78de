-- backfillindex.lua: the fleet's index of running backfills (Client.
-- IndexBackfill and the rest): a hint of which jobs have one, so that the
-- replicas read a job's backfills (backfill.lua) only when it names them.
-- KEYS[1] a hash of backfill id -> "<job>/<ms>", ms the server's time of
--         the add
-- ARGV[1] "add", "drop" or "list"
-- ARGV[2] the backfill's id (add, drop)
-- ARGV[3] add: its job
-- ARGV[4] add: how long the key lives after an add, in ms
-- Returns {now, ...}, now the server's time (ms): add and drop {now};
-- list {now, id, value, id, value, ...}. An add again of an id rewrites
-- it (a retry: the same, but its time). A key of another type fails the
-- call (WRONGTYPE), untouched.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op = ARGV[1]
if op == 'add' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3] .. '/' .. now)
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {now}
elseif op == 'drop' then
  redis.call('HDEL', KEYS[1], ARGV[2])
  return {now}
end
local reply = redis.call('HGETALL', KEYS[1])
table.insert(reply, 1, now)
return reply
