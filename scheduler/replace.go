package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/fleet"
)

// ErrReplaced is the cause (context.Cause) of the ctx of a run that a
// later tick replaced (OverlapReplace), wrapped with that tick: "scheduler:
// replaced by a later tick: by tick 2026-01-02T03:04:05Z".
var ErrReplaced = errors.New("scheduler: replaced by a later tick")

// OutcomeReplaced: the run was ended because a later tick of its job
// (OverlapReplace) was due while it held the job's lock; or, its holder
// gone, the tick was recorded replaced without being run again. The tick
// is done.
const OutcomeReplaced Outcome = "replaced"

// queues reports whether a tick of j waits for the lock while a run of an
// earlier tick holds it (overlap queue, and replace, whose claim asks that
// run to end and waits for it).
func (j *Job) queues() bool { return j.Overlap == OverlapQueue || j.Overlap == OverlapReplace }

// overlapLimit is how many ticks of e a replica handles at once: one, or
// under queue and replace one run and one tick that waits for it.
func (e *entry) overlapLimit() int {
	if e.job.queues() {
		return 2
	}
	return 1
}

// replaceOption is the ledger option of a job's scheduled runs: claims
// that replace, under OverlapReplace.
func (j *Job) replaceOption() []fleet.LedgerOption {
	if j.Overlap == OverlapReplace {
		return []fleet.LedgerOption{fleet.WithReplace()}
	}
	return nil
}

// replacedErr is the cause of a run's ctx ended by the claim of tick by.
func replacedErr(by int64) error {
	return fmt.Errorf("%w: by tick %s", ErrReplaced, fmtTick(time.UnixMilli(by)))
}

// replacedAlready reads, for a scheduled run of a replace job about to
// start, whether a later tick asked it to end before it started (its
// claimant died, and the claim of that later tick took it over: the tick
// is not run again), and returns that tick (0 if none). It reads the
// ledger the run was claimed in (runLedger: a replica's own for a job on
// every replica). A ledger that cannot be read lets the run start: its
// watch reads it again.
func (s *Scheduler) replacedAlready(ctx context.Context, r *run) int64 {
	if r.manual || r.e.job.Overlap != OverlapReplace {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, finishTimeout)
	defer cancel()
	by, err := r.e.runLedger().ReplaceAsked(ctx)
	if err != nil || by <= r.tick.UnixMilli() {
		return 0
	}
	return by
}

// watchReplace starts the watch of r, a run of a replace job, for a later
// tick's request to end it: a goroutine that reads the job's ledger when
// this replica hears the request (heardReplace) and every third of the
// lease (a message lost), and ends the ctx it returns, a child of parent,
// with cause ErrReplaced when the ledger's replace is after r's tick. The
// func it returns ends the watch and waits for the goroutine.
func (s *Scheduler) watchReplace(r *run, parent context.Context, log hclog.Logger) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(s.store.LeaseTime()/3, time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-t.C:
			case <-r.poke:
			case <-quit:
				return
			case <-ctx.Done():
				return
			}
			if by := s.replacedAlready(ctx, r); by != 0 {
				cause := replacedErr(by)
				cancel(cause)
				if context.Cause(ctx) == cause {
					r.mu.Lock()
					r.replacedBy = time.UnixMilli(by)
					r.mu.Unlock()
					log.Warn("run asked to end: a later tick replaces it", "by", fmtTick(time.UnixMilli(by)))
				}
				return
			}
		}
	}()
	return ctx, func() {
		close(quit)
		<-done
		cancel(nil)
	}
}

// replaced returns the tick whose request ended r's run; zero if none did.
func (r *run) replaced() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.replacedBy
}

// watchReplaces watches e's ledger for the requests of later ticks to end a
// run (TickEvent.Replace), when e's job replaces, and returns the func that
// stops the watch (nil if none).
func (s *Scheduler) watchReplaces(e *entry) (stop func()) {
	if e.job.Overlap != OverlapReplace {
		return nil
	}
	stop, err := e.runLedger().Watch(func(ev fleet.TickEvent) {
		if ev.Replace {
			s.heardReplace(e, ev.Tick)
		}
	})
	if err != nil {
		s.log.Warn("requests to replace a run not heard: runs of this replica read them every third of the lease", "job", e.job.Name, "error", err)
		return nil
	}
	return stop
}

// heardReplace wakes the watch (watchReplace) of each scheduled run of e's
// job under way here whose tick is before tick: the watch reads the
// ledger, which decides.
func (s *Scheduler) heardReplace(e *entry, tick int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r := range s.active {
		if r.e.job.Name != e.job.Name || r.manual || r.poke == nil || r.tick.UnixMilli() >= tick {
			continue
		}
		select {
		case r.poke <- struct{}{}:
		default:
		}
	}
}
