-- rwlib.lua: what every script of a read-write lock (rw*.lua) starts with;
-- the Go code puts it in front of each. It reads the server's clock and
-- defines the functions below.
-- KEYS[1] the lock: a hash. "writer" is the write lease's owner id and
--         "deadline" its end (Redis time, ms); each lease, the writer's and
--         every reader's, has <owner> -> holds and <owner>:token -> its
--         fencing token. Its TTL reaches the latest deadline of a lease.
-- KEYS[2] the readers' deadlines: a sorted set of owner id -> Redis time,
--         in ms; same TTL as KEYS[1]
-- KEYS[3] the marks of waiting writers: a sorted set of owner id -> Redis
--         time in ms when the mark lapses; its TTL reaches the last one
-- KEYS[4] and on: as each script says.
-- Deadlines come from the server's clock (TIME), never a client's.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- rwType is nil if the keys are of our types (or absent), else the reply
-- of a script that found one that is not: {-2, 0} for KEYS[1], {-7, i}
-- for KEYS[i].
local function rwType()
  local lt = redis.call('TYPE', KEYS[1])['ok']
  if lt ~= 'none' and lt ~= 'hash' then
    return {-2, 0}
  end
  for i = 2, 3 do
    local kt = redis.call('TYPE', KEYS[i])['ok']
    if kt ~= 'none' and kt ~= 'zset' then
      return {-7, i}
    end
  end
  return nil
end

-- prune drops the leases and the marks whose time is over, and the lock
-- when no lease is left. A crashed holder stops counting at its deadline.
local function prune()
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('EXISTS', KEYS[1]) == 0 then
    redis.call('DEL', KEYS[2])
    return
  end
  local dead = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
  for _, r in ipairs(dead) do
    redis.call('HDEL', KEYS[1], r, r .. ':token')
  end
  if #dead > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  end
  local w = redis.call('HGET', KEYS[1], 'writer')
  if w and (tonumber(redis.call('HGET', KEYS[1], 'deadline')) or 0) <= now then
    redis.call('HDEL', KEYS[1], 'writer', 'deadline', w, w .. ':token')
    w = false
  end
  if not w and redis.call('ZCARD', KEYS[2]) == 0 then
    redis.call('DEL', KEYS[1], KEYS[2])
  end
end

-- settle sets the TTL of the lock and the readers' set to the latest
-- deadline of a lease, or deletes them when there is none.
local function settle()
  local last = tonumber(redis.call('HGET', KEYS[1], 'deadline')) or 0
  local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
  if top[2] then
    last = math.max(last, tonumber(top[2]))
  end
  if last > now then
    redis.call('PEXPIRE', KEYS[1], last - now)
    redis.call('PEXPIRE', KEYS[2], last - now)
  else
    redis.call('DEL', KEYS[1], KEYS[2])
  end
end

-- holding tells whether owner holds a lease of the mode ('w' or 'r').
local function holding(mode, owner)
  if mode == 'w' then
    return redis.call('HGET', KEYS[1], 'writer') == owner
  end
  return redis.call('ZSCORE', KEYS[2], owner) ~= false
end

-- free tells whether no lease is left.
local function free()
  return redis.call('HEXISTS', KEYS[1], 'writer') == 0 and redis.call('ZCARD', KEYS[2]) == 0
end
