package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/scheduler"
)

// OverlapReplace: the tick that comes while a run of an earlier tick holds
// the job's lock ends that run, on whichever replica it runs: its ctx ends
// with cause ErrReplaced, naming the later tick; the run is recorded
// replaced (metrics, history), its tick done; the later tick runs once,
// as soon as the lock is free.
func TestOverlapReplace(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "replaced"
	j, clk := newJournal(), testclock.NewFake(fakeStart)
	causes := make(chan error, 10)
	// The first run hangs until its ctx ends; the others return at once.
	work := func(ctx context.Context) error {
		info, _ := jobs.InfoFrom(ctx)
		if !info.Tick.Equal(fakeStart.Add(time.Second)) {
			return nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}
	var fleet []*replica
	var meters []*meter
	for _, id := range []string{"r1", "r2", "r3"} {
		m := newMeter()
		r := newRedisReplica(t, srv, id, nil, m.option(), scheduler.WithClock(clk))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Overlap: scheduler.OverlapReplace, Run: j.fn(work)})
		r.start()
		fleet, meters = append(fleet, r), append(meters, m)
	}
	t1 := step(t, clk, 3)
	first := j.awaitStart(t, 10*time.Second)
	t2 := step(t, clk, 3)
	var cause error
	select {
	case cause = <-causes:
	case <-time.After(20 * time.Second):
		t.Fatalf("the run of tick %s was not ended after tick %s came", fmtT(t1), fmtT(t2))
	}
	if !errors.Is(cause, scheduler.ErrReplaced) || !strings.Contains(cause.Error(), rfc(t2)) {
		t.Errorf("cause of the replaced run's ctx = %v, want ErrReplaced naming tick %s", cause, fmtT(t2))
	}
	second := j.awaitStart(t, 10*time.Second)
	testkit.Eventually(t, 10*time.Second, "both runs finished and recorded", func() bool {
		return len(j.all()) >= 2 && runsOf(t, job, scheduler.OutcomeReplaced, meters...) == 1 && runsOf(t, job, scheduler.OutcomeRan, meters...) >= 1
	})
	hist, err := fleet[0].s.History(context.Background(), job, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	stopAll(t, fleet...)

	if !first.info.Tick.Equal(t1) || !second.info.Tick.Equal(t2) {
		t.Errorf("runs of ticks %s then %s; want %s, then %s, which replaced it", fmtT(first.info.Tick), fmtT(second.info.Tick), fmtT(t1), fmtT(t2))
	}
	byJob := j.byJob()
	checkOncePerTick(t, byJob, 0)
	checkNoOverlap(t, byJob[job])
	var replaced, ran int
	for _, h := range hist {
		switch {
		case h.Outcome == scheduler.OutcomeReplaced && h.Tick.Equal(t1):
			replaced++
			if !strings.Contains(h.Reason, rfc(t2)) {
				t.Errorf("history entry of the replaced run: reason %q, want one naming tick %s", h.Reason, fmtT(t2))
			}
		case h.Outcome == scheduler.OutcomeRan && h.Tick.Equal(t2):
			ran++
		}
	}
	if replaced != 1 || ran != 1 {
		t.Errorf("history: %d entries replaced for tick %s and %d ran for tick %s, want 1 and 1: %+v", replaced, fmtT(t1), ran, fmtT(t2), hist)
	}
}

// rfc is a tick as the scheduler's errors and reasons write it.
func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
