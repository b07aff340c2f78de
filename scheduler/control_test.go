package scheduler_test

import (
	"context"
	"errors"
	"strconv"
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
	if err := fleet[0].s.Pause(ctx, job, true, testPause); err != nil {
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
	if err := fleet[1].s.Pause(ctx, job, false, testPause); err != nil {
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

	if err := sender.s.Pause(ctx, job, true, testPause); err != nil {
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

// Once every replica reports itself running (its subscriptions confirmed),
// a single trigger reaches the fleet, and one replica alone claims the
// manual run: the first in rank for it; the others hear it claimed and
// done.
func TestTriggerAfterReadyClaimedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "once"
	j := newJournal()
	var fleet []*replica
	var logs []*claimLog
	for i := range 3 {
		r, h := countedReplica(t, srv, "r"+strconv.Itoa(i+1), scheduler.WithClaimFallback(time.Second), scheduler.WithMemberTTL(600*time.Millisecond))
		r.add(t, scheduler.Job{Name: job, Schedule: "@yearly", Run: j.fn(sleepWork(300 * time.Millisecond))})
		fleet, logs = append(fleet, r), append(logs, h)
	}
	for _, r := range fleet {
		r.start()
	}
	testkit.Eventually(t, 10*time.Second, "every replica running, and three members", func() bool {
		return allRunning(fleet) && members(srv) == 3
	})
	sender := newRedisReplica(t, srv, "cli", nil)
	sender.add(t, scheduler.Job{Name: job, Schedule: "@yearly", Run: j.fn(nil)})
	ctx := testkit.Context(t)
	for round := range 3 {
		n, err := sender.s.Trigger(ctx, job)
		if err != nil {
			t.Fatal(err)
		}
		if n < 3 {
			t.Fatalf("round %d: the trigger reached %d Clients, want the 3 running replicas at least", round, n)
		}
		select {
		case <-j.ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: no run within 10s of a trigger sent while every replica was running", round)
		}
		testkit.Eventually(t, 10*time.Second, "the run finished", func() bool { return !sender.s.Jobs(ctx)[0].Ledger.Held })
	}
	// Room for a wrong second claim of the last trigger (the fallback is 1s).
	time.Sleep(1500 * time.Millisecond)
	stopAll(t, fleet...)
	if got := len(j.all()); got != 3 {
		t.Fatalf("%d runs of 3 triggers, want 3", got)
	}
	// The first trigger may find a replica that has not heard of all three
	// members yet (it heartbeats every ttl/3): it claims at once, as a
	// lone replica does. The later ones are counted.
	for n := int64(2); n <= 3; n++ {
		total := 0
		for _, h := range logs {
			total += h.count(job+"!manual", n)
		}
		if total != 1 {
			t.Errorf("manual run %d: %d claims across the fleet, want 1", n, total)
		}
	}
}

// A paused job costs no claim per tick: the replicas hear the pause and
// record its ticks as paused without asking the store; resumed, it runs
// again at once.
func TestPausedJobSendsNoClaims(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "quiet"
	j := newJournal()
	var fleet []*replica
	var logs []*claimLog
	for i := range 3 {
		r, h := countedReplica(t, srv, "r"+strconv.Itoa(i+1))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Run: j.fn(nil)})
		fleet, logs = append(fleet, r), append(logs, h)
	}
	for _, r := range fleet {
		r.start()
	}
	testkit.Eventually(t, 10*time.Second, "every replica running", func() bool { return allRunning(fleet) })
	claims := func() int {
		n := 0
		for _, h := range logs {
			n += h.total(job)
		}
		return n
	}
	ctx := testkit.Context(t)
	if err := fleet[0].s.Pause(ctx, job, true, testPause); err != nil {
		t.Fatal(err)
	}
	// Once each replica has recorded a tick paused (it heard the pause, or
	// a claim on its way found it), it sends no claim for the job.
	var first time.Time
	testkit.Eventually(t, 10*time.Second, "a tick recorded paused on every replica", func() bool {
		first = time.Time{}
		for _, r := range fleet {
			st := statusOf(t, r.s, job)
			if st.LastOutcome != scheduler.OutcomePaused {
				return false
			}
			if st.LastTick.After(first) {
				first = st.LastTick
			}
		}
		return true
	})
	before, runs := claims(), len(j.all())
	testkit.Eventually(t, 10*time.Second, "two more ticks recorded paused on every replica", func() bool {
		for _, r := range fleet {
			if st := statusOf(t, r.s, job); st.LastOutcome != scheduler.OutcomePaused || st.LastTick.Before(first.Add(2*time.Second)) {
				return false
			}
		}
		return true
	})
	if n := claims() - before; n != 0 {
		t.Errorf("%d claims of the paused job's ticks, want 0", n)
	}
	if n := len(j.all()); n != runs {
		t.Errorf("%d runs while paused", n-runs)
	}
	if err := fleet[1].s.Pause(ctx, job, false, testPause); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, "a run after the resume", func() bool { return len(j.all()) > runs })
	stopAll(t, fleet...)
	checkOncePerTick(t, j.byJob(), time.Second)
}

// allRunning reports whether every replica reports itself running (its
// subscriptions confirmed).
func allRunning(fleet []*replica) bool {
	for _, r := range fleet {
		if !r.s.Running() {
			return false
		}
	}
	return true
}
