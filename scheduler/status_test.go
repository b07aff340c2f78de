package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// Status names the run under way here, its tick and its start, and
// nothing once it has ended.
func TestStatusNamesTheRunUnderWay(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	const job = "rebuild"
	j, release := newJournal(), make(chan struct{})
	r := newReplica(t, c, "r1", scheduler.WithClock(testclock.NewFake(fakeStart)))
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1h", Run: j.fn(func(ctx context.Context) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})})
	r.start()
	testkit.Eventually(t, 10*time.Second, "the replica runs", r.s.Running)
	if st := statusOf(t, r.s, job); !st.RunTick.IsZero() || !st.RunStart.IsZero() {
		t.Errorf("before any run: RunTick %v, RunStart %v; want zero", st.RunTick, st.RunStart)
	}
	if _, err := r.s.Trigger(testkit.Context(t), job); err != nil {
		t.Fatal(err)
	}
	var x execution
	select {
	case x = <-j.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("the triggered run did not start")
	}
	st := statusOf(t, r.s, job)
	if !st.Running || !st.RunTick.Equal(x.info.Tick) || st.RunStart.IsZero() || st.RunStart.After(x.start) {
		t.Errorf("during the run of tick %v (started %v): %+v", x.info.Tick, x.start, st)
	}
	close(release)
	testkit.Eventually(t, 10*time.Second, "the run gone from Status", func() bool {
		st := statusOf(t, r.s, job)
		return st.RunTick.IsZero() && st.RunStart.IsZero()
	})
}
