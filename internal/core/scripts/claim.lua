-- claim.lua: take a lock to do one tick of a recurring task, unless the
-- task's ledger says that tick is done or a later one was started.
-- KEYS[1] the lock: a hash of owner -> holds, <owner>:token -> token
-- KEYS[2] the fencing token counter (see acquire.lua)
-- KEYS[3] the ledger: a hash with the fields done (the latest tick done),
--         seen (the latest tick anyone claimed), running (the tick last
--         claimed), owner (its claimant), tries (tries of running so far),
--         outcome and finished (written by finish.lua), from (the owner
--         of the claim before running's when tries > 1, else ""), since (when
--         running was claimed, Redis time in ms), definition and defowner
--         (recorded by the latest claim that took the lock with one,
--         ARGV[10], and its owner), renewed and hrenewed (when the ledger's
--         and the history's lifetimes were last renewed, see finish.lua),
--         excluded (the latest tick recorded excluded, see pass.lua),
--         replace (the latest tick that asked the run of an earlier one to
--         end, ARGV[12])
-- ARGV[1] owner id, unique to this claim
-- ARGV[2] lease in milliseconds
-- ARGV[3] lifetime of KEYS[2] in milliseconds
-- ARGV[4] the tick: an integer that grows from tick to tick
-- ARGV[5] lifetime of KEYS[3] in milliseconds: set by a claim that takes
--         the lock only when ARGV[11] has passed since the last renewal
--         (see finish.lua's ARGV[13]); by one that moves seen alone, always
-- ARGV[6] 1: the claim is fair (FairMutex order): KEYS[4] and KEYS[5] are
--         the lock's queue and its waiters' deadlines (see fairacquire.lua)
-- ARGV[7] fair: how long a place in the queue lasts without a heartbeat, ms
-- ARGV[8] fair: the longest sleep to answer with (the heartbeat period), ms
-- ARGV[9] fair: how the caller waits: 0 it does not (one attempt); 1 only
--         while the tick it claims is under way; 2 whatever tick holds the
--         lock (overlap queue)
-- ARGV[10] the definition the claim records when it takes the lock (a
--         digest of what the claimant runs); "" records none
-- ARGV[11] how often the ledger's lifetime is renewed, ms (finish.lua's
--         ARGV[13])
-- ARGV[12] 1: the claim replaces (overlap replace): when it finds the lock
--         held by another owner for an earlier unfinished tick of the
--         ledger, it records ARGV[4] in the ledger's field replace (if
--         later than the one there): that run is asked to end (replaced);
--         and when it takes the lock and so takes such a tick over (its
--         holder gone), it records ARGV[4] likewise: the caller records
--         that tick replaced, not run, and claims its own again
-- A claim that finds the lock held by a backfill's claim (an owner id that
-- ends with "/backfill": core.BackfillOwnerTag) waits for it whatever
-- ARGV[9] says, but for a fair claim that does not wait (0), and its
-- answer {0, pttl, running, 1} says so (a fair one takes or keeps its
-- place): scheduled ticks come before a backfill's.
-- A fair claim that would wait takes a free lock only when the queue is
-- empty or the caller is its head, and otherwise takes or keeps its place:
-- the sleep in {0, sleep, running} is then the time to its next heartbeat.
-- A fair claim that would not wait takes a free lock whoever queues (the
-- queue may hold the waiters of a tick just done, on their way out), and
-- never takes a place. A claim answered done or paused leaves its place.
-- An earlier tick that was claimed and never finished (its claimant died,
-- lost the lock, or gave it back) is never overtaken: a claim that takes
-- the lock claims that tick instead, with its tries counting on, and the
-- caller claims its own again once it has finished it. So is an ordered
-- manual request (trigger.lua) after done: a claim of a later one that
-- takes the lock claims the first of them, done + 1, instead.
-- Returns {1, token, try, claimed, from, definition, defowner, at, req}
-- acquired (req: the ledger's req:<claimed>, see trigger.lua; "" none):
-- claimed is the tick claimed (ARGV[4], or the earlier unfinished one), try
-- the number of this claim's first try at it (1 + the tries before it),
-- from the owner of the claim before it when try > 1, else "", definition
-- and defowner the ledger's before this claim recorded its own ("" if
-- none), at the server's time of the claim in ms (TIME: the clock a
-- start deadline is measured on, the same for every claimant);
-- {2, tick} the tick, or the later one returned, is done or under way, or
-- the tick was recorded excluded and the lock is free;
-- {3, until} the ledger is paused (its field paused is 1, and its field
-- pauseduntil, if any, is after the server's clock; see pause.lua): nothing
-- is taken; until is pauseduntil, 0 if none;
-- {0, pttl, running} held by another owner, who claimed the tick running
-- (0: a tick already done, or a plain lock);
-- {-2, 0} KEYS[1] is not a hash; {-3, 0} KEYS[1] has no TTL; {-4, 0} KEYS[2]
-- is not a string; {-6, 0} KEYS[3] is not a hash; {-7, 0} KEYS[4] or
-- KEYS[5] is of another type.
--
-- Idempotent: the owner id is unique, so a client retry after a lost reply
-- finds the lock its own and returns the same claim.
local owner = ARGV[1]
local tick = tonumber(ARGV[4])
local f = redis.pcall('HMGET', KEYS[3], 'done', 'running', 'tries', 'seen', 'paused', 'owner', 'definition', 'defowner', 'renewed', 'pauseduntil', 'excluded', 'replace', 'reqlow')
if f.err then
  return {-6, 0}
end
local done = tonumber(f[1]) or 0
local running = tonumber(f[2]) or 0
local tries = tonumber(f[3]) or 0
if running <= done then
  running = 0
end
-- A claim moves seen up to its tick, whatever it answers: with the
-- ledger's other fields when it takes the lock, else on its own (answer).
local newSeen = tick > (tonumber(f[4]) or 0)
local function answer(r)
  if newSeen then
    redis.call('HSET', KEYS[3], 'seen', tick)
    redis.call('PEXPIRE', KEYS[3], ARGV[5])
  end
  return r
end
-- leave drops a fair caller's place, if it has one: its wait is over.
local function leave()
  if ARGV[6] == '1' then
    redis.pcall('LREM', KEYS[4], 0, owner)
    redis.pcall('ZREM', KEYS[5], owner)
  end
end
-- A pause with an end (pauseduntil) is over once the server's clock is
-- there: the claim goes on.
local pausedUntil = tonumber(f[10]) or 0
-- req reads the record of request n (trigger.lua), in a ledger that has
-- any: the others (a job's scheduled ticks) pay no HGET.
local function req(n)
  if not f[13] then
    return ''
  end
  return redis.call('HGET', KEYS[3], 'req:' .. n) or ''
end
if f[5] == '1' and (pausedUntil == 0 or pausedUntil > millis(redis.call('TIME'))) then
  leave()
  return answer({3, pausedUntil})
end
if done >= tick then
  leave()
  return answer({2, done})
end
if running > tick then
  leave()
  return answer({2, running})
end
local fair = ARGV[6] == '1'
local head, headDeadline, clock, now
if fair then
  clock = redis.call('TIME')
  now = millis(clock)
  local bad
  head, headDeadline, bad = queueHead(KEYS[4], KEYS[5], now)
  if bad then
    return {-7, 0}
  end
end
-- wait takes or keeps the fair caller's place, and answers how long to
-- sleep; a caller that will not wait gets the holder's TTL.
local waits = fair and ((ARGV[9] == '1' and running == tick) or ARGV[9] == '2')
-- askReplace records, when the claim replaces, that tick asks the run of
-- the earlier unfinished tick running to end (once nothing can fail).
local function askReplace()
  if ARGV[12] == '1' and running ~= 0 and running < tick and tick > (tonumber(f[12]) or 0) then
    redis.call('HSET', KEYS[3], 'replace', tick)
  end
end
local byBackfill = false
local function wait(pttl)
  if not waits and not byBackfill then
    askReplace()
    return answer({0, math.max(pttl, 1), running})
  end
  if not fair then
    askReplace()
    return answer({0, math.max(pttl, 1), running, 1})
  end
  local sleep = keepPlace(KEYS[4], KEYS[5], owner, now, tonumber(ARGV[7]), tonumber(ARGV[8]), head, headDeadline, pttl)
  if not sleep then
    return {-7, 0}
  end
  askReplace()
  if byBackfill then
    return answer({0, sleep, running, 1})
  end
  return answer({0, sleep, running})
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl ~= -2 then
  -- The key's type is checked by the call that reads it, not beforehand.
  local mine = redis.pcall('HEXISTS', KEYS[1], owner)
  if type(mine) == 'table' then
    return {-2, 0}
  end
  if pttl == -1 then
    return {-3, 0}
  end
  if mine == 0 and not (fair and ARGV[9] == '0') then
    for _, k in ipairs(redis.call('HKEYS', KEYS[1])) do
      if string.sub(k, -9) == '/backfill' then
        byBackfill = true
      end
    end
  end
  if mine == 1 then
    -- A repeat of the call that claimed: the lease starts again now.
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    local again = tonumber(f[2]) or tick
    return {1, leaseToken(KEYS[1], owner, KEYS[2]), tries, again, redis.call('HGET', KEYS[3], 'from') or '', f[7] or '', f[8] or '',
      millis(redis.call('TIME')), req(again)}
  end
  return wait(pttl)
end
if waits and head and head ~= owner then
  -- Free, but others came first.
  return wait(0)
end
-- A tick recorded excluded (pass.lua: a calendar or a freeze) is not run
-- after all by a claimant that learnt of its freeze a moment late: the
-- fleet's first decision holds. An earlier unfinished tick is still
-- taken over (it was not excluded).
if tick == (tonumber(f[11]) or 0) and not (running ~= 0 and running < tick) then
  leave()
  return answer({2, tick})
end
clock = clock or redis.call('TIME')
local token = newToken(KEYS[2], ARGV[3], clock)
if not token then
  return {-4, 0}
end
redis.call('HSET', KEYS[1], owner, 1, owner .. ':token', token)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
-- The caller's wait is over: its place goes, wherever it is.
leave()
local claimed = tick
if running ~= 0 and running < tick then
  claimed = running
  -- A claim that replaces takes the earlier tick over only to record it
  -- replaced by its own (its holder is gone): the caller does not run it.
  askReplace()
elseif running == 0 and done + 1 < tick and f[13] then
  -- An ordered manual request not done (trigger.lua's req:<n> with
  -- params) is never passed over: the claim of a later one claims it.
  local r = req(done + 1)
  if string.find(r, '\n[^\n]*\n') then
    claimed = done + 1
  end
end
local from = ''
if running == claimed then
  tries = tries + 1
  from = f[6] or ''
else
  tries = 1
end
local now = millis(clock)
local seen = math.max(tick, tonumber(f[4]) or 0)
local def = ARGV[10] or ''
-- from is written even when empty, so that nothing is deleted.
if def ~= '' then
  redis.call('HSET', KEYS[3], 'running', claimed, 'owner', owner, 'tries', tries, 'since', now, 'seen', seen, 'from', from, 'definition', def, 'defowner', owner)
else
  redis.call('HSET', KEYS[3], 'running', claimed, 'owner', owner, 'tries', tries, 'since', now, 'seen', seen, 'from', from)
end
-- The ledger's lifetime is renewed once per ARGV[11] (finish.lua's
-- ARGV[13]), not at each claim; and whenever the server's clock went
-- back past the last renewal.
if math.abs(now - (tonumber(f[9]) or 0)) >= (tonumber(ARGV[11]) or 0) then
  redis.call('HSET', KEYS[3], 'renewed', now)
  redis.call('PEXPIRE', KEYS[3], ARGV[5])
end
return {1, token, tries, claimed, from, f[7] or '', f[8] or '', now, req(claimed)}
