package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
)

// An Outcome is what became of a tick on one replica: the "outcome" of
// spans, metrics, logs, the run history (Run.Outcome) and Status. Its
// values are stable strings: alert rules and dashboards match them.
type Outcome string

// The outcomes of a tick on one replica.
const (
	OutcomeRan         Outcome = "ran"          // the job ran and returned nil
	OutcomeFailed      Outcome = "failed"       // the job returned an error (after its retries), or timed out
	OutcomeSkippedDone Outcome = "skipped_done" // another replica ran the tick (or a later one)
	OutcomeSkippedBusy Outcome = "skipped_busy" // a run of an earlier tick held the lock (overlap skip)
	OutcomeLostLock    Outcome = "lost_lock"    // the lock was lost while the job ran
	OutcomeInterrupted Outcome = "interrupted"  // stopped by shutdown, or its replica died (abandon policy)
	OutcomeHandedOff   Outcome = "handed_off"   // stopped by shutdown and given back (handoff policy)
	OutcomeMissed      Outcome = "missed"       // due while every replica was down, and not run (misfire)
	OutcomeError       Outcome = "error"        // the lock or ledger could not be reached
	OutcomePaused      Outcome = "paused"       // the job is paused fleet-wide (Pause): the tick was not run

	// OutcomeDeadlineMissed: the tick's run could not start (or a retry
	// could not start again) within the job's StartDeadline of the tick,
	// and was not run; recorded once across the fleet, by the replica
	// whose claim found it late.
	OutcomeDeadlineMissed Outcome = "deadline_missed"

	// OutcomeExcluded: the tick falls in a calendar of the job's Exclude,
	// or in a freeze (Freeze), and was not claimed nor run; recorded once
	// across the fleet, with the calendar or the freeze as its reason.
	OutcomeExcluded Outcome = "excluded"

	// OutcomeRunningLong is not what became of a tick but an event: the
	// run goes on past its job's AlertAfter. It is the Outcome of the Run
	// that WithOnRunningLong hears, and never of a history entry.
	OutcomeRunningLong Outcome = "running_long"

	// OutcomeAutoPaused is not what became of a tick but an event: the
	// run's failure brought the job's failed runs in a row to its
	// PauseAfterFailures, and its finish paused the job fleet-wide. It is
	// the Outcome of a second Run that WithOnRun hears after the failed
	// run's (same job, tick, replica and token; Error is the pause's
	// note), once across the fleet, and never of a history entry.
	OutcomeAutoPaused Outcome = "auto_paused"
)

// outcomeStopped ends the span of a claim cut short by the stop while it
// waited: nothing happened to the tick here, so nothing else records it.
const outcomeStopped Outcome = "stopped"

// Done reports whether a tick with this outcome is done for the fleet: a
// run that finishes with it marks the tick done in the ledger. Only
// handed_off and error give the tick back, for another claim to run.
func (o Outcome) Done() bool { return o != OutcomeHandedOff && o != OutcomeError }

// failure reports whether the outcome counts as an error: its span is
// marked failed. A tick skipped or paused is not one, whatever the claim
// returned.
func (o Outcome) failure() bool {
	switch o {
	case OutcomeSkippedDone, OutcomeSkippedBusy, OutcomePaused, OutcomeExcluded, outcomeStopped:
		return false
	}
	return true
}

// stopOutcome is the outcome of a run of j cut short by this replica's
// stop (or Remove): under its OnShutdown policy, abandoned or handed off.
func (j *Job) stopOutcome() Outcome {
	if j.OnShutdown == ShutdownAbandon {
		return OutcomeInterrupted
	}
	return OutcomeHandedOff
}

// A runState is where a run is, from its claim to its finish. Its moves
// are run.to's.
type runState int

const (
	claimed    runState = iota // the job runs, or waits for its concurrency permit
	succeeded                  // the job returned nil: its own finalizer finishes it, even past a forced stop
	noPermit                   // the concurrency permit could not be taken (the store failed): the job did not run
	permitLost                 // the concurrency permit was lost while the job ran
	tooLate                    // the job's start deadline passed before it could start (its permit, a retry): not run
	cut                        // a forced stop (Shutdown past its deadline, Close) finishes it under its stop policy
	finished                   // recorded and released, with run.outcome: final
)

// to moves r to state next, and reports whether it could: from claimed a
// run goes anywhere; succeeded, noPermit, permitLost, tooLate and cut go only to
// finished, except that a forced stop still cuts a run whose permit
// failed; finished is final, so a run finishes once (its finalizer and a
// forced stop may race). Moving to finished records outcome.
func (r *run) to(next runState, outcome Outcome) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.state == finished:
		return false
	case next == finished:
		r.outcome = outcome
	case next == cut && (r.state == succeeded || r.state == cut || r.state == tooLate):
		return false
	case next != cut && r.state != claimed:
		return false
	}
	r.state = next
	return true
}

// current returns r's state.
func (r *run) current() runState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state
}

// claimSpec says what handleClaim claims: a tick of the job's ledger, or a
// manual run of its ledger of manual runs.
type claimSpec struct {
	ledger *fleet.Ledger
	tick   int64 // the tick in ms, or the manual run's number
	queue  bool  // wait for a run of an earlier tick
	manual bool
	// backfill is the id of the backfill whose ledger this is (Backfill);
	// its tick is a past tick's time in ms.
	backfill string
	parent   string // the job whose run starts this one (Job.After), else ""
	// params, for a manual run that follows a parent's manual run, is the
	// parent's ledger of manual runs, whose params it reads (chainParams);
	// nil: the job's own.
	params *fleet.Ledger
	// follow, with params, is the run followed (followParams).
	follow *chainFollow
}

// scheduled reports whether c is a scheduled tick: neither a manual run
// nor a backfill's.
func (c claimSpec) scheduled() bool { return !c.manual && c.backfill == "" }

// maxEarlier bounds how many earlier unfinished ticks one claim runs before
// its own: each is a tick whose claimant died or gave it back, and the
// ledger holds at most one, but a finish that cannot be recorded leaves it
// unfinished.
const maxEarlier = 3

// maxEarlierRequests is maxEarlier for a manual run: a claim of a job
// with Params is handed each earlier request not done, in order (see
// Trigger), and runs that many of them at most before its own.
const maxEarlierRequests = 100

// handleClaim claims c, runs the job under it, and finishes it. tick is the
// time the run reports as its tick. A claim that is handed an earlier tick
// that was claimed and never finished (its claimant died or gave it back)
// runs that one first, then claims its own again.
func (s *Scheduler) handleClaim(e *entry, tick time.Time, c claimSpec) {
	bound := maxEarlier
	if c.manual {
		bound = maxEarlierRequests
	}
	for range bound + 1 {
		if !s.claimOnce(e, tick, c) || e.cancelled() {
			return
		}
	}
}

// claimOnce is one claim of c and its run. It reports whether the claim
// was handed an earlier unfinished tick, so that c is still to be claimed.
func (s *Scheduler) claimOnce(e *entry, tick time.Time, c claimSpec) (earlier bool) {
	log := s.runLog(e, tick)
	if c.manual {
		log = log.With("trigger", c.tick)
	}
	if c.backfill != "" {
		log = log.With("backfill", c.backfill)
	}
	ctx, span := s.tel.startTick(e.ctx, e.job.Name, e.job.LockName, tick)
	fired := time.Now()
	cl, err := c.ledger.Claim(ctx, c.tick, c.queue)
	if c.scheduled() {
		e.decided(c.tick) // a later tick's claim may go out now
	}
	if err != nil {
		outcome := OutcomeError
		var pe *fleet.PausedError
		switch {
		case errors.Is(err, fleet.ErrDone):
			outcome = OutcomeSkippedDone
		case errors.Is(err, lock.ErrLocked):
			outcome = OutcomeSkippedBusy
		case errors.As(err, &pe):
			outcome = OutcomePaused
		case e.cancelled():
			// Stopped (or removed) while waiting for another replica's
			// run: nothing happened here.
			s.tel.waited(e.job.Name, string(outcomeStopped), time.Since(fired))
			endSpan(span, outcomeStopped, nil)
			return false
		default:
			log.Error("tick not claimed", "error", err)
		}
		if c.scheduled() && outcome != OutcomeError {
			var until time.Time
			if pe != nil {
				until = pe.Until
			}
			e.setPaused(outcome == OutcomePaused, until)
		}
		s.tel.waited(e.job.Name, string(outcome), time.Since(fired))
		s.record(e, tick, outcome)
		switch {
		case !c.scheduled():
		case outcome == OutcomeSkippedBusy:
			s.skipLater(func() { s.recordBusy(e, tick) })
		case outcome == OutcomePaused:
			s.skipLater(func() { s.recordPaused(e, tick, false) })
		}
		endSpan(span, outcome, err)
		if outcome != OutcomeError && log.IsDebug() {
			log.Debug("tick skipped", "outcome", outcome)
		}
		return false
	}
	s.tel.waited(e.job.Name, "acquired", time.Since(fired))
	if c.scheduled() {
		e.setPaused(false, time.Time{})
	}
	s.checkDefinition(e, cl, log)
	span.SetAttributes(attrToken.Int64(cl.Token()), attrAttempt.Int(cl.Try))
	r := &run{e: e, cl: cl, tick: tick, tries: cl.Try - 1, manual: c.manual, backfill: c.backfill, start: time.Now(), parent: c.parent}
	if sc := span.SpanContext(); sc.HasTraceID() {
		r.trace = sc.TraceID().String()
	}
	if cl.Tick != c.tick {
		// An earlier tick was claimed and never finished (its claimant
		// died, lost the lock, or gave it back): it comes first, and
		// this replica claims its own tick after it.
		earlier = true
		if !c.manual {
			r.tick = time.UnixMilli(cl.Tick)
			log = s.runLog(e, r.tick)
		} else {
			log = s.runLog(e, tick).With("trigger", cl.Tick)
		}
		span.SetAttributes(attrTick.String(fmtTick(r.tick)))
		if c.manual && cl.Try == 1 {
			// An earlier request of a job with Params, not done: the
			// store runs them in order (see Trigger).
			log.Info("an earlier manual request is not done: running it first", "before", c.tick)
		} else {
			what := "running it first"
			if e.job.Overlap == OverlapReplace && c.scheduled() {
				what = "recording it replaced" // (the check below, before a run)
			}
			log.Warn("an earlier tick was claimed and never finished: "+what, "attempt", cl.Try, "before", fmtTick(tick),
				"from", ownerReplica(cl.From), "why", s.takeoverWhy(ctx, c.ledger, cl))
		}
	} else if cl.Try > 1 {
		log.Warn("tick taken over", "attempt", cl.Try, "from", ownerReplica(cl.From), "why", s.takeoverWhy(ctx, c.ledger, cl))
	}
	// (The params are in the fleet's ledger of manual runs, also for a job
	// that runs on every replica and claims in a ledger of its own.)
	if c.manual {
		var err error
		if c.params != nil {
			err = s.followParams(ctx, r, c, log)
		} else {
			err = s.claimParams(ctx, r, c.ledger, log)
		}
		if err != nil {
			outcome := OutcomeError // a read failed: given back, tried again
			if errors.Is(err, errParamsLost) {
				outcome = OutcomeFailed // done: no claim would find them
			}
			endSpan(span, s.finish(r, outcome, err, log), err)
			return earlier
		}
	}
	if e.job.Overlap == OverlapReplace && c.scheduled() {
		r.poke = make(chan struct{}, 1) // before track: heardReplace reads it
	}
	if !s.track(r) {
		// The stop began while the claim was made: give the tick back.
		endSpan(span, s.finish(r, OutcomeHandedOff, nil, log), nil)
		return false
	}
	if r.poke != nil {
		if by := s.replacedAlready(ctx, r); by != 0 {
			// A later tick asked this tick's run to end before the claim
			// took it (its holder died; or it waited behind a run that a
			// still later tick replaced): the tick is done, not run.
			r.setReason("replaced by tick " + fmtTick(time.UnixMilli(by)) + " before this claim could run it")
			endSpan(span, s.finish(r, OutcomeReplaced, nil, log), nil)
			return earlier
		}
	}
	if cl.Try > 1 && e.job.OnShutdown == ShutdownAbandon {
		if e.job.everyReplica() {
			log.Warn("tick was interrupted in this replica's previous process; abandoned", "attempt", cl.Try)
		} else {
			log.Warn("tick was interrupted on another replica; abandoned", "attempt", cl.Try)
		}
		endSpan(span, s.finish(r, OutcomeInterrupted, nil, log), nil)
		return earlier
	}
	if d := e.job.StartDeadline; d > 0 && c.scheduled() {
		// Measured on the store's clock, the same for every claimant: the
		// claim's time against the tick it took.
		left := r.tick.Add(d).Sub(cl.At)
		if left < 0 {
			// Finished at once, not run: the finish records it once for
			// the fleet, and its log line says how late the claim was.
			log = log.With("start_deadline", d, "late", -left)
			r.setReason(fmt.Sprintf("not started within its start_deadline of %v: claimed %v after its tick", d, cl.At.Sub(r.tick).Round(time.Millisecond)))
			endSpan(span, s.finish(r, OutcomeDeadlineMissed, nil, log), nil)
			return earlier
		}
		r.startBy = time.Now().Add(left)
	}
	if c.scheduled() && !earlier {
		s.tel.late(e.job.Name, s.opt.clock.Now().Sub(tick))
	}
	s.execute(r, span, log)
	return earlier
}

// execute runs the job, with its retries, under the claim's lease, and
// finishes the run in a deferred finalizer.
func (s *Scheduler) execute(r *run, span trace.Span, log hclog.Logger) {
	e, cl := r.e, r.cl
	start := time.Now()
	// The lease's context ends when the lock is lost (cause ErrLockLost),
	// when the stop begins (cause ErrClosed, from stopCtx), and when Remove
	// cancels the job's runs (cause ErrRemoved, from e.ctx).
	runCtx := cl.Context()
	var err error
	stopWatch := func() {}
	if d := e.job.AlertAfter; d > 0 {
		stopWatch = s.watchLong(r, d, log)
	}
	stopReplace := func() {}
	if r.poke != nil {
		runCtx, stopReplace = s.watchReplace(r, runCtx, log)
	}
	defer func() {
		stopWatch() // the job has returned: nothing to announce any more
		stopReplace()
		outcome := s.complete(r, err, log)
		s.tel.held(e.job.Name, outcome, time.Since(start))
		endSpan(span, outcome, err)
	}()
	if e.job.MaxConcurrency > 0 {
		// A permit of the group's semaphore, under the job's lock; the run
		// ends if the permit is lost.
		var permit *lock.Lease
		var wait []lock.AcquireOption
		if !r.startBy.IsZero() {
			wait = append(wait, lock.WithWait(max(time.Until(r.startBy), 0)))
		}
		permit, err = s.locks.Semaphore(e.job.ConcurrencyGroup, e.job.MaxConcurrency).Lock(runCtx, wait...)
		if err != nil {
			if errors.Is(err, lock.ErrLocked) && len(wait) > 0 && runCtx.Err() == nil {
				// The group stayed full until the start deadline.
				log.Warn("tick not run: its start deadline passed while it waited for its concurrency permit",
					"group", e.job.ConcurrencyGroup, "start_deadline", e.job.StartDeadline)
				err = nil
				r.setReason(fmt.Sprintf("not started within its start_deadline of %v: its concurrency group %q stayed full", e.job.StartDeadline, e.job.ConcurrencyGroup))
				r.to(tooLate, "")
				return
			}
			if runCtx.Err() == nil {
				// Not the lock lost nor the stop: the store failed. The
				// job did not run; the tick is given back.
				r.to(noPermit, "")
			}
			return
		}
		defer func() {
			if errors.Is(permit.Err(), lock.ErrLockLost) {
				r.to(permitLost, "")
			}
			ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
			defer cancel()
			if uerr := permit.Unlock(ctx); uerr != nil {
				log.Warn("concurrency permit not given back; it expires within its lease", "group", e.job.ConcurrencyGroup, "error", uerr)
			}
		}()
		runCtx = permit.Context()
	}
	info := jobs.Info{Job: e.job.Name, Tick: r.tick, Lock: e.job.LockName, Token: cl.Token(), Replica: s.opt.replica}
	if r.manual {
		info.Trigger, info.Params = cl.Tick, r.params
	}
	info.Backfill = r.backfill != ""
	info.Parent = r.parentRun()
	backoff := e.job.Backoff
	for try := cl.Try; ; try++ {
		r.setTries(try)
		info.Attempt = try
		rctx, rspan := s.tel.startRun(jobs.WithInfo(runCtx, info))
		err = e.runner.Run(rctx)
		if err == nil {
			endSpan(rspan, OutcomeRan, nil)
			r.to(succeeded, "") // a forced stop leaves the finish to us
			return
		}
		endSpan(rspan, OutcomeFailed, err)
		if runCtx.Err() != nil || try-cl.Try >= e.job.Retries {
			return
		}
		if !r.startBy.IsZero() && time.Now().Add(backoff).After(r.startBy) {
			// The retry would start after the start deadline: it is not
			// made, and the tick ends deadline_missed with this try's
			// error.
			log.Warn("try failed; no retry: it would start after the start deadline", "attempt", try, "error", err,
				"backoff", backoff, "start_deadline", e.job.StartDeadline)
			r.setReason(fmt.Sprintf("try %d failed, and a retry would start after its start_deadline of %v", try, e.job.StartDeadline))
			r.to(tooLate, "")
			return
		}
		log.Warn("try failed; retrying", "attempt", try, "error", err, "backoff", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-runCtx.Done():
			t.Stop()
			return
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// watchLong starts the watch of r for its job's AlertAfter d: a goroutine
// that announces r once if it goes on past d from its start. The func it
// returns ends the watch and waits for the goroutine.
func (s *Scheduler) watchLong(r *run, d time.Duration, log hclog.Logger) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(time.Until(r.start.Add(d)))
		defer t.Stop()
		select {
		case <-t.C:
			s.announceLong(r, d, log)
		case <-quit:
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// announceLong announces r, which has gone on past its job's AlertAfter
// d: a warning, WithOnRunningLong, and JobView.RunningLong from now on.
// A run already finished (a forced stop) is not announced.
func (s *Scheduler) announceLong(r *run, d time.Duration, log hclog.Logger) {
	now := time.Now()
	r.mu.Lock()
	if r.state == finished {
		r.mu.Unlock()
		return
	}
	r.long = r.start.Add(d)
	tries := r.tries
	r.mu.Unlock()
	running := now.Sub(r.start)
	log.Warn("run going past its alert_after", "replica", s.opt.replica, "attempt", tries, "alert_after", d, "running", running)
	if s.opt.onRunningLong == nil {
		return
	}
	rr := Run{
		Job: r.e.job.Name, Tick: r.tick, Replica: s.opt.replica, Attempt: tries,
		Start: r.start, Duration: running, Outcome: OutcomeRunningLong,
		Token: r.cl.Token(), TraceID: r.trace,
	}
	if r.manual {
		rr.Trigger = r.cl.Tick
	}
	s.opt.onRunningLong(rr)
}

// complete decides the outcome of r's run, which ended with err, and
// finishes it.
func (s *Scheduler) complete(r *run, err error, log hclog.Logger) Outcome {
	e := r.e
	state := r.current()
	var outcome Outcome
	switch {
	case state == succeeded:
		outcome, err = OutcomeRan, nil
	case state == noPermit:
		log.Error("concurrency permit not taken; tick given back", "group", e.job.ConcurrencyGroup, "error", err)
		outcome = OutcomeError
	case state == tooLate:
		outcome = OutcomeDeadlineMissed
	case !r.replaced().IsZero():
		outcome = OutcomeReplaced
	case state == permitLost || errors.Is(r.cl.Err(), lock.ErrLockLost):
		s.tel.lostLock(e.job.Name)
		outcome = OutcomeLostLock
	case state == cut || e.cancelled():
		// The stop, or Remove's CancelRuns.
		outcome = e.job.stopOutcome()
	default:
		outcome = OutcomeFailed
	}
	return s.finish(r, outcome, err, log)
}

// finish records the outcome in the ledger (the tick done if
// outcome.Done, else given back) and the history, and releases the lock:
// the one way a claimed run ends, once per run (the run's own finalizer
// and a forced stop may race). It returns the outcome recorded.
func (s *Scheduler) finish(r *run, outcome Outcome, runErr error, log hclog.Logger) Outcome {
	if !r.to(finished, outcome) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.outcome
	}
	r.mu.Lock()
	tries, reason := r.tries, r.reason
	r.mu.Unlock()

	end := time.Now()
	rr := Run{
		Job: r.e.job.Name, Tick: r.tick, Replica: s.opt.replica, Attempt: tries,
		Start: r.start, End: end, Duration: end.Sub(r.start), Outcome: outcome,
		Token: r.cl.Token(), TraceID: r.trace, Error: errorTail(runErr, s.opt.redact),
	}
	if r.manual {
		rr.Trigger, rr.Params = r.cl.Tick, r.params
		if r.followed != nil {
			rr.Params = r.followed
		}
	}
	rr.Backfill = r.backfill
	rr.Parent = r.parentRun()
	if outcome == OutcomeDeadlineMissed {
		// Consecutive ticks past their deadline make one history entry.
		rr.Reason, rr.skip = reason, "deadline"
		if r.e.job.everyReplica() {
			rr.skip += "@" + s.opt.replica // each replica's own deadline
		}
	}
	if outcome == OutcomeReplaced {
		if by := r.replaced(); !by.IsZero() {
			reason = "replaced by tick " + fmtTick(by)
		}
		rr.Reason = reason
	}
	ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
	seen := r.cl.Tick
	if r.scheduled() {
		seen = s.latestDue(r.e, r.tick).UnixMilli()
	}
	rec := fleet.Record{Done: outcome.Done(), Outcome: string(outcome), Tries: tries, Seen: seen, Entry: rr.fields()}
	if r.scheduled() {
		// The failures in a row count the scheduled runs alone; a run
		// whose retry the start deadline cut off failed all the same.
		rec.Failed = outcome == OutcomeFailed || outcome == OutcomeDeadlineMissed && runErr != nil
		rec.Succeeded = outcome == OutcomeRan
		if n := r.e.job.PauseAfterFailures; n > 0 {
			rec.PauseAfter, rec.Pause = n, fleet.PauseInfo{By: autoPauseBy + s.opt.replica, Note: autoPauseNote(n)}
		}
	}
	rec.Chain = r.backfill == "" && s.followed(r.e.job.Name) // a backfill's runs start no children
	err := r.cl.Finish(ctx, rec)
	if err == nil && rec.Chain {
		s.pokeChildren(r.e.job.Name)
	}
	recorded, paused := err == nil, r.cl.Paused()
	if err != nil && !paused && rec.Failed && rec.PauseAfter > 0 {
		paused = s.pausedByFinish(r, err, log)
	}
	if outcome == OutcomeLostLock && errors.Is(err, lock.ErrNotHeld) {
		// A lost lease records nothing in the ledger (the tick is run
		// again); the history keeps the run all the same.
		ledger := r.e.runLedger()
		if r.manual {
			ledger = r.e.manualLedger()
		}
		herr := ledger.Append(ctx, rr.fields())
		recorded = herr == nil
		if herr != nil {
			log.Warn("run not recorded in the history", "error", herr)
		}
	}
	cancel()
	s.mu.Lock()
	delete(s.active, r)
	s.mu.Unlock()
	s.record(r.e, r.tick, outcome)

	line := []any{"replica", s.opt.replica, "attempt", tries, "duration", rr.Duration, "outcome", string(outcome), "token", r.cl.Token()}
	switch {
	case outcome == OutcomeLostLock:
		log.Error("run finished: lock lost while the job ran", append(line, "error", runErr, "cause", context.Cause(r.cl.Context()))...)
	case err != nil:
		log.Error("run finished, not recorded in the ledger", append(line, "error", err)...)
	case outcome == OutcomeFailed:
		log.Error("run finished: job failed", append(line, "error", runErr)...)
	case outcome == OutcomeHandedOff && errors.Is(context.Cause(r.e.ctx), ErrRemoved):
		log.Info("run finished: cancelled as its job was removed; tick handed off", line...)
	case outcome == OutcomeHandedOff:
		log.Info("run finished: interrupted by the stop; tick handed off", line...)
	case outcome == OutcomeInterrupted:
		log.Warn("run finished: interrupted; tick abandoned", append(line, "error", runErr)...)
	case outcome == OutcomeError:
		log.Error("run finished: not run", append(line, "error", runErr)...)
	case outcome == OutcomeDeadlineMissed && runErr != nil:
		log.Error("run finished: job failed, and a retry would start after the start deadline", append(line, "error", runErr)...)
	case outcome == OutcomeDeadlineMissed:
		log.Warn("run finished: not started by its start deadline; not run", line...)
	case outcome == OutcomeReplaced:
		log.Warn("run finished: replaced by a later tick", append(line, "reason", rr.Reason, "error", runErr)...)
	default:
		log.Info("run finished", line...)
	}
	if recorded && s.opt.onRun != nil {
		s.opt.onRun(rr)
	}
	if paused {
		s.autoPaused(r.e, rr, rec.Pause, log)
	}
	return outcome
}

// autoPauseBy starts the author of a pause that a finish set
// (Job.PauseAfterFailures): "replica:" and the replica's id.
const autoPauseBy = "replica:"

// autoPauseNote is the note of a pause after n failed runs in a row.
func autoPauseNote(n int) string {
	return fmt.Sprintf("paused after %d failed runs in a row", n)
}

// autoPaused tells of the pause that the finish of the failed run rr set
// (Job.PauseAfterFailures): this replica at once, the fleet by a message
// (the ledger is what counts), the log, and WithOnRun's event.
func (s *Scheduler) autoPaused(e *entry, rr Run, p fleet.PauseInfo, log hclog.Logger) {
	e.setPaused(true, time.Time{})
	ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
	defer cancel()
	heard, err := s.store.Publish(ctx, controlTopic, "pause\n"+e.job.Name)
	log.Warn("job paused fleet-wide: its failed runs in a row reached its pause_after_failures; resume it to run it again",
		"pause_after_failures", e.job.PauseAfterFailures, "note", p.Note, "heard_by", heard, "publish_error", err)
	if s.opt.onRun != nil {
		rr.Outcome, rr.Error = OutcomeAutoPaused, p.Note
		s.opt.onRun(rr)
	}
}

// takeoverWhy tells why the tick of cl, taken over from another claim
// (cl.Try > 1), needed it: its claimant gave it back, or stopped answering.
func (s *Scheduler) takeoverWhy(ctx context.Context, g *fleet.Ledger, cl *fleet.Claim) string {
	ctx, cancel := context.WithTimeout(ctx, finishTimeout)
	defer cancel()
	st, err := g.State(ctx)
	switch {
	case err != nil:
		return "unknown: " + err.Error()
	case cl.From != "" && st.Finished == cl.From:
		return "its run was given back (" + st.Outcome + ")"
	}
	return "its claimant stopped answering (it died, was paused or cut off, or lost the lock) and its lease expired"
}

// ownerReplica is the replica of a claim's owner id: the lock Client's ID
// before its last colon.
func ownerReplica(owner string) string {
	if i := strings.LastIndexByte(owner, ':'); i > 0 {
		return owner[:i]
	}
	return owner
}

func (r *run) setReason(reason string) {
	r.mu.Lock()
	r.reason = reason
	r.mu.Unlock()
}

func (r *run) setTries(n int) {
	r.mu.Lock()
	r.tries = n
	r.mu.Unlock()
}

// latestDue is the latest tick of e due now, from tick on: the ticks this
// replica skipped while it ran tick (overlap) were handled, not missed.
func (s *Scheduler) latestDue(e *entry, tick time.Time) time.Time {
	now := s.opt.clock.Now()
	for range maxCatchUp {
		n := e.sched.Next(tick)
		if n.IsZero() || n.After(now) {
			break
		}
		tick = n
	}
	return tick
}
