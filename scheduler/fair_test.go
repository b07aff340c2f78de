package scheduler_test

import (
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/scheduler"
)

// Jobs on a fair lock keep the once-per-tick promise; two jobs that share
// the lock, with runs that fill it, both keep running: the lock goes to
// the claim that waited first.
func TestFairLockJobs(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	mk := func(name string) scheduler.Job {
		return scheduler.Job{Name: name, Schedule: "@every 1s", LockName: "shared", LockKind: scheduler.LockFair,
			Overlap: scheduler.OverlapQueue, Run: j.fn(sleepWork(600 * time.Millisecond))}
	}
	fleet, _ := fleetOf(t, srv, 3, nil, mk("a"), mk("b"))
	testkit.Eventually(t, 30*time.Second, "six runs of each job", func() bool {
		by := j.byJob()
		return len(by["a"]) >= 6 && len(by["b"]) >= 6
	})
	stopAll(t, fleet...)
	byJob := j.byJob()
	checkOncePerTick(t, byJob, 0)
	all := append(append([]execution(nil), byJob["a"]...), byJob["b"]...)
	for i, x := range all {
		for _, y := range all[i+1:] {
			if x.start.Before(y.end) && y.start.Before(x.end) {
				t.Fatalf("%s tick %s and %s tick %s overlap under the shared lock", x.info.Job, fmtT(x.info.Tick), y.info.Job, fmtT(y.info.Tick))
			}
		}
	}
}
