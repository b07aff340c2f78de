package scheduler_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
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

// A try that fails and whose retry the start deadline cuts off ends the
// tick deadline_missed with the try's error: a failed run all the same,
// counted toward PauseAfterFailures (two of them pause the job).
func TestPauseAfterFailuresDeadlineCutRetry(t *testing.T) {
	t.Parallel()
	c, err := lock.New(redistest.Start(t).Client())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	rl := &onRunLog{}
	r := newReplica(t, c, "r1", rl.option())
	r.add(t, scheduler.Job{
		Name: "flaky", Schedule: "@every 1s", StartDeadline: 500 * time.Millisecond, Retries: 3, Backoff: 2 * time.Second,
		PauseAfterFailures: 2, Run: jobs.Func(func(context.Context) error { return errFlaky }),
	})
	r.start()
	testkit.Eventually(t, 20*time.Second, "an auto_paused event", func() bool { return len(rl.of(scheduler.OutcomeAutoPaused)) > 0 })
	r.stop(t)
	if n := len(rl.of(scheduler.OutcomeFailed)); n != 0 {
		t.Errorf("%d failed runs, want none: each try's retry was cut off", n)
	}
	if dm := rl.of(scheduler.OutcomeDeadlineMissed); len(dm) != 2 {
		t.Errorf("%d deadline_missed runs before the pause, want 2: %+v", len(dm), dm)
	}
	if ap := rl.of(scheduler.OutcomeAutoPaused); len(ap) != 1 || ap[0].Error != "paused after 2 failed runs in a row" {
		t.Errorf("auto_paused events: %+v, want one with the note", ap)
	}
}

// The finish that pauses the job is announced even when the job's history
// key holds another type (the finish returns an error about it): one
// auto_paused event.
func TestAutoPauseHistoryBadKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "flaky"
	lc, err := lock.New(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lc.Close() })
	g, err := fleet.New(lc).Ledger(job, job)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Client().Set(testkit.Context(t), g.HistoryKey(), "x", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	rl := &onRunLog{}
	r := newRedisReplica(t, srv, "r1", nil, rl.option())
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", PauseAfterFailures: 1, Run: jobs.Func(func(context.Context) error { return errFlaky })})
	r.start()
	testkit.Eventually(t, 20*time.Second, "an auto_paused event", func() bool { return len(rl.of(scheduler.OutcomeAutoPaused)) > 0 })
	if st := ledgerState(t, srv, job, job); !st.Paused || st.Pause.By != "replica:r1" {
		t.Fatalf("ledger %+v, want paused by replica:r1", st)
	}
}

// The finish that pauses the job has its replies lost until it gives up
// (the script runs on the server; the client sees its connection fail):
// the replica reads the ledger, finds the pause set by its own claim, and
// announces it all the same.
func TestAutoPauseFinishReplyLost(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	const note = "paused after 1 failed runs in a row"
	lose := &hookReplyLoser{match: note}
	rdb.AddHook(lose)
	c, err := lock.New(rdb, lock.WithClientID("r1"))
	if err != nil {
		t.Fatal(err)
	}
	rl := &onRunLog{}
	r := newReplica(t, c, "r1", rl.option())
	const job = "flaky"
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", PauseAfterFailures: 1, Run: jobs.Func(func(context.Context) error { return errFlaky })})
	r.start()
	testkit.Eventually(t, 30*time.Second, "an auto_paused event", func() bool { return len(rl.of(scheduler.OutcomeAutoPaused)) > 0 })
	if n := lose.lost.Load(); n == 0 {
		t.Fatal("no finish reply lost")
	}
	if ap := rl.of(scheduler.OutcomeAutoPaused); len(ap) != 1 || ap[0].Error != note {
		t.Errorf("auto_paused events: %+v, want one with the note", ap)
	}
	if st := ledgerState(t, srv, job, job); !st.Paused || st.Pause.By != "replica:r1" {
		t.Fatalf("ledger %+v, want paused by replica:r1", st)
	}
}

// hookReplyLoser is a go-redis hook that runs each command holding an
// argument equal to match (alone or in a pipeline) on the server and, if
// it ran there, answers it with io.ErrUnexpectedEOF, as a connection that
// died before the reply came back would: a lost reply.
type hookReplyLoser struct {
	match string
	lost  atomic.Int64
}

func (h *hookReplyLoser) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *hookReplyLoser) hit(cmd redis.Cmder, err error) bool {
	if err != nil {
		return false // not run (NOSCRIPT: go-redis sends EVAL next)
	}
	for _, a := range cmd.Args() {
		if s, ok := a.(string); ok && s == h.match {
			cmd.SetErr(io.ErrUnexpectedEOF)
			h.lost.Add(1)
			return true
		}
	}
	return false
}

func (h *hookReplyLoser) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if h.hit(cmd, err) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

func (h *hookReplyLoser) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if h.hit(cmd, cmd.Err()) {
				err = io.ErrUnexpectedEOF
			}
		}
		return err
	}
}
