package scheduler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// A paused job runs on no replica; its ticks count as paused; resumed, it
// runs again.
func TestPauseResumeFleetWide(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "pausable"
	j, clk := newJournal(), testclock.NewFake(fakeStart)
	fleet, meters := fleetOn(t, srv, 2, clk, scheduler.Job{Name: job, Schedule: "@every 1s", Run: j.fn(nil)})
	step(t, clk, 2)
	testkit.Eventually(t, 10*time.Second, "a first run", func() bool { return len(j.all()) == 1 })
	settle(t, clk, 2, job, fleet...)

	ctx := testkit.Context(t)
	if err := fleet[0].s.Pause(ctx, job, true); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		step(t, clk, 2)
		testkit.Eventually(t, 10*time.Second, "ticks paused", func() bool {
			return runsOf(t, job, scheduler.OutcomePaused, meters...) == int64(2*(i+1)) // on both replicas
		})
		settle(t, clk, 2, job, fleet...)
	}
	if n := len(j.all()); n != 1 {
		t.Fatalf("%d runs, want 1: a paused tick ran", n)
	}
	views := fleet[1].s.Jobs(ctx)
	if len(views) != 1 || !views[0].Ledger.Paused || len(views[0].NextTicks) != 3 {
		t.Fatalf("Jobs while paused: %+v", views)
	}
	if err := fleet[1].s.Pause(ctx, job, false); err != nil {
		t.Fatal(err)
	}
	step(t, clk, 2)
	testkit.Eventually(t, 10*time.Second, "a run after resume", func() bool { return len(j.all()) == 2 })
	stopAll(t, fleet...)
	checkOncePerTick(t, j.byJob(), 0)
}

// A trigger from a Scheduler that does not run (as the command sends it)
// runs the job once on one replica of the fleet, under its lock, even
// while the job is paused; each trigger runs once.
func TestTriggerRunsOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "manual"
	j := newJournal()
	yearly := scheduler.Job{Name: job, Schedule: "@yearly", Run: j.fn(sleepWork(200 * time.Millisecond))}
	fleet, _ := fleetOf(t, srv, 3, nil, yearly)
	sender := newRedisReplica(t, srv, "cli", nil)
	sender.add(t, scheduler.Job{Name: job, Schedule: "@yearly", Run: j.fn(nil)})

	ctx := testkit.Context(t)
	// Each replica subscribes as it starts: trigger until one runs.
	deadline := time.Now().Add(10 * time.Second)
	for len(j.all()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no run 10s after the first trigger")
		}
		if _, err := sender.s.Trigger(ctx, job); err != nil {
			t.Fatal(err)
		}
		select {
		case <-j.ch:
		case <-time.After(300 * time.Millisecond):
		}
	}
	testkit.Eventually(t, 10*time.Second, "the runs finished", func() bool {
		v := sender.s.Jobs(ctx)[0]
		return !v.Ledger.Held
	})
	first := len(j.all())

	if err := sender.s.Pause(ctx, job, true); err != nil {
		t.Fatal(err)
	}
	if _, err := sender.s.Trigger(ctx, job); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the paused job's manual run", func() bool { return len(j.all()) > first })
	time.Sleep(300 * time.Millisecond) // room for a wrong second run of the same trigger
	stopAll(t, fleet...)
	runs := j.all()
	if len(runs) != first+1 {
		t.Fatalf("%d runs after %d triggers that ran, want one each", len(runs), first+1)
	}
	seen := map[int64]bool{}
	for _, x := range runs {
		if seen[x.info.Token] {
			t.Fatalf("token %d ran twice", x.info.Token)
		}
		seen[x.info.Token] = true
		if d := time.Since(x.info.Tick); d > 30*time.Second || d < 0 {
			t.Fatalf("manual run's tick %s is not the time of its trigger", fmtT(x.info.Tick))
		}
	}
	if _, err := sender.s.Trigger(ctx, "nope"); !errors.Is(err, scheduler.ErrUnknownJob) {
		t.Fatalf("Trigger of an unknown job: %v, want ErrUnknownJob", err)
	}
}

// Jobs of one concurrency group never run more at once than its
// MaxConcurrency, across replicas.
func TestMaxConcurrency(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var now, peak atomic.Int32
	work := func(ctx context.Context) error {
		n := now.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(400 * time.Millisecond)
		now.Add(-1)
		return nil
	}
	j := newJournal()
	var js []scheduler.Job
	for _, name := range []string{"a", "b", "c", "d"} {
		js = append(js, scheduler.Job{Name: name, Schedule: "@every 1s", Run: j.fn(work),
			MaxConcurrency: 2, ConcurrencyGroup: "heavy"})
	}
	clk := testclock.NewFake(fakeStart)
	fleet, _ := fleetWith(t, srv, 2, []lock.Option{lock.WithLeaseTime(time.Second)}, []scheduler.Option{scheduler.WithClock(clk)}, js...)
	// Each tick, the four jobs of the group fall due at once.
	stepUntil(t, clk, 8, "", fleet, "12 runs", func() bool { return len(j.all()) >= 12 })
	stopAll(t, fleet...)
	if p := peak.Load(); p != 2 {
		t.Fatalf("at most %d runs of the group at once, want exactly 2", p)
	}
}

// A trigger that comes while a manual run of the job is under way runs
// after it, on some replica: it is not lost.
func TestTriggerDuringManualRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "manual2"
	j := newJournal()
	fleet, _ := fleetOf(t, srv, 2, nil, scheduler.Job{Name: job, Schedule: "@yearly", Run: j.fn(sleepWork(time.Second))})
	ctx := testkit.Context(t)
	deadline := time.Now().Add(10 * time.Second)
	for started := false; !started; {
		if time.Now().After(deadline) {
			t.Fatal("no run 10s after the first trigger")
		}
		if _, err := fleet[0].s.Trigger(ctx, job); err != nil {
			t.Fatal(err)
		}
		select {
		case <-j.ch:
			started = true
		case <-time.After(300 * time.Millisecond):
		}
	}
	if _, err := fleet[1].s.Trigger(ctx, job); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the second trigger's run", func() bool { return len(j.all()) >= 2 })
	stopAll(t, fleet...)
	if runs := j.all(); len(runs) != 2 || runs[0].info.Token == runs[1].info.Token {
		t.Fatalf("%d runs, want 2 with their own tokens: %+v", len(runs), runs)
	}
}
