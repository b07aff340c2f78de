-- finish.lua: record how a claimed tick ended, then release the lock and
-- wake its waiters (see claim.lua for the ledger's fields).
-- KEYS[1] the lock hash
-- KEYS[2] the lock's Pub/Sub channel
-- KEYS[3] the ledger hash
-- KEYS[4] the ledger's history stream
-- ARGV[1] owner id of the claim
-- ARGV[2] holds the claim's lease has now (all are dropped)
-- ARGV[3] the tick
-- ARGV[4] 1: the tick is done; 0: it is given back, to be claimed again
-- ARGV[5] the outcome, a word
-- ARGV[6] tries of the tick so far
-- ARGV[7] lifetime of KEYS[3] in milliseconds (see ARGV[13])
-- ARGV[8] the tail of the message to publish, which names the tick
--         finished: "\n<tick>\n<1 done, 0 given back>\n<ledger id>"; the
--         message is the owner id followed by it (the unlock message of
--         release.lua, with a tail), or, for a fair claim, the fair unlock
--         message followed by it
-- ARGV[9] a tick up to which the claimant handled every tick: the ledger's
--         seen moves up to it
-- ARGV[10] 1: the claim was fair: KEYS[5] and KEYS[6] are the lock's queue
--         and waiters' deadlines, and the message wakes the queue's head
--         alone ("fair\n<ARGV[1]>\n<head>", see fairrelease.lua)
-- ARGV[11] how many entries the history keeps (trimmed approximately:
--         readers show the latest ARGV[11] alone)
-- ARGV[12] how long the history keeps an entry, ms (readers hide older
--         ones)
-- ARGV[13] how often the ledger's lifetime is renewed, ms: a finish (or a
--         claim) sets it to ARGV[7] only when this much has passed since
--         the last renewal (the ledger's field renewed, ms on the server's
--         clock), so that the ledger outlives its last claim or finish by
--         ARGV[7] - ARGV[13] at least
-- ARGV[14] how often the history's lifetime is renewed and its entries
--         older than ARGV[12] dropped, ms (the ledger's field hrenewed): the
--         stream then lives ARGV[12] + ARGV[14], so that it outlives its
--         last entry by ARGV[12] at least
-- ARGV[15] the failures in a row (the ledger's field failures): "+" the
--         run failed, one more; "0" it succeeded, back to 0 (the field
--         goes); "" neither, as they are
-- ARGV[16] with "+": the failures in a row that pause the ledger, 0 never:
--         when the count reaches it and the ledger is not paused (or its
--         pause is over, see pause.lua), the finish pauses it (paused,
--         pausedby ARGV[17], pausenote ARGV[18], pausedat, pausefinish the
--         owner ARGV[1]; no pauseduntil) and answers 2
-- KEYS[7] (optional; then KEYS[5] and KEYS[6] are passed even when the
--         claim is not fair) the ledger's chain record, a sorted set: a
--         finish that marks the tick done (moves the ledger's done up to
--         it: once per tick) adds to it, in the same step,
--         "<tick>\n<outcome>\n<the entry's tick field>\n<ms now>\n<the
--         entry's params field>" scored by the tick, for the runs that
--         follow this one (Record.Chain; params are JSON, no newline); it
--         keeps the latest 1000 and lives as long as the ledger
-- ARGV[19..] the run's history entry: field-value pairs appended to
--         KEYS[4] when the ledger records the finish (none: no entry); one
--         with the field skip is coalesced with the newest entry of the same
--         skip and outcome (lib.lua's appendHistory)
-- Returns 1 finished; 2 finished, and the finish paused the ledger
-- (ARGV[16]; a repeat of it answers 2 again); 0 the caller does not hold the lock (nothing
-- touched); 1 also when the lock has expired under a claim whose run ended
-- while the caller could not reach the server (a partition, a paused
-- server) and no one has claimed the tick since (the ledger's running and
-- owner are still the caller's): a done tick is recorded as such, late,
-- so that it is not run again; -5 the hold count differs; -6 KEYS[3] is not a hash (the lock
-- was released all the same); -8 KEYS[4] is not a stream (the ledger
-- recorded the finish and the lock was released all the same, without a
-- history entry); -9 as -8, and the finish paused the ledger (as 2): a
-- pause is never hidden behind the history's error.
--
-- Idempotent: a client retry after a lost reply finds the ledger finished
-- by this owner and returns 1 again.

-- record writes the finish to the ledger (a hash or none), with the time
-- of the last finish of each outcome (at:<outcome>, ms on the server's
-- clock: the history entry's, else TIME), and its entry to the history;
-- false if the history is of another type; and the time it wrote.
-- f is the ledger's done, seen, renewed, hrenewed, failures, paused and
-- pauseduntil (HMGET). Its third answer is true when the finish paused the
-- ledger (ARGV[16]).
local function record(f)
  local renewed, hrenewed = tonumber(f[3]) or 0, tonumber(f[4]) or 0
  local histEvery = tonumber(ARGV[14]) or 0
  -- The entry's id is its time on the server's clock: no TIME then.
  local histOK, now = appendHistory(KEYS[4], ARGV[11], 19, tonumber(ARGV[12]))
  -- (abs: also when the server's clock went back past the last renewal)
  if now and math.abs(now - hrenewed) >= histEvery then
    renewHistory(KEYS[4], tonumber(ARGV[12]), histEvery, now)
    hrenewed = now
  else
    hrenewed = nil
  end
  now = now or millis(redis.call('TIME'))
  local fields = {'outcome', ARGV[5], 'tries', ARGV[6], 'finished', ARGV[1], 'at:' .. ARGV[5], now}
  if ARGV[4] == '1' and (tonumber(f[1]) or 0) < tonumber(ARGV[3]) then
    fields[#fields + 1] = 'done'
    fields[#fields + 1] = ARGV[3]
  end
  if (tonumber(f[2]) or 0) < tonumber(ARGV[9]) then
    fields[#fields + 1] = 'seen'
    fields[#fields + 1] = ARGV[9]
  end
  local paused = false
  if ARGV[15] == '+' then
    local failures = (tonumber(f[5]) or 0) + 1
    fields[#fields + 1] = 'failures'
    fields[#fields + 1] = failures
    local after = tonumber(ARGV[16]) or 0
    local untilMs = tonumber(f[7]) or 0
    local inForce = f[6] == '1' and (untilMs == 0 or untilMs > now)
    if after > 0 and failures >= after and not inForce then
      paused = true
      for _, v in ipairs({'paused', 1, 'pausedby', ARGV[17], 'pausenote', ARGV[18], 'pausedat', now, 'pausefinish', ARGV[1]}) do
        fields[#fields + 1] = v
      end
      redis.call('HDEL', KEYS[3], 'pauseduntil')
    end
  elseif ARGV[15] == '0' and f[5] then
    redis.call('HDEL', KEYS[3], 'failures')
  end
  redis.call('HSET', KEYS[3], unpack(fields))
  if KEYS[7] and ARGV[4] == '1' and (tonumber(f[1]) or 0) < tonumber(ARGV[3]) then
    redis.call('ZADD', KEYS[7], ARGV[3], ARGV[3] .. '\n' .. ARGV[5] .. '\n' .. (entryField(19, 'tick') or '') .. '\n' .. now .. '\n' .. (entryField(19, 'params') or ''))
    redis.call('ZREMRANGEBYRANK', KEYS[7], 0, -1001)
    redis.call('PEXPIRE', KEYS[7], ARGV[7])
  end
  -- Once per period, not at each finish (the HSET apart, so that the
  -- common finish builds no longer list).
  if hrenewed then
    redis.call('HSET', KEYS[3], 'hrenewed', hrenewed)
  end
  if math.abs(now - renewed) >= (tonumber(ARGV[13]) or 0) then
    redis.call('HSET', KEYS[3], 'renewed', now)
    redis.call('PEXPIRE', KEYS[3], ARGV[7])
  end
  return histOK, now, paused
end
local holds = redis.pcall('HGET', KEYS[1], ARGV[1])
if type(holds) == 'table' then
  holds = nil
end
holds = tonumber(holds)
if not holds then
  local f = redis.pcall('HMGET', KEYS[3], 'finished', 'owner', 'running', 'done', 'seen', 'renewed', 'hrenewed', 'failures', 'paused', 'pauseduntil', 'pausefinish')
  if f.err then
    return 0
  end
  if f[1] == ARGV[1] then
    if f[11] == ARGV[1] then
      return 2
    end
    return 1
  end
  if ARGV[4] == '1' and f[2] == ARGV[1] and tonumber(f[3]) == tonumber(ARGV[3])
      and (tonumber(f[4]) or 0) < tonumber(ARGV[3]) and redis.call('EXISTS', KEYS[1]) == 0 then
    local histOK, _, paused = record({f[4], f[5], f[6], f[7], f[8], f[9], f[10]})
    -- The lock is free already: the message only tells listeners the
    -- tick is done.
    redis.call('PUBLISH', KEYS[2], ARGV[1] .. ARGV[8])
    if not histOK then
      return paused and -9 or -8
    end
    if paused then
      return 2
    end
    return 1
  end
  return 0
end
if holds ~= tonumber(ARGV[2]) then
  return -5
end
-- The ledger's type is checked by the call that reads it.
local f = redis.pcall('HMGET', KEYS[3], 'done', 'seen', 'renewed', 'hrenewed', 'failures', 'paused', 'pauseduntil')
local ok = not f.err
local histOK, now, paused = true, nil, false
if ok then
  histOK, now, paused = record(f)
end
redis.call('DEL', KEYS[1])
-- The message names the tick only when the ledger recorded it.
local tail = ok and ARGV[8] or ''
if ARGV[10] == '1' then
  wakeHead(KEYS[5], KEYS[6], KEYS[2], ARGV[1], now or millis(redis.call('TIME')), tail)
else
  redis.call('PUBLISH', KEYS[2], ARGV[1] .. tail)
end
if not ok then
  return -6
end
if not histOK then
  return paused and -9 or -8
end
if paused then
  return 2
end
return 1
