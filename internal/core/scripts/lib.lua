-- lib.lua: functions that several scripts share; the Go code puts this
-- file in front of each script that uses it (see redis.go). It defines
-- functions only, and touches no key until one is called.

-- newToken issues the next fencing token of a lock whose counter is the
-- string at key: one more than the last (INCR). A counter that is new (its
-- key expired, or the server restarted empty) is seeded from the server's
-- clock in microseconds, with a lifetime of ttl ms: t, a TIME reply, or
-- nil to read the clock only then. Tokens so never go backwards while the
-- server's clock does not step back, since no lock is taken a million
-- times a second. It returns nil if key holds another type (left as it
-- is).
local function newToken(key, ttl, t)
  local n = redis.pcall('INCR', key)
  if type(n) == 'table' then
    return nil
  end
  if n == 1 then
    t = t or redis.call('TIME')
    n = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('SET', key, n, 'PX', ttl)
  end
  return n
end

-- leaseToken is the fencing token of owner's lease of the lock hash key:
-- its field <owner>:token, written when the lease took the lock. The
-- counter (the string at counter) is shared by every kind of lock of the
-- name, so a Semaphore or RWMutex lease of the same name may have moved it
-- since; it answers only for a lease taken before the field was kept.
local function leaseToken(key, owner, counter)
  return tonumber(redis.call('HGET', key, owner .. ':token'))
    or tonumber(redis.call('GET', counter)) or 0
end

-- millis is a TIME reply in milliseconds.
local function millis(t)
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- queueHead drops the expired places at the head of a fair lock's queue
-- (the list q, with the waiters' deadlines in the sorted set z, in Redis
-- time ms) and returns the head and its deadline, or false when the queue
-- is empty. The third value is true when q or z holds another type.
local function queueHead(q, z, now)
  local head = redis.pcall('LINDEX', q, 0)
  if type(head) == 'table' then
    return false, nil, true
  end
  while head do
    local d = redis.pcall('ZSCORE', z, head)
    if type(d) == 'table' then
      return false, nil, true
    end
    d = tonumber(d)
    if d and d > now then
      return head, d, false
    end
    redis.call('LPOP', q)
    redis.call('ZREM', z, head)
    head = redis.call('LINDEX', q, 0)
  end
  return false, nil, false
end

-- keepPlace takes or keeps owner's place in the queue q (deadlines z) for
-- ttl ms, and returns how long it may sleep before its next try or
-- heartbeat (at most maxSleep; until the holder's pttl for the head; until
-- the head's deadline for the next in line) and its position (0 the head,
-- 1 next, 2 further back); nil if z holds another type. head and
-- headDeadline are queueHead's.
local function keepPlace(q, z, owner, now, ttl, maxSleep, head, headDeadline, pttl)
  local mine = redis.pcall('ZSCORE', z, owner)
  if type(mine) == 'table' then
    return nil
  end
  if not mine then
    if not head then
      head = owner
    end
    redis.call('RPUSH', q, owner)
  end
  redis.call('ZADD', z, now + ttl, owner)
  -- Both keys live as long as the longest place in them.
  if redis.call('PTTL', z) < ttl then
    redis.call('PEXPIRE', q, ttl)
    redis.call('PEXPIRE', z, ttl)
  end
  local sleep = maxSleep
  if head == owner then
    if pttl > 0 then
      sleep = math.min(sleep, pttl)
    end
    return math.max(sleep, 1), 0
  end
  if redis.call('LINDEX', q, 1) == owner then
    if headDeadline then
      sleep = math.min(sleep, headDeadline - now + 1)
    end
    return math.max(sleep, 1), 1
  end
  return math.max(sleep, 1), 2
end

-- wakeHead publishes on channel the unlock addressed to the head of the
-- queue q (deadlines z): "fair\n<releaser>\n<head>", followed by tail (a
-- finish's "\n<tick>\n<done>\n<ledger id>", or nothing). Only that waiter
-- tries again; the others ignore it. It returns the head, '' if none.
local function wakeHead(q, z, channel, releaser, now, tail)
  local head = queueHead(q, z, now) or ''
  redis.call('PUBLISH', channel, 'fair\n' .. releaser .. '\n' .. head .. (tail or ''))
  return head
end

-- semWrongType is the index of the first of a semaphore's keys that holds
-- another type (KEYS[1] the permits, a sorted set; KEYS[2] their holds and
-- KEYS[3] their tokens, hashes), or nil.
local function semWrongType()
  local types = {'zset', 'hash', 'hash'}
  for i = 1, 3 do
    local t = redis.call('TYPE', KEYS[i])['ok']
    if t ~= 'none' and t ~= types[i] then
      return i
    end
  end
  return nil
end

-- prunePermits drops a semaphore's permits whose deadline is not after
-- now, with their holds and tokens (KEYS[1..3] as semWrongType's).
local function prunePermits(now)
  for _, p in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
    redis.call('ZREM', KEYS[1], p)
    redis.call('HDEL', KEYS[2], p)
    redis.call('HDEL', KEYS[3], p)
  end
end

-- entryField is the value of the field name in the history entry
-- ARGV[from..] (field-value pairs), or nil.
local function entryField(from, name)
  for i = from, #ARGV - 1, 2 do
    if ARGV[i] == name then
      return ARGV[i + 1]
    end
  end
  return nil
end

-- appendHistory appends an entry, the field-value pairs ARGV[from..], to
-- the history stream key, if there are any, trimming it approximately to
-- the latest keep entries (MAXLEN ~: Redis drops whole nodes only, so the
-- stream may hold more; readers show the latest keep alone). It returns
-- false, appending nothing, if key holds another type; else true and the
-- entry's time on the server's clock, in ms (nil if there was no entry).
--
-- An entry with the field skip (a tick not run, and the cause of it) is
-- coalesced with the stream's newest entry of the same skip and outcome
-- among the latest mergeWithin, when that one is no older than age ms
-- (readers show no older one): that entry is deleted and this one appended
-- (the newest again) with the field count, the old count (1 if it had
-- none) + 1, and first, the old first (or its tick; none if it had
-- neither). The entries newer than it must be skips of the same outcome
-- and another cause (the busy ticks of other replicas of a job that runs
-- on every replica, each replica's own run of busy ticks); any other entry
-- in between breaks the run.
local mergeWithin = 16

local function appendHistory(key, keep, from, age)
  if #ARGV < from then
    return true, nil
  end
  local skip = entryField(from, 'skip')
  local id
  if not skip then
    -- The common case, kept lean: the key's type is checked by the call
    -- that writes it.
    id = redis.pcall('XADD', key, 'MAXLEN', '~', keep, '*', unpack(ARGV, from))
  else
    local entry = {unpack(ARGV, from)}
    local outcome = entryField(from, 'outcome')
    -- The newest entry first (the common case: it is the one, or it
    -- breaks the run), then the few before it.
    local lasts = redis.pcall('XREVRANGE', key, '+', '-', 'COUNT', 1)
    if lasts.err then
      return false, nil
    end
    local floor = millis(redis.call('TIME')) - age
    local last, f
    local i = 1
    while lasts[i] and tonumber(string.match(lasts[i][1], '^(%d+)')) >= floor do
      local g = {}
      for k = 1, #lasts[i][2], 2 do
        g[lasts[i][2][k]] = lasts[i][2][k + 1]
      end
      if g.skip == skip and g.outcome == outcome then
        last, f = lasts[i], g
        break
      end
      if not g.skip or g.outcome ~= outcome or i >= mergeWithin then
        break
      end
      if i == 1 then
        lasts = redis.call('XREVRANGE', key, '+', '-', 'COUNT', mergeWithin)
      end
      i = i + 1
    end
    if last then
      local merged = {}
      for i = 1, #entry - 1, 2 do
        if entry[i] ~= 'count' and entry[i] ~= 'first' then
          merged[#merged + 1] = entry[i]
          merged[#merged + 1] = entry[i + 1]
        end
      end
      merged[#merged + 1] = 'count'
      merged[#merged + 1] = (tonumber(f.count) or 1) + 1
      local first = f.first or f.tick
      if first then
        merged[#merged + 1] = 'first'
        merged[#merged + 1] = first
      end
      redis.call('XDEL', key, last[1])
      entry = merged
    end
    id = redis.pcall('XADD', key, 'MAXLEN', '~', keep, '*', unpack(entry))
  end
  if type(id) == 'table' then
    return false, nil
  end
  return true, tonumber(string.match(id, '^(%d+)'))
end

-- renewHistory drops the entries of the history stream key older than age
-- ms at now (server time, ms; exactly: it runs once per every ms, so its
-- cost does not matter, and readers hide those that come of age
-- meanwhile) and sets its lifetime to age + every ms: renewed at least
-- every every ms while entries come (finish.lua, pass.lua), the stream
-- outlives its last entry by age. (A stream deleted by hand between two
-- renewals is made again by the next append without a lifetime, until the
-- next renewal.)
local function renewHistory(key, age, every, now)
  redis.call('XTRIM', key, 'MINID', math.max(now - age, 0))
  redis.call('PEXPIRE', key, age + every)
end
