// Package scheduler runs cron jobs once per tick across a fleet: every
// replica of a service runs the same Scheduler with the same jobs, and each
// scheduled tick of each job runs on one replica, under the job's lock, with
// the lock's watchdog keeping it while the job runs.
//
//	locks, _ := lock.New(rdb, lock.WithClientID(replica))
//	s, _ := scheduler.New(locks, scheduler.WithLogger(log))
//	_ = s.Add(scheduler.Job{Name: "report", Schedule: "0 6 * * *", Run: jobs.Func(report)})
//	err := s.Run(ctx) // until ctx ends (then a graceful stop), Shutdown or Close: ErrClosed
//
// # Once per tick
//
// A tick is a scheduled time, taken from the schedule, never from the clock
// at which a timer fired; every replica computes the same ticks (schedules
// without a zone are read in UTC, and @every d is aligned to the Unix epoch).
// Each job has a ledger beside its lock (fleet.Ledger, in the lock's hash
// slot) that records the latest tick done and the tick running, with its
// owner. For each tick T, each replica:
//
//  1. claims T: in one step, it checks the ledger (T done, or a later tick
//     done or under way: skipped_done) and takes the lock;
//  2. while another replica holds the lock for T, waits for it through the
//     lock's unlock messages (no polling) and goes back to 1, so that it
//     stops waiting as soon as T is done; while the lock is held for an
//     earlier tick, skips T (overlap skip: skipped_busy), waits its turn
//     (overlap queue), or asks that run to end and waits for the lock
//     (overlap replace, below);
//  3. holding the lock, marks T running and runs the job with a ctx that
//     ends on timeout, on lock loss (cause lock.ErrLockLost) and on shutdown
//     (cause ErrClosed), carrying the run's jobs.Info (jobs.InfoFrom);
//  4. in a deferred finalizer, also after a panic, records the outcome,
//     marks T done unless this replica's stop interrupted the run, and
//     releases the lock, with a fresh context, in the same step.
//
// # Who claims
//
// Not every replica claims every tick: that would cost the store N claims
// per tick for N replicas. Each replica keeps a membership record in the
// lock store (fleet.Store.Heartbeat, renewed every third of WithMemberTTL,
// 3s by default, on the store's clock; a replica that stops leaves it at
// once, one that dies is gone within the TTL). Its group is
// "scheduler:" and a digest of the names of the jobs the replica runs, so
// a replica is ranked only among replicas that run the same jobs: a
// program with other jobs on the same store and key prefix never comes
// first for a job it does not run. For each job and tick, every replica
// ranks the live members of its group by rendezvous hashing (FNV-1a of
// member, job and tick, mixed), so all that see the same members agree
// without talking, and each is first for about 1/N of the ticks. A member
// is ranked only for the ticks after its trigger loops started (its name
// carries the latest start, on its own clock): a replica fires only those,
// and one whose clock is ahead would otherwise be first for a tick it
// never fires, and its claim of the next tick would have that one answered
// done:
//
//   - the first in rank claims at once, as above;
//   - the others do not wake for the tick until its fallback delay, r ×
//     WithClaimFallback (250ms by default) for the replica of rank r: a
//     timer, no goroutine. Meanwhile they hear the fleet's claims and
//     finishes (fleet.Ledger.Watch: announced in batches, one message per
//     few milliseconds for the whole fleet's ticks). A tick heard done, or
//     let go by a claim that found the job's lock held (overlap skip), is
//     recorded skipped_done or skipped_busy with no command sent; a tick
//     heard claimed is waited on until that claim's lease has passed (a
//     run longer than the fallback costs no other claim; if its claimant
//     died, the replica claims then, and takes the tick over once the lock
//     expires); a tick heard given back (a handoff) is claimed at once;
//     otherwise the replica claims when its delay ends, and from then on
//     everything is as above, so a tick whose first replica died, hangs or
//     lost its connection runs late by the fallback, never not at all.
//
// A manual run (Trigger) is claimed the same way, ranked on its number, by
// one replica. A paused job's ticks are recorded paused without a claim:
// Pause tells the fleet in a message (a replica that missed it learns it
// from its next claim), and a paused job's tick is claimed again every
// 10 seconds, so that a lost resume message delays the resume by that much
// at most.
//
// The membership decides only the cost, never whether a tick runs once:
// that is the ledger's. A replica that does not know the membership (before
// its first heartbeat, or when its heartbeats fail for a TTL) claims every
// tick at once, as a lone replica does. When replicas see different members
// (one joined or died less than a heartbeat ago, or runs other jobs), two
// may each rank themselves first and both claim (the ledger keeps one), or
// none may (the tick waits for a fallback). An announcement lost with a
// connection costs the listener one claim, answered skipped_done. Claims
// and finishes of one replica that fall due in the same instant go to
// Redis together, in pipelines, none waiting for another on its way (see
// the fleet package). The counter
// lockcron.job.claims says, per job, why this replica claimed (preferred,
// fallback, given_back, before_later, unknown) or did not (spared). A
// replica never claims a tick of a job while it still decides on an
// earlier one (waits for its fallback, or has its claim on the way), unless
// it heard the earlier one claimed by another replica: it claims the
// earlier one at once (before_later) and the later one after its answer,
// since a later claim that reached the ledger first would have the earlier
// tick answered done, and lost (a fallback that ends
// after the next tick falls due: rank × fallback above the period, or the
// replicas first in rank for the earlier tick running late clocks).
// WithClaimFallback(0)
// turns the ranking off. On the memory backend, a lone Scheduler is always
// first.
//
// Because the ledger compares ticks and not clocks, a tick runs once however
// far the replicas' clocks are apart, up to one period: a replica whose clock
// is behind finds the tick done when its timer fires.
//
// On one replica, a job has at most one tick in hand (claiming or running),
// two under overlap queue; a further tick is skipped_busy without asking
// Redis. So overlap queue does not queue without bound: when runs fall
// behind (runs longer than the period, or a lock held by a dead replica
// until it expires), the fleet's claims run in turn, a claim finds ticks
// before a later one claimed as done (skipped_done), and the ticks in
// between are let go, as Quartz coalesces misfired triggers. Only a tick
// that was claimed and not finished is never let go (below).
//
// # Spreading the load: jitter and H
//
// Jobs that share a schedule (every "0 * * * *" of a fleet) would all fire
// in the same millisecond. Two ways spread them, both derived from a hash
// of the job's Name (SHA-256, never a per-process seed), so that every
// replica, and every restart, computes the same ticks:
//
//   - Job.Jitter moves each tick of the schedule later by the job's offset:
//     a fraction of the name's hash, fixed per job, of the smaller of Jitter
//     and the time to the next tick, truncated to whole milliseconds. So an
//     offset is in [0, Jitter), a moved tick stays before the next tick of
//     the schedule, and the moved ticks are the job's ticks everywhere: the
//     ledger, misfires, Status.Next, the gauges and Jobs' NextTicks. With
//     "@every 1m" and Jitter 30s, a job fires at, say, 17.342s past every
//     minute, another at 4.018s.
//   - H, as in Jenkins, in a cron field (seconds too) stands for values
//     picked by a hash h of the name and the field (so minute and hour pick
//     apart): H is one value of the field's range; H/n every n-th value of
//     the range, from its start plus h mod n; H(a-b) and H(a-b)/n the same
//     within a-b. For day of month, H and H/n pick from 1-28, which every
//     month has. "H H * * *" runs once a day at a time of the job's own;
//     "H/15 * * * *" every quarter of an hour from a minute of its own;
//     "H(0-29)/10 H(1-5) * * *" three times, ten minutes apart, in an hour
//     of its own from 1 to 5 am. A step must be from 1 (every value) to the
//     size of its range, and a range within the field's. The spec is
//     rewritten to numbers before it is parsed; ParseJobSchedule reads a
//     spec as a job would, and ParseSchedule, which has no name to hash,
//     refuses H.
//
// Both change the ticks of a job whose name or spec changes: rename a job,
// and it moves.
//
// # Stopping and dying
//
// Shutdown (the scheduler command calls it on SIGTERM and SIGINT) stops the
// triggers, cancels every run's ctx with cause ErrClosed and every wait,
// waits for the runs to return within its ctx, finishes each run under its
// job's OnShutdown policy and releases its lock at once, then returns; Run
// then returns ErrClosed. Under ShutdownHandoff (the default) the tick is
// given back: a replica waiting for it takes it within a round trip and runs
// it, with jobs.Info.Attempt one higher. Under ShutdownAbandon it is marked done
// (outcome interrupted). Close does the same without waiting for the job
// funcs. If Shutdown's ctx ends first (a second signal), it finishes the runs
// still going at once and returns.
//
// A replica that dies mid-run (SIGKILL, a lost machine) sends nothing: its
// lock expires within one lease (lock.WithLeaseTime). A replica waiting for
// the tick then claims it, finds it unfinished, and runs it again
// (ShutdownHandoff) or records it as interrupted (ShutdownAbandon). An
// unfinished tick is never overtaken: if a claim of a later tick takes the
// freed lock first (a replica that was not waiting for the earlier one, a
// tick queued under OverlapQueue, the next tick's claim in the same
// instant), the ledger hands it the earlier tick, which it runs first
// (jobs.Info.Attempt one higher) or records as interrupted under abandon;
// then it claims its own tick again. A replica killed mid-run thus has its
// tick re-run within about one lease while any replica runs the job.
//
// An exec job's processes do not outlive their replica, even one killed
// with SIGKILL (see package jobs/execjob), so a re-run never overlaps them.
//
// # Misfires
//
// When a replica starts, each job's ledger tells the latest tick any replica
// claimed. Ticks due since then were missed while every replica was down:
// MisfireSkip counts them as missed; MisfireRunOnce runs the latest once, if
// it is no older than MisfireGrace, and counts the others. They are
// recorded missed in the ledger and the history only once the store's
// clock is the member TTL and the claim fallback past them: a replica
// whose clock runs ahead, starting just before a tick, finds that tick due
// and unclaimed, while on the store's clock it is not due yet and the
// fleet is about to claim it (the same holds for a tick whose fallback
// claim is on its way); recording it missed would close it to that claim.
// A catch-up whose latest missed tick is more recent than that records no
// history entry (its WARN and the missed count still tell).
// A job whose ledger is empty (new, or idle for fleet.LedgerTTL) has
// missed nothing. A replica
// that falls behind by more than a tick while it runs (a stalled process)
// takes the latest tick due and counts those in between as missed.
//
// # Start deadline
//
// Job.StartDeadline (the config's start_deadline) bounds how late after its
// tick a run may start, as Kubernetes' CronJob startingDeadlineSeconds and
// Temporal's catch-up window do. A tick whose run cannot start in time is
// not run, whatever held it up: the lock held by another run (overlap
// queue, jobs that share a lock, a manual run), the fallback of the
// replicas not first in rank, a concurrency group that stays full, a
// retry's backoff, a takeover of a tick whose claimant died or gave it
// back, a misfire catch-up, a replica that fired late. How it is decided:
//
//   - The deadline is measured on the store's clock: a claim that takes the
//     lock answers with Redis TIME (fleet.Claim.At), and the tick (the same
//     on every replica) plus the deadline is compared with it. Replicas'
//     clocks do not decide; a replica whose clock is behind by more than
//     the deadline finds its ticks late.
//   - It is recorded once across the fleet by the replica whose claim took
//     the lock too late: that claim finishes the tick at once, without
//     running it, with the outcome deadline_missed, marking it done in the
//     ledger and appending it to the run history in the same script step
//     as every finish (so the other replicas' claims answer it done:
//     skipped_done there). A tick no replica could claim in time is still
//     claimed, late, by the replica first in rank or a fallback, and so
//     recorded. One whose claim waits for the lock (overlap queue) is
//     recorded when the lock comes free, not at its deadline: the claim
//     that takes the lock decides, and a record made before could overtake
//     an earlier tick of the job still unfinished, which the ledger never
//     lets happen.
//   - Under OverlapSkip a tick whose lock is held by an earlier run does
//     not wait for it: it is skipped_busy, as without a deadline.
//   - Every start of the tick must be within the deadline, the first try's
//     and the others': a retry whose backoff would end after it is not
//     made (the tick ends deadline_missed, with the failed try's error in
//     its history entry), and a tick given back or whose claimant died is
//     not taken over after it (Kubernetes' and Temporal's deadlines bound
//     the first start only; here a job with a deadline never starts late).
//     A run that started in time is never cut short by the deadline: that
//     is Timeout's work.
//   - The concurrency permit is waited for until the deadline, no longer.
//   - Under MisfireRunOnce, the latest missed tick runs only if it is
//     within both MisfireGrace and the deadline; the deadline applies to
//     the claim, so the tick is recorded deadline_missed, and the ticks
//     before it missed.
//   - Manual runs (Trigger) have no deadline.
//
// The outcome deadline_missed goes to the run history, the metric
// lockcron.job.runs (counted by the recording replica alone), WithOnRun and
// so the daemon's notify blocks (in their default outcomes).
//
// # Alert after
//
// Job.AlertAfter (the config's alert_after) is how long a run may go before
// it is announced as running long, as an Airflow task's sla (an SLA miss)
// or a Prefect automation on a flow run that stays Running. The run is
// announced once, and goes on: stopping it is Timeout's work. The choices
// where they differ:
//
//   - It is measured from the run's start: when its claim took the lock,
//     on the clock of the replica that runs it (Run.Start), so time spent
//     waiting for the concurrency permit and between retries counts, and
//     the time before the claim (lateness; StartDeadline's concern) does
//     not. Airflow measures its SLA from the run's scheduled time; here a
//     late start is StartDeadline's and lockcron.job.lateness's, and
//     alert_after says the run itself is slow, as Prefect's "stuck in
//     Running" does.
//   - Once per run across the fleet: only the replica that runs it knows
//     it goes on, so that replica alone announces it, once however long
//     it goes on, with a WARN line ("run going past its alert_after") and
//     a call of WithOnRunningLong (the daemon's notify event running_long),
//     from a goroutine of the run that ends, and is waited for, before the
//     run is finished: nothing is announced after the run's end. A tick
//     taken over by another replica (its claimant died or gave it back) is
//     a new run there, measured from its own start and announced again if
//     it too goes on past alert_after. A run that ends before it
//     announces nothing, and a run announced is recorded with the outcome
//     it ends with; running_long is not an outcome of the history.
//   - Manual runs (Trigger) have it too: a manual run that hangs holds the
//     job's lock as a scheduled one does.
//   - The gauge lockcron.job.running is how long the job's run under way
//     on this replica has gone (every job, with alert_after or not; 0 when
//     none runs here): read on this replica's monotonic clock, without a
//     store round trip. JobView.RunningLong marks a run past alert_after
//     on every replica: a run here by its announcement, a run elsewhere
//     from the ledger (the claim holding the lock, its time on the store's
//     clock plus AlertAfter), so another replica may mark it early or late
//     by the clocks' skew.
//
// # Calendars and freezes
//
// Job.Exclude holds Calendars (Quartz's calendars; the daemon's calendar
// blocks): a tick that falls in one is not claimed nor run. Freezes
// (Freeze, Unfreeze, Freezes) do the same fleet-wide at run time for the
// jobs whose names match a glob (path.Match), from the freeze's start to
// its until, as Temporal's schedule exclusions and a release freeze do.
// The choices where the issue is silent:
//
//   - A tick is judged by its scheduled time, never by the clock: a
//     calendar gets it in the job's zone (its CRON_TZ=, else Location), so
//     every replica decides the same; a freeze covers the ticks from its
//     Created to its Until, both on the store's clock (Redis TIME).
//   - An excluded tick is recorded in the history as OutcomeExcluded, once
//     across the fleet (every replica passes it, fleet.Ledger.Pass, and
//     the first writes; consecutive ones of one calendar or freeze are
//     one entry, see "Every tick leaves a trace"), with Run.Reason
//     "excluded by calendar NAME" or "freeze ID: NOTE"; it goes to
//     WithOnRun there, once per tick (the history coalesces them; the
//     daemon's notify blocks do not take excluded, as they do not take
//     paused: a weekend calendar would send a webhook per tick). Every replica
//     that fires the tick counts it in lockcron.job.runs and in Status's
//     last outcome, as it does a paused tick. It is not a failure. The calendars come first: a
//     tick in both is the calendar's.
//   - Freezes live in the store (fleet.Store.AddFreeze, a hash beside the
//     locks that expires with its last freeze), so replicas that start
//     later honour them and none is lost with the replica that made it.
//     Each running Scheduler reads them every second (one script call of
//     a small hash per replica; a read that fails keeps the last ones) and
//     at once when a Freeze or Unfreeze on any replica says so on the
//     control topic; so a new freeze is honoured within a second, and a
//     tick fired in that second may still run. A freeze ends at its until
//     by itself; its ticks are not made up. A Scheduler decides on no tick
//     before its first read of the freezes has succeeded (it waits, and
//     past a second logs "tick held"): a replica that starts during a
//     freeze runs neither its catch-up tick nor its first ticks in it.
//     An add or a del that go-redis sends again after a lost reply is
//     answered as the first call was (a nonce per call): one freeze.
//   - The misfire catch-up passes over the ticks the calendars and the
//     freezes exclude: they are not counted missed, and MisfireRunOnce
//     runs the latest tick that would have run.
//   - A freeze needs a note (at most MaxFreezeNote bytes), an until after
//     the store's time, and a pattern that matches one of the Scheduler's
//     jobs; anything else is ErrInvalid and nothing is stored. Manual runs
//     (Trigger) are not excluded by either.
//   - JobView.NextTicks are the next ticks that will run, calendars and
//     freezes applied; JobView.Skipped the ones before them that will not,
//     with their cause and reason. Each is looked for up to NextHorizon (a
//     year) past the one before (or now): a tick in a freeze moves the search to the freeze's
//     until, one in a calendar with an End (the daemon's) to the end of its
//     day or range, as Quartz's triggers step over an excluded span with
//     their Calendar's getNextIncludedTime,
//     so a job ticking every second under a day's freeze costs one step;
//     JobView.NoneBefore says "none within the horizon", apart from a
//     schedule that has no further tick. Job reads one job's view.
//
// # Retries and timeouts
//
// A failed try is tried again Retries times within the same tick and lease,
// after Backoff, doubling up to MaxBackoff; the ctx ending (lock lost,
// shutdown) stops the retries. Timeout bounds each try (jobs.Timeout); a
// panic is recovered into an error (jobs.Recover). jobs.Info.Attempt counts
// the tries of the tick, across retries and replicas.
//
// # Fleet control: pause, trigger
//
// Pause(ctx, job, true, p) marks the job's ledger paused: on every replica
// its claims return at once and its ticks count as paused (they are not
// missed: resuming runs the next tick, not the ones paused). A run under
// way goes on. The ledger keeps p (fleet.PauseInfo): who paused (By, free
// text: the daemon writes the admin token's name, "loopback" or "cli:" and
// the OS user, as its audit trail does), why (Note, at most
// fleet.MaxPauseNote bytes: 1000, a sentence or two, as Temporal's
// schedule notes; longer belongs in a ticket the note names), until when
// (Until; zero until a resume), and when (the store's clock). A pause with
// an Until lifts itself then, with no resume (Hangfire's request): the
// store's clock decides, since claim.lua's paused check reads the end, and
// each replica's cache of the pause (which spares it a claim per tick for
// 10 seconds) ends at Until on its own clock too, so a replica with a fast
// clock asks a little early and is told to wait, and one with a slow clock
// is told at its next claim. An Until not after the store's clock is
// refused (lock.ErrInvalid), and nothing changes. JobView.Ledger.Pause
// shows the pause in force; one whose end has passed shows as none.
// Pause(ctx, job, false, _) resumes, and clears the pause and the failed
// runs in a row.
//
// Job.PauseAfterFailures = N pauses the job after N failed runs in a row
// (OutcomeFailed, after retries; dkron's request). The count lives in the
// ledger and is kept by the finish of each scheduled run, in the same
// store step that records it (finish.lua): OutcomeFailed adds one, and so
// does OutcomeDeadlineMissed when the job returned an error (a try failed
// and its retry would have started after the start deadline); OutcomeRan
// sets it to 0; other outcomes (skips, a lost lock, a stop, a tick not
// started by its deadline) leave it, so it counts across the fleet
// whichever replicas ran the runs, and a finish retried after a lost reply
// counts once. The finish that brings it to N pauses the ledger in that
// step, unless a pause is in force, with the note "paused after N failed
// runs in a row" and the author "replica:" and its replica's id, and no
// end: once for the fleet. That replica alone learns it
// (fleet.Claim.Paused, also when the history key is of another type; and
// when the finish's reply was lost and the finish gave up, from the
// ledger's fleet.LedgerState.PauseFinish, its claim's owner id, read
// after): it takes the job for paused at once, tells the fleet, logs a
// warning, and calls WithOnRun with a Run of OutcomeAutoPaused (the
// daemon's notify event auto_paused and audit entry). Manual runs do not
// count.
//
// Trigger(ctx, job) counts a manual request in the job's
// ledger and publishes it (fleet.Store.Publish); every replica that runs
// the job claims the manual run in a second ledger of manual runs, under
// the job's lock, so one runs it once. jobs.Info.Tick is the time of the
// request and jobs.Info.Trigger its number (counted per job, from 1; 0 for
// scheduled runs), which tells a manual run from a scheduled tick of the
// same second; exec and http jobs get it as LOCKCRON_TRIGGER and
// Lockcron-Trigger. A manual run waits for a run under way, and runs while
// the job is paused, as Kubernetes runs a Job made from a suspended CronJob.
// Neither needs Run: the scheduler command builds a Scheduler only to send
// them. A trigger published while no replica is connected is lost. Each
// replica logs at INFO the pause, resume and trigger requests it hears.
//
// # Backfill
//
// Backfill(ctx, job, o) runs the job's ticks in [o.From, o.To] that have
// passed, as Temporal's and Airflow's backfills do: each once across the
// fleet, oldest first, with its own tick as jobs.Info.Tick and
// jobs.Info.Backfill set (LOCKCRON_BACKFILL=1, Lockcron-Backfill: 1), at
// most o.Rate a second (DefaultBackfillRate, 1/s, when none is given:
// gentle on what the job talks to; MaxBackfillRate 1000; MinBackfillRate
// one a day, below which the interval would not fit). The range's
// ticks are the schedule's with the job's calendars and the freezes known
// then applied, as for scheduled ticks. Refused with ErrInvalid, nothing
// recorded: a missing end, From after To, To in the future (a backfill
// fills the past; the schedule runs the rest), a range with no tick, a bad
// rate, and more than MaxBackfillTicks (100,000) ticks without o.Force;
// ErrUnknownJob for a job the Scheduler does not have. A range that
// overlaps the range of a running backfill of the job is refused with
// ErrBackfillOverlap, naming it, nothing recorded (checked in the store
// in the add's own step, so two replicas cannot both add one): each would
// run the ticks they share, since each has a ledger of its own and
// OnlyMissing reads what is done once. BackfillTicks is the dry run: the
// first MaxBackfillListed (10,000) ticks it would run and how many there
// are, nothing changed. Force allows up to MaxForcedBackfillTicks
// (1,000,000), a ceiling on the work of counting them even when forced.
//
// o.OnlyMissing skips the ticks known done. A tick is done when the job's
// history holds an entry of a run of it that ended OutcomeRan or
// OutcomeFailed (scheduled, or of an earlier backfill; not a manual run,
// whose tick is its request's time), or the job's ledger records it as
// its latest tick done with such an outcome. Entries older than the
// history's retention (WithHistory, Job.HistoryKeep, Job.HistoryMaxAge)
// are not known, so their ticks count as missing; a tick skipped, paused,
// excluded, missed or past its deadline counts as missing too. The
// carrier reads what is done when it takes the backfill on.
//
// The backfill lives in the lock store beside the job's ledger (its hash
// slot; fleet.Ledger.AddBackfill): its range, rate, OnlyMissing, the ticks
// it holds (Total), its progress (Done and the Last tick handled) and its
// State (running, cancelled, finished); an ended one is kept 7 days
// (fleet.BackfillKeep). A running backfill is also named in the fleet's
// index of running backfills (one hash for the fleet, a hint: written
// before the add, dropped at the end and the cancel, and by its readers
// for a backfill that ended or is not there past a minute). Every running
// Scheduler reads the index every 5 seconds (one script call), and the
// backfills of each job of its own that it names (one call per such job;
// every job's once at its start, which puts a missing running one back in
// the index), and at once when a Backfill, a cancel, or a carrier's stop
// is published on the control topic;
// for each running one it takes the backfill's carrier lock (a Mutex named
// for the job's lock and the backfill, with its watchdog) with one try.
// The replica that gets it carries the backfill on from its Last: for
// each tick, it waits for its turn at the rate (ticks skipped as done take
// none), reads the backfill's state (a cancelled one ends there), and
// claims the tick in a ledger of the backfill's own beside the job's lock
// (id "JOB!backfill:ID", sharing the job's history), waiting for a run of
// the job under way (overlap queue): the claim takes the job's lock, so a
// backfill run never overlaps a scheduled or manual run of the job.
// Scheduled ticks come first, as Temporal's backfills yield to the live
// schedule: a backfill's claims carry owner ids tagged "/backfill"
// (fleet.WithBackfillClaims), and a scheduled claim that finds the job's
// lock held by one waits for that run to end, as under overlap queue,
// whatever the job's overlap policy (it is not skipped_busy); once the
// run ends it is woken at the release, while the carrier first records
// its progress and waits its turn at the rate. (A fair lock orders them
// strictly: the scheduled claim holds its place in the queue.) Before the
// first tick the carrier waits for the fleet's freezes to be read once,
// and each tick is checked against the freezes known when its turn comes
// (one held by a freeze counts as handled, not run). Ticks go in
// increasing order, which suits
// the ledger's done mark: a claim of a tick done or behind one done is
// ErrDone and counts as handled; a tick claimed and never finished (its
// carrier died, or stopped and handed it off) is run first by the next
// claim. Once the ledger records the tick done, the carrier records the
// progress (done and last, in one step; a late carrier never moves it
// back) and the earliest start of the next tick (next, on the store's
// clock): a carrier that takes the backfill on waits until then, so the
// rate holds across a takeover. The run is a normal run (retries, timeout, telemetry, WithOnRun)
// and its history entry has Run.Backfill; its failures do not count
// towards PauseAfterFailures, it has no StartDeadline, and it runs while
// the job is paused (as Temporal's backfills of a paused schedule).
//
// When the carrier stops, its carrier lock is released and the fleet told:
// another replica carries the backfill on at once; its run under way is
// handed off (OnShutdown) and run again by the next carrier's first claim.
// When the carrier dies, its locks expire within the lease and another
// replica carries it on within the poll after: no tick runs twice, but the
// one the death cut short, which is run again (Try 2) as a scheduled tick
// would be. CancelBackfill marks it cancelled in the store and, in the
// same step, pauses the backfill's own ledger: no claim of it is granted
// after the cancel returns, not even one that was waiting for the job's
// lock, and the carrier ends on that answer (or on reading the cancel
// before its next tick). A run whose claim was granted before the cancel
// goes on to its end. A cancel of a finished backfill is ErrBackfillEnded. The
// backfill's own ledger lives fleet.LedgerTTL (35 days) after its last
// claim, as a job's.
//
// # Parameters on manual runs
//
// A job lists in Job.Params the parameters its manual runs accept, as
// Nomad's parameterized jobs list their meta keys; TriggerParams(ctx, job,
// params) gives them values (Trigger is TriggerParams with none). The
// request is checked before anything is stored or sent: a name the job
// does not list (any, for a job without Params), a name not made of a-z,
// 0-9 and _, a value over MaxParamValue (4 kB), not UTF-8 or with a
// control character (values travel in the environment and in HTTP
// headers) is refused with an error wrapping ErrInvalid that lists what
// the job accepts. The request is recorded with its number and params in
// the ledger of manual runs, in the same step that counts it
// (fleet.Ledger.Trigger, one script), and the store runs the requests of a
// job with Params in the order of their numbers, none passed over: a claim
// of request n, while an earlier request m is not done, claims m instead
// (claim.lua: the first request after the ledger's done), runs it, and
// then claims its own. So each request runs once, with its own params,
// whatever order the replicas hear the requests in (two senders, a
// message that comes late), and whichever replica claims it (a handoff, a
// takeover after its claimant died); the claim carries the request's
// params in the same step. A request that no replica heard (Trigger
// returned 0: none listened, or its message was lost) is not lost either:
// it runs, first, with the next request of the job that is heard. A
// claimed request of a job with Params whose record the store no longer
// has (Redis restarted empty between the trigger and the claim) is not run
// without its params: it ends, done, with the outcome failed, and the
// error says it was not run and why (a claim that could not read the
// record, a read that failed, ends with the outcome error, given back, as
// a claim that fails); a request made before a reload gave the job Params
// has a record without them, and runs with none. A run that follows a parent's manual
// run (Job.After) takes its params from the parent's chain record, not
// from these records (see below). The records are dropped from the ledger
// by a later request once their runs are done (the history entry keeps
// the params), and with the ledger itself; at most the latest 1000 are
// kept (a request further back that has not run by then ends as a lost
// record does, with the outcome failed); a client retry of a trigger
// after a lost reply is known by the request's id while its record is
// kept, and counts nothing again. The run gets the params in
// jobs.Info.Params; an exec job as LOCKCRON_PARAM_<NAME> (the name in upper
// case), an http job as Lockcron-Param-<Name> headers, each _ of the name
// made a - (Lockcron-Param-Report-Date; its configured body is left as it
// is: a JSON field would need a JSON body). Run.Params keeps them in the
// history. Logs (the trigger, the claim) carry the names only, never the
// values; spans carry neither. The manual runs of a job with Params are
// not merged as other manual runs are (several requests heard while one
// runs become one run of the latest): each runs, one after the other in
// the order of their numbers; all replicas rank the same replica first for
// all of them, and the others claim one only when it is not done within
// their fallback delay (the store keeps the order either way). What holds
// is the order of the numbers, that is of the requests' arrival at Redis:
// two triggers sent at the same moment run in whichever order Redis
// counted them.
//
// # Changing jobs while running
//
// Add, Update and Remove work while the Scheduler runs; a change on one
// replica is a change of that replica only (the daemon reloads its config
// file on SIGHUP and applies the difference with them). Update stops the
// trigger loop of the old definition and then starts the new one, once the
// ticks the old one still decided on (a fallback wait) are claimed or let
// go: a tick that the old loop had not fired and that is due by then runs
// once, at once, under the new definition, and the new schedule's ticks
// follow from now, with no misfire catch-up (the job did not stop). A run under way
// finishes under its lock with the definition it started with. Remove
// stops the job's loop; by default a run under way finishes under its lock,
// as Quartz's deleteJob leaves running jobs alone (a removal is a change of
// plan, and a run cut short may leave its work half done); CancelRuns
// cancels it instead (ctx cause ErrRemoved; it finishes under OnShutdown,
// so handoff gives the tick to a replica that still has the job). The
// ledger and history of a removed job stay in the store, and adding the job
// again goes on from its ledger. Across the fleet each tick runs once
// whatever definitions the replicas have, since the ledger is the job's,
// keyed by its Lock and Name: a change of Lock moves the job to another
// ledger, so change it on every replica at once (or remove the job
// everywhere, then add it).
//
// While a change rolls out, replicas disagree. Each claim records a digest
// of the job's definition (every Job field but Run, which Job.Revision
// stands for; Status.Digest) in the job's ledger (fleet.WithDefinition),
// and learns the one recorded by the claim before it. A replica whose claim
// finds another digest logs a warning once per digest found, shows it in
// Status.OtherDigest, and sets the gauge lockcron.job.definition_mismatch
// to 1 until no claim has found another for ten minutes (a claim that finds
// its own digest only says that the claim before it was made by a replica
// with the same definition). The tick still runs once.
//
// # Run history
//
// Every finished run is appended to its job's history (Scheduler.History)
// by the replica that ran it, in the same script that records its outcome
// and releases the lock (fleet.Ledger's history: a capped Redis Stream at
// prefix:{lock}:ledger:job:history, beside the ledger, in the same hash
// slot), so it is there once across the fleet: the tick, the manual
// trigger if any, replica, attempt, start and end, duration, outcome,
// fencing token, trace id and the last MaxErrorTail bytes of the error,
// passed through WithRedact. Manual runs share the job's history. A run
// whose lock was lost is appended alone (its ledger records nothing; the
// tick runs again, and that run is an entry of its own). Ticks found
// missed at start, while every replica was down, are one entry (outcome
// missed, Run.Missed ticks up to Run.Tick), written by the first replica
// to find them; ticks not run because they were skipped (busy, paused,
// past their start deadline) are recorded too, coalesced (see "Every tick
// leaves a trace"); ticks done elsewhere are counted in metrics only.
// Each append keeps the latest Job.HistoryKeep entries
// (WithHistory; default 100) and none older than Job.HistoryMaxAge
// (default 30 days). WithOnRun hears each run this replica records: once
// per run across the fleet (the daemon's webhooks hang on it). A handed-off
// tick shows twice: handed_off on the replica that stopped, then the run
// that took it over (attempt 2).
//
// # Every tick leaves a trace
//
// A tick that is not run because it was skipped is recorded in the job's
// history once across the fleet, with Run.Reason saying why: skipped_busy
// (overlap skip: a run of an earlier tick holds the job's lock; the reason
// names the holder's replica, the tick it runs and since when, or that its
// membership expired, when it died with the lock: "lock held by r3, whose
// membership expired at 2026-11-27T09:00:04Z (run of
// 2026-11-27T09:00:00Z since 2026-11-27T09:00:00Z); it is free once its
// lease ends"), paused, and deadline_missed; the calendar's excluded
// likewise. Consecutive skips of one cause (the holder's replica, the
// pause, the calendar or freeze, the deadline) are one entry: Run.Count
// ticks from Run.First to Run.Tick, with the newest skip's reason and
// recorder, as Temporal lists a schedule's skipped actions and Kubernetes
// an event's count. The store coalesces them in the same step as the
// append (fleet.Ledger.Pass, and Claim.Finish for deadline_missed): a run
// or a skip of another outcome in between starts a new one; skips of the
// same outcome and another cause in between do not (a new holder's busy
// ticks, or those of the replicas of a job that runs on every replica,
// each with their own entry), among the latest 16 entries. Paging by
// Run.ID sees a coalesced entry move to the top as it grows.
//
// Who records it, to spend two commands per skipped tick (a ledger read and
// the append), four at times, not two per replica: the replica whose claim found the lock held (the first in rank
// for the tick, or a later one after its fallback; the others hear it let
// go and record nothing), reading the ledger for the holder; a replica
// that skips the tick without a claim because it runs an earlier one
// itself, if it is the first in rank for the tick, and, of those whose
// claim of an earlier tick waits for another replica's run of it, the
// first two in rank (every replica may wait so, and the first in rank may
// be dead and still a member); for a
// paused job, whose ticks
// every replica skips without a claim, the first in rank, after reading
// the ledger to make sure the pause still holds (a resume on its way: the
// tick runs elsewhere), or any replica whose claim found the ledger
// paused; an excluded tick (calendar, freeze), every replica, since the
// first in rank may be dead and still a member and a Pass refused costs
// one read. When several record the same tick (the first in rank skipped it
// without a claim and the second's claim found the lock held, the
// membership unknown or off, a pause rechecked by a claim), the store
// writes one entry: Pass records a skip once per tick, by the ledger's
// latest skipped tick, not by its seen, which a busy or paused claim moves
// already. The tick's skip is a fact decided on the replica, not a guess
// that the fleet may still claim it, so Pass accepts it while the store's
// clock is up to one period of the job behind the tick (a replica whose
// clock runs ahead fires early); only a tick further ahead is refused.
// Recording a tick as skipped busy or paused does not stop a later claim
// of it from running it (a claim that finds the lock free after all, a
// takeover that comes back for its own tick, a queued claim): then the
// history shows both. An excluded tick is different: a calendar is the
// same on every replica, a freeze only a moment late on one, so a claim
// of a tick recorded excluded answers done (the store keeps the latest
// such tick beside the ledger's skipped): neither runs it, and a tick
// claimed first is not recorded excluded.
//
// What a SIGKILL costs: the killed replica's lock is held until its lease
// ends (lock.WithLeaseTime, after its last renewal). Under OverlapSkip the
// ticks that fall due meanwhile are not run: one skipped_busy entry names
// the dead holder; then its interrupted tick runs again (or is recorded
// interrupted under ShutdownAbandon), and the next ticks run. Under
// OverlapQueue they wait for the lock and run late, one after the other
// (a replica keeps at most two ticks of a job in hand; a further one is
// skipped_busy), unless StartDeadline turns them into deadline_missed.
// Under OverlapReplace the first claim to find the dead holder's lock
// asks its run to end; once the lease ends, the claim that takes the lock
// records the dead run's tick replaced, without running it, and runs its
// own. So does the next tick's claim when the lease ended before that
// tick came: it takes the dead run's tick over only to record it replaced
// by its own (the hung run is not run again), then runs its own tick.
//
// # Overlap replace
//
// Under OverlapReplace (Kubernetes' concurrencyPolicy Replace, Temporal's
// TerminateOther) a tick T due while a run of an earlier tick holds the
// job's lock ends that run, wherever in the fleet it runs, and runs as
// soon as the lock is free. Never two runs at once: the lock guarantees
// it, and T waits for it as under overlap queue.
//
//   - The request lives in the ledger: T's claim, finding the lock held
//     for an earlier unfinished tick, records in the same step that T
//     replaces it (the ledger's field replace, only if T is later than
//     the one there; fleet.WithReplace), and tells the fleet (a message
//     on the announcements channel, sent again at each of the claim's
//     attempts). The replica running the earlier tick hears it and reads
//     the ledger's field replace (fleet.Ledger.ReplaceAsked, one read);
//     should the message be lost, it reads it every third of the lease
//     anyway while a run of a replace job goes on.
//     The ledger decides: a run of tick R ends only when the ledger's
//     replace is after R, so a stray message never ends a run.
//   - The run's ctx ends with cause ErrReplaced, wrapped with the
//     replacing tick (context.Cause). An exec job's process group gets
//     SIGTERM, then SIGKILL after its grace (jobs/execjob). A job that
//     returns nil all the same is recorded ran. No retry follows.
//   - The run is recorded replaced (history, with "replaced by tick T" as
//     its reason; metrics; notify blocks that name it), and its tick is
//     done: not handed off, not run again. Its failures-in-a-row count is
//     left as it was.
//   - Each claim reads the ledger's field replace before its run starts
//     (one round trip): a tick a later one replaced is recorded replaced,
//     not run. So is the unfinished tick that a later tick's claim takes
//     over (its holder died, and its lease ended; or it was given back and
//     no replica took it before the later tick came): the claim records, in
//     the same step as the takeover, that its own tick replaces it,
//     whether or not the lock was still held when that tick came; the
//     replica records it replaced and claims its own tick again, which
//     runs. So is a tick whose claim waited behind a run that a
//     still later tick replaced: the newest tick wins, and when a run
//     takes longer than the period to end (an exec grace longer than it),
//     the tick after the next replaces the one that waited.
//   - Manual runs (Trigger) and a backfill's ticks (Backfill) are neither
//     replaced nor replace (their ledgers are apart): a tick due while one
//     holds the lock waits for it, however long it hangs (its Timeout
//     bounds it).
//     A replica keeps at most two ticks of a replace job in hand (one
//     run, one waiting tick); a further one is skipped_busy.
//     A replace tick's claim does not wait for an earlier tick's claim on
//     the same replica (two ticks due at once: a fallback wait that
//     reaches the next tick, ticks run late): an earlier tick that no
//     replica has claimed when the later claim takes the lock is never
//     run, as the newest tick wins; its claims are answered done
//     (skipped_done, in each replica's metrics and status), and the
//     history has no entry of its own for it, neither ran nor replaced.
//
// # Every replica
//
// Job.Replicas ReplicasAll (the config's replicas = "all") runs each tick
// of the job on every replica that runs it, once on each, for work that is
// per host (a local cache, a local file), as dkron targets every node and
// gocron's users ask to skip the lock. How, and the choices made:
//
//   - No fleet-wide lock: each replica claims the tick at once, with no
//     ranking nor fallback (its claims do not wait for any other
//     replica's), in a ledger of its own beside a lock of its own, both in
//     the job's hash slot: fleet.WithOwnLock with the replica's id
//     (WithReplicaID), at prefix:{lock}:own:<replica> and
//     prefix:{lock}:own:<replica>:ledger:<job>. Everything a claim does
//     for a job of one run per tick, it does there: the ledger keeps the
//     replica's latest tick done, so a replica never runs a tick twice,
//     also after a restart with the same replica id; the lock keeps its
//     runs one at a time (overlap skip or queue, per replica), with a
//     watchdog and a fencing token; Timeout and Retries apply to each run.
//     Two such jobs with one LockName exclude each other on each replica;
//     they do not exclude a job of one run per tick with that LockName.
//   - The record is per replica id: the daemon's default id is the host
//     name and process id, so a restarted process is a new replica and
//     runs the next tick whatever its predecessor ran. Give replicas a
//     stable id (a pod's name) for the record to hold across restarts.
//     A replica that starts again applies the job's Misfire policy to
//     the ticks its own ledger says it missed (a new replica id has
//     missed nothing), and a tick it claimed and never finished (it died
//     mid-run) is not run again: it is recorded interrupted, as under
//     ShutdownAbandon, once its old lease has expired.
//   - A stop cannot hand a run to another replica, which runs the tick
//     for itself already: OnShutdown is ShutdownAbandon (the default for
//     such a job; ShutdownHandoff is refused), so a run cut short by the
//     stop is recorded interrupted and not run again.
//   - Every run goes to the job's history (the stream of the job's
//     ledger: the own ledgers write to it), with its replica; a tick thus
//     has one entry per replica. A paused or excluded tick is the fleet's
//     decision: it is recorded once for the fleet in the job's ledger (as
//     for a job of one run per tick), and consecutive ones make one entry
//     (Run.Count). A busy tick (this replica's run of an earlier tick goes
//     on) and missed ticks (this replica was down) are each replica's own,
//     recorded in its own ledger with its replica; a replica's busy ticks
//     coalesce into one entry even as the other replicas' come in between
//     (the store passes over skips of the same outcome and another cause,
//     among the latest 16 entries); so do a replica's ticks past their
//     StartDeadline. JobView.PerReplica (the daemon's `scheduler jobs`
//     and status page) is the last entry of each replica among the
//     latest DefaultHistoryKeep; Status is this replica's, as for every
//     job; JobView.Ledger is the job's ledger, which holds its pause and
//     counts its manual requests, and no run. WithOnRun hears each run on
//     the replica that ran it, so the daemon's notify blocks post once
//     per replica's run (three failures of one tick on three replicas
//     are three messages).
//   - Metrics count each replica's outcomes; for such a job they carry
//     lockcron.replica besides lockcron.job (the counters, histograms and
//     gauges), so that a collector that merges replicas keeps them apart;
//     lockcron.job.last_success_timestamp is this replica's last success.
//   - The pause stays the job's, in its fleet ledger (Pause, a resume, a
//     pause with an end): since the own ledgers' claims do not read it,
//     each replica reads the job's ledger before each claim, one round
//     trip more per tick. A pause set while a replica's claim is under
//     way lets that tick run there, as a run under way goes on. No claim
//     renews the job's ledger (it lives fleet.LedgerTTL after its last
//     write): each paused tick, recorded there once for the fleet, renews
//     it, so a pause lasts as long as the ticks it holds.
//   - A manual run (Trigger) runs once on every replica, in each
//     replica's own ledger of manual runs: at once on those that hear its
//     request (a message), and at their next tick on those that did not
//     (their connection was down): the read of the job's ledger before
//     each claim sees its count of requests (fleet.LedgerState.Triggers)
//     past the last one this replica handled. A replica runs only the
//     requests made after it started (after its first read of that
//     count); a replica that starts later, or restarts, does not run the
//     earlier ones.
//   - OverlapReplace is per replica too: a tick's claim in a replica's own
//     ledger (with fleet.WithReplace) asks that replica's run of an
//     earlier tick to end, and the run's watch reads that ledger; a
//     replica never ends another replica's run. A tick a replica claimed
//     and never finished (it died mid-run) is then recorded replaced by
//     its next tick, rather than interrupted.
//   - MaxConcurrency (a fleet-wide permit) and PauseAfterFailures (a count
//     of failures in a row across the fleet, where each replica has a
//     row of its own) are refused with it (ErrInvalid, naming the field),
//     and so are After (its runs are each replica's own: none of them
//     would start a child, and a job that follows one is refused too) and
//     Params (its manual runs are claimed in each replica's own ledger,
//     which keeps no order of the requests).
//
// # Lock kinds and concurrency
//
// LockFair makes the job's claims wait in the lock's FIFO queue
// (lock.Client.FairLedger): when several wait for the lock (jobs that share
// it, ticks queued behind a run), the one that waited first gets it, and an
// unlock wakes it alone. MaxConcurrency limits how many runs of the jobs of
// one ConcurrencyGroup go at once across the fleet: each run holds a permit
// of a lock.Client.Semaphore besides its job's lock, waiting for it under
// that lock; its ctx ends if the permit is lost.
//
// # Outcomes and telemetry
//
// Each tick handled by a replica ends with one outcome: ran, failed,
// skipped_done, skipped_busy, lost_lock, interrupted, handed_off, paused,
// deadline_missed (see "Start deadline"), excluded (see "Calendars and
// freezes"), or error (the lock's backend could
// not be reached); missed counts ticks no replica claimed. A replica that stops while it waits for another's run records
// nothing. Each tick handled records a "job.tick" span (attributes
// lockcron.job, lockcron.tick, lockcron.lock, lockcron.replica,
// lockcron.token, lockcron.attempt, lockcron.outcome, and error.type with
// the outcome when it failed: no semantic convention covers jobs yet, so
// they are namespaced, and as Prometheus labels, lockcron_job..., they do
// not clash with a scrape's own job label), with the lock package's
// "lock.wait" span and one "job.run" span per try as children; give the
// lock.Client the same tracer provider. Metrics: lockcron.job.runs (by
// lockcron.job and lockcron.outcome), lockcron.job.wait.duration, lockcron.job.run.duration,
// lockcron.job.lateness (start of a run minus its tick) and
// lockcron.job.locks_lost; and, read from each job's ledger when they are
// collected while Run runs, the gauges lockcron.job.last_success_timestamp
// (the fleet's last scheduled run that succeeded, seconds since the epoch;
// lockcron_job_last_success_timestamp_seconds in Prometheus),
// lockcron.job.next_tick_timestamp (this replica's next tick),
// lockcron.job.period (from the next tick to the one after it: an alert
// compares the time since the last success with it),
// lockcron.job.paused and lockcron.job.definition_mismatch (see "Changing
// jobs while running"). A paused tick is not an error of the lock wait.
// Logs go to the "scheduler" sub-logger with job and tick fields: one INFO
// line per finished run (replica, attempt, duration, outcome; ERROR when it
// failed or lost its lock), a WARN when a replica takes over a tick (from
// whom, and why: given back, or its claimant stopped answering), an INFO
// line "tick not run: recorded in the history" with the outcome and reason
// by the replica that records a skipped tick (DEBUG for a paused or an
// excluded one, which an operator set: a weekend calendar would fill the
// log), and
// DEBUG for the detail (each replica's skips). A program that passes no logger still
// hears of what goes wrong: by default the warnings and errors go to
// os.Stderr, as net/http's server logs; WithLogger takes an hclog.Logger,
// and WithSlog a log/slog *slog.Logger.
//
// # Outcomes and runs
//
// Each tick ends with an Outcome; Outcome.Done says whether the tick is done
// for the fleet (only handed_off and error give it back). A run knows about
// itself through jobs.InfoFrom(ctx): job, tick, lock, fencing token,
// attempt, replica, and a manual run's trigger number.
//
// # Jobs that follow jobs
//
// A Job with After (and no Schedule) runs once across the fleet for each
// run of the jobs it names that ended with an outcome its When matches:
// WhenSuccess (the default) matches OutcomeRan; WhenFailure matches
// OutcomeFailed, OutcomeInterrupted (a run abandoned at a stop or a death,
// on_shutdown abandon) and OutcomeReplaced (a run that a later tick ended,
// overlap replace: it did not complete, as Kubernetes counts a job it
// replaced as not succeeded); WhenAlways any of them. A tick that was not
// run (missed, excluded, paused, skipped, deadline_missed) starts no child,
// as dkron's dependent jobs and Airflow's all_success / all_failed /
// all_done trigger rules skip a task whose upstream did not run. The child
// runs with its parent's tick as its tick (jobs.Info.Tick, LOCKCRON_TICK)
// and the parent run in jobs.Info.Parent ("job@tick": LOCKCRON_PARENT,
// the http job's Lockcron-Parent) and in its history entry (Run.Parent).
//
// A finish of a job that others follow (Scheduler.Add sees them) adds the
// run to its ledger's chain record (fleet.Record.Chain) in the same script
// step as it records the outcome (fleet.Ledger.ChainRuns reads it): the
// record is the parent's, in its hash slot, since a script cannot write
// the child's keys on a Cluster. Every replica that runs the child reads
// its parents' records when it starts, when it hears of a parent's finish
// (its own at once; another replica's from its finish message, Watch),
// and every 5 seconds, and claims each run due in the child's own ledger,
// oldest first, with the parent's tick as the ledger's tick: so a child
// run is never lost to a crash or a lost message (the record outlives
// both), and never run twice (the ledger keeps it once, with the child's
// own lock, overlap, retries, timeout and handoff). Every replica claims
// at once, not in rank: the claim waits for a run of the same tick
// elsewhere and then answers done.
//
// With several parents (fan-in), the child runs a tick once every parent
// has finished it with a matching outcome; the parents must share a
// schedule (the same Schedule, Jitter and zone, or, for parents that
// follow others, the same schedule up their chains), so that their ticks
// meet, and CheckChains says so. LOCKCRON_PARENT then names the parent
// whose finish completed the set. A manual run of a parent (Trigger)
// starts its children too, fan-in or not (a manual run has no tick that
// the other parents share): each child claims it in a ledger of its own
// per parent, numbered as the parent's manual runs, and carries the
// parent's trigger number (jobs.Info.Trigger) and the tick the parent run
// reported. It gets the parameters of the parent's run that it declares in
// its own Params (jobs.Info.Params; none if it declares none): not those
// of a manual run of its own that has the same number. The parent's chain
// record carries them with the run (its history entry's params), so a
// later trigger of the parent, which drops the request's record, takes
// nothing from a child that has not run yet (paused, say); the child's
// history entry keeps all the params of the request it followed, and its
// own chain record passes them on to its children. If they cannot be
// found (a record written by an older version, with the request's record
// gone) and the job the request was made for declares Params, the child's
// run ends, done, with the outcome failed, saying so, never without them.
//
// Choices where the issue is silent: a child follows the parent runs that
// finished after its first reading anywhere in the fleet (its chain floor,
// kept in its ledger: fleet.Ledger.ChainFloor), not those before, so that a
// new child (or one whose ledger expired) does not run its parents' past; a
// parent run that finished more than the child's MisfireGrace (default an
// hour) ago while no replica ran the child is not followed (as a misfire; a
// warning says so), but one that finished while the child ran, however
// long, is (its runs queue): none is dropped while the child's ledger has a
// run under way or a claim within the grace, nor any that finished while a
// replica's chain loop read its parents; a paused child claims nothing, and
// its runs due wait for its resume, within the same grace (a Hangfire
// continuation waits likewise); a child's run handed off at a replica's
// stop is claimed again by the chain loops of the others, with its parent;
// Update of a child returns at once while its run goes on, and the new
// definition reads its parents' runs once that run is over; the record
// keeps a parent's latest 1000 runs, as long as its ledger lives; calendars
// and freezes apply to the parents' ticks, which their children follow
// (Validate refuses Exclude and Jitter on a child); a parent that is not
// added (yet) holds its children's runs back (Add refuses a cycle and a
// schedule mismatch among the jobs it knows, CheckChains and the command's
// validate also a name that is no job). Chains of chains work: a child's
// finish starts its own children, with the same tick; a child's run that
// follows a manual run starts its own children's runs too (each job keeps
// them in a ledger per path up its chain, "load!after!extract" for load's
// runs that follow extract's manual runs, "report!after!load!after!extract"
// for report's that follow those; a job name cannot hold "!after!"), with
// the same trigger number and the params each declares of the manual run's.
// A child's runs queue, one for each parent run, oldest first: its Overlap
// is OverlapQueue, and Validate refuses another. A backfill of a parent
// starts no runs of its children (its runs are not recorded for them), and
// a child, which has no ticks of its own, cannot be backfilled: its
// Backfill says to backfill the parent. A child's StartDeadline counts from
// its tick, the parent's scheduled time, as for any tick. A replica records
// a parent's runs for its children only if it has a job that follows it:
// during a rolling deploy that adds a child, the parent runs finished by
// replicas without it start none (recording every job's runs would close
// that gap at up to 150 kB of Redis memory a job, for 1000 runs kept: not
// done).
//
// # Backends
//
// The Scheduler works on either lock backend: Redis for a fleet, or
// lock.NewMemory for one process, with the same behaviour within it.
package scheduler
