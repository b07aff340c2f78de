// Package fleet is the store that the scheduler's replicas share: beside
// each job's lock (package lock), a ledger of its ticks, its run history,
// the tick events that tell the fleet a tick is done, the group of live
// replicas, and the control messages between them. It is built on a
// lock.Client and shares its connections:
//
//	locks, _ := lock.New(rdb, lock.WithClientID(replica))
//	store := fleet.New(locks)
//	g, _ := store.Ledger("report", "report")
//	cl, err := g.Claim(ctx, tick, false) // ErrDone: another replica ran it
//	if err == nil {
//		err := run(cl.Context())
//		_ = cl.Finish(context.WithoutCancel(ctx), fleet.Record{Done: true, Outcome: "ran"})
//	}
//
// # Once per tick
//
// Every replica of a service runs the same schedule; a tick is a scheduled
// time (any int64 that grows from tick to tick and is the same on every
// replica). For each tick T of a job, a replica claims T in its ledger:
//
//  1. if the ledger says T (or a later tick) is done or under way, the
//     claim returns ErrDone and takes nothing;
//  2. else it takes the job's lock in the same script step; while another
//     replica holds the lock for T, it waits for that run's finish (the
//     lock's unlock message, no polling) and goes back to 1; while the
//     lock is held for an earlier tick, it returns lock.ErrLocked (or waits
//     its turn, with queue);
//  3. holding the lock, the replica runs the job under the claim's Context,
//     which ends if the lock is lost;
//  4. Finish records the outcome, marks T done (or gives it back, for the
//     next claim to take over), appends the run to the history and
//     releases the lock, in one script step, so exactly one replica
//     records it.
//
// Which replica claims first is the scheduler's choice (it ranks the live
// members of a group, Store.Heartbeat); the ledger alone keeps a tick once.
//
// # Ledgers
//
// A Ledger (Store.Ledger) keeps, beside a lock at prefix:{n}:ledger:id,
// the ticks of a recurring task: the latest done, the latest claimed
// (seen), the one running with its owner and tries, and the last outcome.
// Ledger.Claim checks the ledger and takes the lock in one script
// (claim.lua), so that each tick is done once whatever the claimants'
// clocks say: it returns ErrDone for a tick done (or a later one done or
// under way), waits while another owner runs the same tick and returns
// ErrDone when that one finishes, and takes the tick over, with its try
// count going on, when the owner gives it back or dies. A tick that was
// claimed and never finished is never overtaken: a claim of a later tick
// that takes the lock gets the unfinished one (Claim.Tick says which), and
// its caller claims its own again afterwards. Claim.Finish records the
// outcome and releases the lock in one script (finish.lua). The scheduler
// package is built on it. A FairLedger's claims wait in the FairMutex's
// queue (the same scripts in fair mode). Ledger.Pause makes every claim
// return ErrPaused until it is undone or its PauseInfo.Until passes on
// the store's clock (pause.lua sets it with who, why and when; claim.lua
// reads the end); Record.Failed and Record.Succeeded keep a count of
// failures in a row in the ledger, and Record.PauseAfter pauses it in the
// finish that brings the count there (Claim.Paused); Ledger.Trigger counts manual
// requests, and Store.Publish and Store.Subscribe carry messages between
// the Clients of a store (the scheduler's fleet requests).
//
// WithOwnLock gives a ledger a lock of its own beside the lock, in its
// hash slot (prefix:{n}:own:<own>, the ledger at
// prefix:{n}:own:<own>:ledger:id), while its history stays the lock's
// (prefix:{n}:ledger:id:history): the scheduler's jobs that run on every
// replica give each replica such a ledger, so that each runs every tick
// once, with the same scripts, and all write to the job's history.
//
// A ledger keeps its backfills (Ledger.AddBackfill, backfill.lua) in a
// hash at prefix:{n}:backfills:id, in the lock's hash slot: per backfill
// its range, rate, total, state, progress (done, last) and next (the
// earliest start of its next tick, on the store's clock). An add whose
// range overlaps a running backfill's is refused in the same step
// (BackfillOverlapError); a cancel pauses, in the same step, the
// backfill's own ledger (a second key of the script, in the same slot).
// WithBackfillClaims tags a ledger's claim owner ids "/backfill": a claim
// of another ledger that finds the lock held by one waits for it (claim.lua
// answers {0, pttl, running, 1}), whatever its queue, so that a job's
// scheduled ticks come before its backfill's. The fleet's index of
// running backfills (Store.IndexBackfill, backfillindex.lua) is a hash at
// prefix:backfills:{backfills}, id -> "<job>/<ms of the add>": a hint its
// readers keep true (they drop the entries of backfills that ended, or
// that are not there past a grace), read once a poll by each replica
// instead of every job's backfills.
//
// A ledger keeps a history: a Redis Stream at prefix:{n}:ledger:id:history,
// in the lock's hash slot, whose entries are the field-value maps its
// callers give. Claim.Finish appends Record.Entry in the same script that
// records the finish and releases the lock, so a finish is in the history
// once, by its claimant, whatever the retries; a finish that finds the
// lock lost records nothing (the caller may Ledger.Append the entry to the
// history alone). Ledger.Pass moves the ledger's seen past ticks nobody
// claimed and appends an entry, once across the callers; with an entry
// that names a skip cause (the field skip), it records a skipped tick once
// per tick, and the history coalesces consecutive skips of one cause and
// outcome into one entry with a count and the first tick (the scheduler's
// busy, paused and excluded ticks, and its deadline_missed finishes). The history
// keeps the latest WithHistory keep entries (default 100), none older than
// its max age (default 30 days). Ledger.History reads it newest first,
// paged by entry id, and shows exactly those. To keep a finish cheap, the
// store trims the stream only approximately at each append (MAXLEN ~:
// whole stream nodes), drops the entries older than the max age once per
// a 16th of it (at most an hour) rather than at each append, and renews
// the stream's TTL (the max age and that period) as often; a ledger's own
// TTL (LedgerTTL) is renewed once a day. The stream may so hold more
// entries than History shows.
// Ledgers of one task may share one history (WithSharedHistory). The
// ledger also remembers when each outcome was last recorded
// (LedgerState.Last), and who had a tick before it was taken over
// (Claim.From). The memory backend keeps the same history.
//
// The unlock message of Claim.Finish names the ledger, the tick and
// whether it is done or given back: a Claim that waited for another
// owner's run of the tick is woken by it and returns ErrDone without
// asking the store. Ledger.Watch hears the claims and finishes of other
// Clients from announcements: a Client that watches a ledger announces
// each claim it takes of it, each claim it finds the lock held for an
// earlier tick (and lets go), and the finishes of its announced claims,
// in batches of a few milliseconds, one message per batch on one channel
// of the store (prefix:ticks). So the store writes a message per batch to
// each watching Client, not one per tick: its cost per tick does not grow
// with the number of Clients (100 ledgers' claims and finishes at once
// take a handful of messages). A Client that heard a tick done answers a
// Claim of it with ErrDone without asking the store. Store.Subscribed
// reports when the store has confirmed a Client's subscriptions. Claims and
// finishes of one Client that fall due in the same instant are sent
// together, in one pipeline: the first of them takes those queued by the
// time its goroutine runs, and one that comes later leads the next
// pipeline at once. None waits for a pipeline on its way (on a slow
// network, a round trip spent waiting would eat into the lease), and a
// claim's lease counts from when its pipeline went out. The pipelines run
// on connections of the go-redis client's main pool that the Client keeps
// from one to the next (up to four per server, as its renewals), not on
// go-redis's pool for pipelines, which dials when it has none idle: on a
// slow network a new connection's handshake (three round trips) kept
// finishes from arriving within the lease. With
// lock.WithReplicaAck or lock.WithAOFAck each goes alone, followed by its WAIT.
//
// Store.Heartbeat keeps a group of live members (a sorted set at
// prefix:members:{group}, deadlines on the server's clock; Store.Leave
// removes one at once): the scheduler's replicas rank each other with it,
// so that one claims each tick first.
//
// Store.Report keeps the replicas' reports (a hash at
// prefix:replicas:{replicas}, replica id → its report, stamped with the
// server's clock, and a sorted set beside it of when each is dropped; a
// replica is gone ttl after its last report, at once after
// Store.ReportStopped, and dropped ReplicaKeep after that, by the next
// report or read): the scheduler command's daemon reports its version,
// config, jobs and runs there, per process, where memberships are per
// group of jobs. A report writes its own entry and drops those due, O(log
// n) amortised; Store.Replicas reads them all.
package fleet
