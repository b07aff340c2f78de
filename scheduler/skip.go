package scheduler

import (
	"context"
	"time"
)

// recordSkip records in e's history that tick was not run, with outcome,
// cause ("calendar:NAME", "freeze:ID") and reason (in words): once across
// the fleet, by the first replica to pass the tick over (fleet.Ledger.Pass),
// only once the store's clock has reached tick.
func (s *Scheduler) recordSkip(e *entry, tick time.Time, outcome Outcome, cause, reason string) {
	now := time.Now()
	r := Run{Job: e.job.Name, Tick: tick, Replica: s.opt.replica, Start: now, End: now, Outcome: outcome, Reason: reason}
	ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
	first, err := e.ledger.Pass(ctx, tick.UnixMilli(), 0, r.fields())
	cancel()
	switch {
	case err != nil:
		if s.stopCtx.Err() == nil {
			s.log.Warn("skipped tick not recorded in the history", "job", e.job.Name, "tick", fmtTick(tick), "cause", cause, "error", err)
		}
	case first && s.opt.onRun != nil:
		s.opt.onRun(r)
	}
}
