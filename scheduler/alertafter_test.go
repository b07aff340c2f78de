package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// Job.AlertAfter: a run still going after it is announced once, by the
// replica that runs it. These tests run on the real clock (the run's
// start is measured on it), with an alert_after of a second and runs that
// leave a loaded machine a second or more either way.

// longLog collects the announcements of runs going long
// (WithOnRunningLong) of every replica.
type longLog struct {
	mu   sync.Mutex
	runs []scheduler.Run
}

func (l *longLog) option() scheduler.Option {
	return scheduler.WithOnRunningLong(func(r scheduler.Run) {
		l.mu.Lock()
		l.runs = append(l.runs, r)
		l.mu.Unlock()
	})
}

func (l *longLog) all() []scheduler.Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]scheduler.Run(nil), l.runs...)
}

// viewOf returns the job's view on s.
func viewOf(t *testing.T, s *scheduler.Scheduler, job string) scheduler.JobView {
	t.Helper()
	for _, v := range s.Jobs(testkit.Context(t)) {
		if v.Job == job {
			return v
		}
	}
	t.Fatalf("no job %q", job)
	return scheduler.JobView{}
}

// The test, on two replicas on Redis: a run going past
// alert_after is announced once across the fleet (one WithOnRunningLong,
// on the replica that runs it, with a warning in its log), however long
// it goes on; while it does, both replicas' JobView say since when, and
// the runner's gauge lockcron.job.running says how long it has gone (the
// other's 0); when it ends, the gauge is 0 and the mark gone. The later
// runs, which end before alert_after, announce nothing.
func TestAlertAfterAnnouncedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job, alertAfter = "slow", time.Second
	j, release := newJournal(), make(chan struct{})
	var first atomic.Bool
	work := func(ctx context.Context) error {
		if first.CompareAndSwap(false, true) {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}
	var long longLog
	logs := map[string]*syncBuffer{"r1": {}, "r2": {}}
	var fleet []*replica
	var meters []*meter
	for _, id := range []string{"r1", "r2"} {
		m := newMeter()
		log := hclog.New(&hclog.LoggerOptions{Output: logs[id], Level: hclog.Warn})
		r := newRedisReplica(t, srv, id, nil, m.option(), long.option(), scheduler.WithLogger(log))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 2s", AlertAfter: alertAfter, Run: j.fn(work)})
		fleet, meters = append(fleet, r), append(meters, m)
	}
	for _, r := range fleet {
		r.start()
	}
	x := j.awaitStart(t, 10*time.Second) // the run that goes long
	runner, runnerMeter := memberOf(t, fleet, meters, x.info.Replica)
	other, otherMeter := othersOf(fleet, meters, runner)

	testkit.Eventually(t, 10*time.Second, "the run announced", func() bool { return len(long.all()) > 0 })
	got := long.all()[0]
	if got.Job != job || !got.Tick.Equal(x.info.Tick) || got.Replica != runner.id || got.Outcome != scheduler.OutcomeRunningLong ||
		got.Duration < alertAfter || got.Attempt != 1 || got.Token != x.info.Token || !got.End.IsZero() {
		t.Errorf("announced %+v; want job %s, tick %s, replica %s, running_long, attempt 1, token %d, at least %v, no end",
			got, job, fmtT(x.info.Tick), runner.id, x.info.Token, alertAfter)
	}
	line := logs[runner.id].String()
	for _, want := range []string{"[WARN]  scheduler: run going past its alert_after:", "job=" + job, "alert_after=1s", "running=", "replica=" + runner.id} {
		if !strings.Contains(line, want) {
			t.Errorf("runner's log %q: no %q", line, want)
		}
	}
	if s := logs[other[0].id].String(); strings.Contains(s, "alert_after") {
		t.Errorf("the other replica's log speaks of it: %q", s)
	}
	if v, ok := runnerMeter.gaugeValue(t, "lockcron.job.running", job); !ok || v < alertAfter.Seconds() {
		t.Errorf("runner's lockcron.job.running = %v (%v), want at least %v", v, ok, alertAfter.Seconds())
	}
	if v, ok := otherMeter[0].gaugeValue(t, "lockcron.job.running", job); !ok || v != 0 {
		t.Errorf("other replica's lockcron.job.running = %v (%v), want 0: nothing runs there", v, ok)
	}
	want := x.start.Add(alertAfter)
	if v := viewOf(t, runner.s, job).RunningLong; v.Before(want.Add(-time.Second)) || v.After(want.Add(time.Second)) {
		t.Errorf("runner's JobView.RunningLong = %v, want about %v", v, want)
	}
	testkit.Eventually(t, 10*time.Second, "the other replica's view marks it (from the ledger)", func() bool {
		return !viewOf(t, other[0].s, job).RunningLong.IsZero()
	})

	// However long it goes on, once.
	twice := x.start.Add(2*alertAfter + 500*time.Millisecond)
	testkit.Eventually(t, 10*time.Second, "the run past twice its alert_after", func() bool { return time.Now().After(twice) })
	if n := len(long.all()); n != 1 {
		t.Errorf("%d announcements, want 1 per run: %+v", n, long.all())
	}

	close(release)
	testkit.Eventually(t, 10*time.Second, "the run recorded", func() bool {
		return len(historyOf(t, runner.s, job, x.info.Tick)) > 0
	})
	testkit.Eventually(t, 10*time.Second, "the gauge back to 0", func() bool {
		v, ok := runnerMeter.gaugeValue(t, "lockcron.job.running", job)
		return ok && v == 0
	})
	for _, r := range fleet {
		if v := viewOf(t, r.s, job); !v.RunningLong.IsZero() {
			t.Errorf("replica %s: JobView.RunningLong = %v after the run, want zero", r.id, v.RunningLong)
		}
	}

	// The next two runs end at once: nothing announced.
	var later time.Time
	testkit.Eventually(t, 15*time.Second, "two more runs", func() bool {
		var n int
		for _, y := range j.all() {
			if y.info.Tick.After(x.info.Tick) {
				n++
				later = y.info.Tick
			}
		}
		return n >= 2
	})
	quiet := later.Add(2 * alertAfter)
	testkit.Eventually(t, 10*time.Second, "the later runs past their alert_after", func() bool { return time.Now().After(quiet) })
	stopAll(t, fleet...)
	if n := len(long.all()); n != 1 {
		t.Errorf("%d announcements, want 1: runs that end before alert_after announce nothing: %+v", n, long.all())
	}
}

// A negative AlertAfter is refused, naming the job and the field.
func TestAlertAfterValidate(t *testing.T) {
	err := (&scheduler.Job{Name: "x", Schedule: "@every 1m", AlertAfter: -time.Second, Run: newJournal().fn(nil)}).Validate()
	var fe *scheduler.FieldError
	if !errors.As(err, &fe) || fe.Job != "x" || fe.Field != "alert_after" || !errors.Is(err, scheduler.ErrInvalid) {
		t.Fatalf("Validate = %v; want a FieldError of x's alert_after, ErrInvalid", err)
	}
}

// A manual run (Trigger) has alert_after too: it holds the job's lock as a
// scheduled run does. Its announcement carries its number; on the
// in-memory backend as on Redis.
func TestAlertAfterManualRun(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	const job = "rebuild"
	j, release := newJournal(), make(chan struct{})
	var long longLog
	r := newReplica(t, c, "r1", long.option(), scheduler.WithClock(testclock.NewFake(fakeStart)))
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1h", AlertAfter: 500 * time.Millisecond, Run: j.fn(func(ctx context.Context) error {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	})})
	r.start()
	testkit.Eventually(t, 10*time.Second, "the replica runs", r.s.Running)
	n, err := r.s.Trigger(testkit.Context(t), job)
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the manual run announced", func() bool { return len(long.all()) > 0 })
	if got := long.all()[0]; got.Trigger != n || got.Job != job || got.Outcome != scheduler.OutcomeRunningLong {
		t.Errorf("announced %+v; want manual run #%d of %s, running_long", got, n, job)
	}
	if v := viewOf(t, r.s, job); v.RunningLong.IsZero() {
		t.Errorf("JobView.RunningLong zero while the manual run is past alert_after")
	}
	close(release)
	testkit.Eventually(t, 10*time.Second, "the mark gone", func() bool { return viewOf(t, r.s, job).RunningLong.IsZero() })
}
