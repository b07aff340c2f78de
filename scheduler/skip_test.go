package scheduler_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/scheduler"
)

// skipEntries returns the job's history entries with outcome, newest
// first.
func skipEntries(t *testing.T, s *scheduler.Scheduler, job string, outcome scheduler.Outcome) []scheduler.Run {
	t.Helper()
	runs, err := s.History(testkit.Context(t), job, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []scheduler.Run
	for _, r := range runs {
		if r.Outcome == outcome {
			out = append(out, r)
		}
	}
	return out
}

// countOf is how many ticks an entry stands for.
func countOf(r scheduler.Run) int64 { return max(r.Count, 1) }

// A run longer than the period, on two replicas: each tick that comes while
// it holds the lock is skipped on both, and recorded once in the history,
// where the consecutive skips make one entry with their count, their
// range and the holder.
func TestBusySkipsCoalesceInTheHistory(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "slow"
	j, clk, end := newJournal(), testclock.NewFake(fakeStart), make(chan struct{})
	var fleet []*replica
	for _, id := range []string{"r1", "r2"} {
		r := newRedisReplica(t, srv, id, nil, scheduler.WithClock(clk))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Overlap: scheduler.OverlapSkip, Run: j.fn(heldUntil(end))})
		fleet = append(fleet, r)
	}
	// r2 starts once r1's run holds the lock: it did not fire that tick,
	// so it handles none of the job's ticks between the next ones.
	fleet[0].start()
	t1 := step(t, clk, 1)
	x := j.awaitStart(t, 10*time.Second)
	other := fleet[1]
	other.start()
	testkit.Eventually(t, 10*time.Second, "both replicas running", func() bool { return allRunning(fleet) })
	var ticks []time.Time
	for i := range 3 {
		settle(t, clk, 2, job, other)
		ticks = append(ticks, step(t, clk, 2))
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d busy ticks recorded", i+1), func() bool {
			es := skipEntries(t, other.s, job, scheduler.OutcomeSkippedBusy)
			return len(es) == 1 && countOf(es[0]) == int64(i+1)
		})
	}
	close(end)
	testkit.Eventually(t, 10*time.Second, "the run finished", func() bool { return len(j.all()) == 1 })
	stopAll(t, fleet...)

	runs, err := other.s.History(testkit.Context(t), job, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 2 || runs[0].Outcome != scheduler.OutcomeRan || !runs[0].Tick.Equal(t1) {
		t.Fatalf("history: %+v; want the run of %s (recorded as it ended), then the skips", runs, fmtT(t1))
	}
	b := runs[1]
	t.Logf("busy entry: %d ticks, %s..%s, replica %s: %s", b.Count, fmtT(b.First), fmtT(b.Tick), b.Replica, b.Reason)
	if b.Outcome != scheduler.OutcomeSkippedBusy || b.Count != 3 || !b.First.Equal(ticks[0]) || !b.Tick.Equal(ticks[2]) {
		t.Errorf("busy entry: %s, %d ticks from %s to %s; want skipped_busy, 3 ticks from %s to %s",
			b.Outcome, b.Count, fmtT(b.First), fmtT(b.Tick), fmtT(ticks[0]), fmtT(ticks[2]))
	}
	want := "lock held by " + x.info.Replica + " (run of " + t1.UTC().Format(time.RFC3339) + " since "
	if !strings.HasPrefix(b.Reason, want) {
		t.Errorf("reason %q, want it to start with %q", b.Reason, want)
	}
}

// A paused job's ticks, skipped on every replica without a claim, are
// recorded once each in the history and coalesced into one entry; a run
// after the resume starts a new one.
func TestPausedTicksCoalesceInTheHistory(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "pausable"
	j, clk := newJournal(), testclock.NewFake(fakeStart)
	fleet, _ := fleetOn(t, srv, 2, clk, scheduler.Job{Name: job, Schedule: "@every 1s", Run: j.fn(nil)})
	testkit.Eventually(t, 10*time.Second, "both replicas running", func() bool { return allRunning(fleet) })
	step(t, clk, 2)
	testkit.Eventually(t, 10*time.Second, "a first run", func() bool { return len(j.all()) == 1 })
	settle(t, clk, 2, job, fleet...)
	ctx := testkit.Context(t)
	if err := fleet[0].s.Pause(ctx, job, true, testPause); err != nil {
		t.Fatal(err)
	}
	var ticks []time.Time
	for i := range 4 {
		ticks = append(ticks, step(t, clk, 2))
		testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d paused ticks recorded", i+1), func() bool {
			es := skipEntries(t, fleet[1].s, job, scheduler.OutcomePaused)
			return len(es) == 1 && countOf(es[0]) == int64(i+1)
		})
		settle(t, clk, 2, job, fleet...)
	}
	if err := fleet[1].s.Pause(ctx, job, false, resumeArg); err != nil {
		t.Fatal(err)
	}
	step(t, clk, 2)
	testkit.Eventually(t, 10*time.Second, "a run after the resume", func() bool { return len(j.all()) == 2 })
	stopAll(t, fleet...)

	runs, err := fleet[0].s.History(ctx, job, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, fmt.Sprintf("%s %s..%s x%d", r.Outcome, fmtT(r.First), fmtT(r.Tick), countOf(r)))
	}
	if len(runs) != 3 || runs[0].Outcome != scheduler.OutcomeRan || runs[2].Outcome != scheduler.OutcomeRan {
		t.Fatalf("history: %v; want ran, paused (one entry), ran", got)
	}
	p := runs[1]
	if p.Outcome != scheduler.OutcomePaused || p.Count != 4 || !p.First.Equal(ticks[0]) || !p.Tick.Equal(ticks[3]) || p.Reason == "" {
		t.Errorf("paused entry: %s; want paused %s..%s x4, with a reason", got[1], fmtT(ticks[0]), fmtT(ticks[3]))
	}
}
