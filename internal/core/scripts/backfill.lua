-- backfill.lua: keep the backfills of one job (Ledger.AddBackfill and the
-- rest), beside its ledger, on the server's clock.
-- KEYS[1] the job's backfills: a hash of "<id>/<field>" -> value, so that
--         every backfill of the job lives in one key (one hash slot, one
--         expiry). Each backfill has the fields the add gave it (job, from,
--         to, rate, only_missing, total, by), and state ("running",
--         "cancelled" or "finished"), created and ended (ms, the server's
--         clock; ended "0" while running), done (ticks handled), last
--         (the latest tick handled, ms; "0" before the first) and next (the
--         earliest start of its next tick, ms on the server's clock; "0":
--         at once)
-- KEYS[2] cancel only: the backfill's own ledger (its claims' ledger, in
--         the same hash slot), which the cancel pauses (pause.lua's fields)
--         so that no claim of it is granted after the cancel, even one
--         that was waiting for the lock
-- ARGV[1] "add", "cancel", "progress" or "list"
-- ARGV[2] the backfill's id (add, cancel, progress)
-- ARGV[3] how long the key lives after a call, in ms (and KEYS[2] when
--         the cancel makes it)
-- ARGV[4] how long a backfill is kept once it has ended, in ms
-- add:      ARGV[5..] field, value, field, value, ...; fields from and to
--           (ms), when given, are checked against the running backfills'
-- cancel:   ARGV[5] who cancels it
-- progress: ARGV[5] done, ARGV[6] last, ARGV[7] "1" if it is finished,
--           ARGV[8] ms from now until its next tick may start (next)
-- Every call but list first drops the backfills that ended more than
-- ARGV[4] ms ago (list reads alone: one HGETALL).
-- Returns {status, now, ...}, now the server's time (ms):
--   add      {1, now}: added, or the id was taken by an add of the same
--            nonce (the field "nonce": a retry of it, whose reply was lost;
--            nothing changed); {2, now}: the id is taken by another add;
--            {3, now, id}: the range [from, to] overlaps that of the
--            running backfill id (the least id, if several; nothing changed)
--   cancel   {1, now}: cancelled (or it was already); {0, now}: no such
--            backfill; {2, now}: it had finished
--   progress {1, now, state}: done and last recorded (last only if later
--            than the one recorded, done with it), next, and the state
--            ("finished" if ARGV[7] finished a running one); {0, now}: no
--            such backfill
--   list     {1, now, field, value, ...}: the whole hash, as it is
-- A key of another type fails the call (WRONGTYPE), untouched.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', KEYS[1])
local op, p = ARGV[1], ARGV[2] .. '/'
if op == 'list' then
  -- Read-only: the caller leaves out what ended ARGV[4] ago; the writes
  -- prune it.
  table.insert(all, 1, now)
  table.insert(all, 1, 1)
  return all
end
local keep = tonumber(ARGV[4])
local dead = {}
for i = 1, #all, 2 do
  local id = string.match(all[i], '^(.*)/ended$')
  local ended = tonumber(all[i + 1])
  if id and ended and ended > 0 and ended + keep <= now then
    dead[id .. '/'] = true
  end
end
local live = {}
for i = 1, #all, 2 do
  local id = string.match(all[i], '^(.*/)[^/]*$')
  if id and dead[id] then
    redis.call('HDEL', KEYS[1], all[i])
  else
    live[#live + 1] = all[i]
    live[#live + 1] = all[i + 1]
  end
end
local reply = {1, now}
local state = redis.call('HGET', KEYS[1], p .. 'state')
if op == 'add' then
  if state then
    local nonce = redis.call('HGET', KEYS[1], p .. 'nonce')
    for i = 5, #ARGV - 1, 2 do
      if ARGV[i] == 'nonce' and ARGV[i + 1] == nonce then
        return {1, now}
      end
    end
    return {2, now}
  end
  local from, to
  for i = 5, #ARGV - 1, 2 do
    if ARGV[i] == 'from' then
      from = tonumber(ARGV[i + 1])
    elseif ARGV[i] == 'to' then
      to = tonumber(ARGV[i + 1])
    end
  end
  if from and to then
    local f = {}
    for i = 1, #live, 2 do
      f[live[i]] = live[i + 1]
    end
    local other
    for i = 1, #live, 2 do
      local id = string.match(live[i], '^(.*)/state$')
      if id and live[i + 1] == 'running' then
        local a, b = tonumber(f[id .. '/from']), tonumber(f[id .. '/to'])
        if a and b and a <= to and from <= b and (not other or id < other) then
          other = id
        end
      end
    end
    if other then
      return {3, now, other}
    end
  end
  for i = 5, #ARGV - 1, 2 do
    redis.call('HSET', KEYS[1], p .. ARGV[i], ARGV[i + 1])
  end
  redis.call('HSET', KEYS[1], p .. 'state', 'running', p .. 'created', now, p .. 'ended', 0, p .. 'done', 0, p .. 'last', 0, p .. 'next', 0)
elseif not state then
  return {0, now}
elseif op == 'cancel' then
  if state == 'finished' then
    return {2, now}
  end
  -- The ledger first: a KEYS[2] of another type fails the call before
  -- anything is written. (A retry finds it cancelled, and pauses the
  -- ledger again: the same.)
  local fresh = redis.call('EXISTS', KEYS[2]) == 0
  redis.call('HSET', KEYS[2], 'paused', 1, 'pausedby', ARGV[5], 'pausenote', 'backfill cancelled', 'pausedat', now)
  redis.call('HDEL', KEYS[2], 'pauseduntil', 'pausefinish')
  if fresh then
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
  end
  if state == 'running' then
    redis.call('HSET', KEYS[1], p .. 'state', 'cancelled', p .. 'ended', now, p .. 'cancelled_by', ARGV[5])
  end
elseif op == 'progress' then
  local last = tonumber(redis.call('HGET', KEYS[1], p .. 'last')) or 0
  if tonumber(ARGV[6]) > last then
    redis.call('HSET', KEYS[1], p .. 'done', ARGV[5], p .. 'last', ARGV[6])
  end
  redis.call('HSET', KEYS[1], p .. 'next', now + math.max(0, tonumber(ARGV[8]) or 0))
  if ARGV[7] == '1' and state == 'running' then
    state = 'finished'
    redis.call('HSET', KEYS[1], p .. 'state', state, p .. 'ended', now)
  end
  reply[3] = state
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return reply
