package scheduler

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
)

// pausedByFinish reports whether the failed Finish of r's claim paused its
// job's ledger all the same (Job.PauseAfterFailures): its reply was lost
// and Finish gave up, or it failed after the ledger recorded it. It reads
// the ledger, trying again while finishTimeout lasts, and finds the pause
// set by this claim when the pause's finisher is the claim's owner id;
// false when the ledger cannot be read in that time.
func (s *Scheduler) pausedByFinish(r *run, finishErr error, log hclog.Logger) bool {
	log.Warn("finish failed; reading the ledger to learn whether it paused the job", "error", finishErr)
	ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
	defer cancel()
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		st, err := r.e.ledger.State(ctx)
		if err == nil {
			return st.Paused && st.PauseFinish == r.cl.Owner()
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			log.Warn("ledger not read after a failed finish: whether it paused the job is unknown", "error", err)
			return false
		}
	}
}
