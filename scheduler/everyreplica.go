package scheduler

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/lockcron/lockcron/fleet"
)

// Replicas says which replicas run each tick of a job: one across the
// fleet (ReplicasOne, the default) or every live replica (ReplicasAll).
type Replicas string

const (
	// ReplicasOne runs each tick once across the fleet, under the job's
	// lock and ledger.
	ReplicasOne Replicas = "one"
	// ReplicasAll runs each tick on every replica that runs the job, once
	// per replica: each claims it at once (no ranking, no fallback) in a
	// ledger of its own, under a lock of its own (fleet.WithOwnLock with
	// its replica's id), so no fleet-wide lock is taken, and a replica
	// never runs a tick twice, also after a restart with the same replica
	// id. Every run goes to the job's history with its replica. See the
	// package doc, "Every replica".
	ReplicasAll Replicas = "all"
)

// everyReplica reports whether j runs on every replica.
func (j *Job) everyReplica() bool { return j.Replicas == ReplicasAll }

// validateReplicas checks j.Replicas and what it cannot go with, and
// fills in its defaults: Replicas ReplicasOne; for ReplicasAll, OnShutdown
// ShutdownAbandon. It runs before OnShutdown's own default.
func (j *Job) validateReplicas(bad func(field, format string, args ...any)) {
	switch j.Replicas {
	case "":
		j.Replicas = ReplicasOne
	case ReplicasOne:
	case ReplicasAll:
		if j.MaxConcurrency > 0 {
			bad("max_concurrency", "%d with replicas %q: a job that runs on every replica takes no fleet-wide permit", j.MaxConcurrency, ReplicasAll)
		}
		if len(j.Params) > 0 {
			// (Its manual runs are claimed in each replica's own ledger,
			// which keeps no order of the requests: one heard before an
			// earlier one would have that one answered done there.)
			bad("params", "%q with replicas %q: the manual runs of a job on every replica take no parameters", j.Params, ReplicasAll)
		}
		if len(j.After) > 0 {
			bad("after", "%q with replicas %q: a job that runs on every replica runs on its own schedule, not after other jobs", j.After, ReplicasAll)
		}
		if j.PauseAfterFailures > 0 {
			bad("pause_after_failures", "%d with replicas %q: the failed runs in a row are counted across the fleet, and a job that runs on every replica has one row per replica", j.PauseAfterFailures, ReplicasAll)
		}
		switch j.OnShutdown {
		case "":
			j.OnShutdown = ShutdownAbandon
		case ShutdownHandoff:
			bad("on_shutdown", "%q with replicas %q: a run on every replica is the stopping replica's own, and no other replica can take it over; use %q (the default)", ShutdownHandoff, ReplicasAll, ShutdownAbandon)
		}
	default:
		bad("replicas", "%q is not one of %q, %q", j.Replicas, ReplicasOne, ReplicasAll)
	}
}

// ownLedgers makes the ledgers of a job that runs on every replica on
// this replica (ReplicasAll): its scheduled ticks' and its manual runs',
// beside a lock of this replica's own in the job's hash slot
// (fleet.WithOwnLock), writing to the job's history; the scheduled ticks'
// replaces under OverlapReplace. e.ledger stays the job's, for its pause,
// its manual requests and its view.
func (s *Scheduler) ownLedgers(e *entry, ledger func(string, string, ...fleet.LedgerOption) (*fleet.Ledger, error), opts ...fleet.LedgerOption) error {
	own := fleet.WithOwnLock(s.opt.replica)
	var err error
	if e.mine, err = ledger(e.job.LockName, e.job.Name, slices.Concat(opts, []fleet.LedgerOption{own}, e.job.replaceOption())...); err != nil {
		return fmt.Errorf("scheduler: job %q: replica id %q: %w: %w", e.job.Name, s.opt.replica, ErrInvalid, err)
	}
	e.mineManual, err = ledger(e.job.LockName, e.job.Name+manualSuffix, append(opts, own, fleet.WithSharedHistory(e.job.Name))...)
	if err != nil {
		return fmt.Errorf("scheduler: job %q: replica id %q: %w: %w", e.job.Name, s.opt.replica, ErrInvalid, err)
	}
	return nil
}

// runLedger is the ledger e's scheduled ticks are claimed in: this
// replica's own for a job that runs on every replica, else the job's.
func (e *entry) runLedger() *fleet.Ledger {
	if e.mine != nil {
		return e.mine
	}
	return e.ledger
}

// manualLedger is the ledger e's manual runs are claimed in, likewise.
func (e *entry) manualLedger() *fleet.Ledger {
	if e.mineManual != nil {
		return e.mineManual
	}
	return e.manual
}

// pausedEverywhere reports whether the job of e, which runs on every
// replica, is paused: its pause is in the job's ledger, which claims of
// this replica's own ledger do not read, so it is read before each claim
// (one round trip). A pause found is taken as heard (setPaused); a read
// that fails takes the job for not paused, as a claim that cannot reach
// the store would not find it paused either.
func (s *Scheduler) pausedEverywhere(e *entry) bool {
	ctx, cancel := context.WithTimeout(e.ctx, finishTimeout)
	defer cancel()
	st, err := e.ledger.State(ctx)
	if err != nil {
		return false
	}
	s.missedTriggers(e, st.Triggers)
	if !st.Paused {
		return false
	}
	e.setPaused(true, st.Pause.Until)
	return true
}

// readTriggers reads, as the loop of e (a job that runs on every replica)
// starts, how many manual runs of it were requested before: those are not
// this replica's to run (missedTriggers). A read that fails leaves it to
// the first read that succeeds.
func (s *Scheduler) readTriggers(e *entry) {
	ctx, cancel := context.WithTimeout(e.ctx, finishTimeout)
	defer cancel()
	if st, err := e.ledger.State(ctx); err == nil {
		s.missedTriggers(e, st.Triggers)
	}
}

// missedTriggers runs the manual runs of e, a job that runs on every
// replica, that the job's ledger counts (triggers, read before a claim)
// and whose request this replica did not hear (its connection was down
// when the request was published): those requested after this replica
// started (the count its first read found), and not heard. Each runs as a
// heard one does (fireManual), claimed in this replica's own ledger of
// manual runs, which answers a run it did already as done; so a request
// heard meanwhile runs once.
func (s *Scheduler) missedTriggers(e *entry, triggers int64) {
	e.mu.Lock()
	from := max(e.triggers, e.pending)
	known := e.triggersKnown
	e.triggers, e.triggersKnown = max(e.triggers, triggers), true
	e.mu.Unlock()
	if !known || triggers <= from {
		return
	}
	now := time.Now()
	for n := from + 1; n <= triggers; n++ {
		s.log.Info("manual run not heard, found in the job's ledger: run here", "job", e.job.Name, "trigger", n)
		s.fireManual(e, n, now)
	}
}

// claimOwnTick is claimTick's claim of a tick of a job that runs on every
// replica: the job's pause first (pausedEverywhere), then the claim in
// this replica's own ledger.
func (s *Scheduler) claimOwnTick(e *entry, tick time.Time, c claimSpec) {
	if s.pausedEverywhere(e) {
		s.record(e, tick, OutcomePaused)
		s.recordPaused(e, tick, false)
		return
	}
	s.handleClaim(e, tick, c)
}

// ownSkip returns the ledger in which recordSkip records tick of e, a
// job that runs on every replica, skipped for outcome, and sets r's cause.
// A pause or an exclusion is the fleet's decision: it is recorded once for
// the fleet, in the job's ledger, as for a job of one run per tick (a
// Pass there also renews that ledger's lifetime, and with it the pause's,
// which no claim renews); this replica's own ledger only moves its seen
// past the tick (one more command), so that a restart does not count it
// missed. A busy tick is this replica's own (its run of an earlier tick
// goes on): recorded in its own ledger, the cause marked with the replica
// so that it coalesces with this replica's busy ticks only (the store
// coalesces across other replicas' busy ticks in between).
func (s *Scheduler) ownSkip(ctx context.Context, e *entry, tick time.Time, skew time.Duration, outcome Outcome, r *Run) *fleet.Ledger {
	if outcome != OutcomePaused && outcome != OutcomeExcluded {
		r.skip += "@" + s.opt.replica
		return e.mine
	}
	if _, err := e.mine.Pass(ctx, tick.UnixMilli(), -skew, nil); err != nil && s.stopCtx.Err() == nil {
		s.runLog(e, tick).Warn("skipped tick not passed in this replica's ledger: a restart may count it missed", "outcome", string(outcome), "error", err)
	}
	return e.ledger
}

// lastPerReplica returns, for a job that runs on every replica, the
// newest entry of each replica among the job's latest history entries
// (DefaultHistoryKeep of them), by replica id. A replica whose runs all
// fell out of that window is not listed.
func lastPerReplica(runs []Run) []Run {
	seen := make(map[string]bool)
	var out []Run
	for _, r := range runs { // newest first
		if r.Replica == "" || seen[r.Replica] {
			continue
		}
		seen[r.Replica] = true
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b Run) int {
		switch {
		case a.Replica < b.Replica:
			return -1
		case a.Replica > b.Replica:
			return 1
		}
		return 0
	})
	return out
}
