package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/scheduler"
)

// testPause is the pause the tests set: a note, no end.
var testPause = fleet.PauseInfo{By: "test", Note: "test"}

// resumeArg is the PauseInfo of a resume: not used.
var resumeArg fleet.PauseInfo

// onRunLog keeps the runs WithOnRun hears, from every replica.
type onRunLog struct {
	mu   sync.Mutex
	runs []scheduler.Run
}

func (l *onRunLog) option() scheduler.Option {
	return scheduler.WithOnRun(func(r scheduler.Run) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.runs = append(l.runs, r)
	})
}

func (l *onRunLog) of(o scheduler.Outcome) []scheduler.Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []scheduler.Run
	for _, r := range l.runs {
		if r.Outcome == o {
			out = append(out, r)
		}
	}
	return out
}

// A job with PauseAfterFailures 3 pauses itself fleet-wide after its third
// failed run in a row, whichever replicas ran them: one auto_paused event
// with the note, the ledger paused with the note and the replica as its
// author, and no run after it until a resume, which starts the count anew.
func TestPauseAfterFailuresFleetWide(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "flaky"
	j, clk, rl := newJournal(), testclock.NewFake(fakeStart), &onRunLog{}
	fleet, _ := fleetWith(t, srv, 2, nil, []scheduler.Option{scheduler.WithClock(clk), rl.option()},
		scheduler.Job{Name: job, Schedule: "@every 1s", PauseAfterFailures: 3, Run: j.fn(func(context.Context) error { return errors.New("boom") })})
	stepUntil(t, clk, 2, job, fleet, "an auto_paused event", func() bool { return len(rl.of(scheduler.OutcomeAutoPaused)) > 0 })
	if n := len(rl.of(scheduler.OutcomeFailed)); n != 3 {
		t.Errorf("%d failed runs before the pause, want 3", n)
	}
	ap := rl.of(scheduler.OutcomeAutoPaused)
	if len(ap) != 1 || ap[0].Job != job || ap[0].Error != "paused after 3 failed runs in a row" {
		t.Fatalf("auto_paused events: %+v, want one with the note", ap)
	}
	ctx := testkit.Context(t)
	v := fleet[0].s.Jobs(ctx)[0]
	if !v.Ledger.Paused || v.Ledger.Pause.Note != "paused after 3 failed runs in a row" || v.Ledger.Pause.By != "replica:"+ap[0].Replica ||
		v.Ledger.Failures != 3 {
		t.Fatalf("ledger after the auto-pause: %+v", v.Ledger)
	}
	runs := len(j.all())
	for range 3 {
		settle(t, clk, 2, job, fleet...)
		step(t, clk, 2)
	}
	settle(t, clk, 2, job, fleet...)
	if n := len(j.all()) - runs; n != 0 {
		t.Errorf("%d runs after the auto-pause", n)
	}
	if n := len(rl.of(scheduler.OutcomeAutoPaused)); n != 1 {
		t.Errorf("%d auto_paused events, want 1", n)
	}
	if err := fleet[1].s.Pause(ctx, job, false, resumeArg); err != nil {
		t.Fatal(err)
	}
	if v := fleet[0].s.Jobs(ctx)[0]; v.Ledger.Paused || v.Ledger.Failures != 0 {
		t.Fatalf("ledger after the resume: %+v, want not paused, 0 failures", v.Ledger)
	}
	stepUntil(t, clk, 2, job, fleet, "a run after the resume", func() bool { return len(j.all()) > runs })
}
