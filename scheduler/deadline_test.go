package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// Job.StartDeadline: a tick whose run cannot start within it is not run,
// and is recorded deadline_missed once across the fleet. The deadline is
// measured on the store's clock (Redis TIME), so these tests run on the
// real clock, with periods and deadlines of seconds that leave a loaded
// machine a second or more either way.

// runLog collects the runs that replicas record (WithOnRun).
type runLog struct {
	mu   sync.Mutex
	runs []scheduler.Run
}

func (l *runLog) option() scheduler.Option {
	return scheduler.WithOnRun(func(r scheduler.Run) {
		l.mu.Lock()
		l.runs = append(l.runs, r)
		l.mu.Unlock()
	})
}

// of returns the runs recorded for tick.
func (l *runLog) of(tick time.Time) []scheduler.Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []scheduler.Run
	for _, r := range l.runs {
		// An entry of consecutive skips covers First to Tick.
		in := r.Tick.Equal(tick) || !r.First.IsZero() && !tick.Before(r.First) && !tick.After(r.Tick)
		if in && r.Trigger == 0 {
			out = append(out, r)
		}
	}
	return out
}

// historyOf returns the job's history entries of tick (scheduled runs), read
// through s.
func historyOf(t *testing.T, s *scheduler.Scheduler, job string, tick time.Time) []scheduler.Run {
	t.Helper()
	runs, err := s.History(testkit.Context(t), job, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []scheduler.Run
	for _, r := range runs {
		// An entry of consecutive skips covers First to Tick.
		in := r.Tick.Equal(tick) || !r.First.IsZero() && !tick.Before(r.First) && !tick.After(r.Tick)
		if in && r.Trigger == 0 {
			out = append(out, r)
		}
	}
	return out
}

// ranTick reports whether the job func ran for tick.
func ranTick(j *journal, tick time.Time) bool {
	for _, x := range j.all() {
		if x.info.Trigger == 0 && x.info.Tick.Equal(tick) {
			return true
		}
	}
	return false
}

// pastDeadline waits until the deadline of tick has passed, by the real
// clock, with a margin, and job's ledger has seen a claim of tick (each
// replica that fired it is waiting for the lock).
func pastDeadline(t *testing.T, srv *redistest.Server, job string, tick time.Time, deadline time.Duration) {
	t.Helper()
	at := tick.Add(deadline + 250*time.Millisecond)
	testkit.Eventually(t, time.Until(at)+10*time.Second, "the tick claimed and its start deadline passed", func() bool {
		return time.Now().After(at) && ledgerState(t, srv, job, job).Seen >= tick.UnixMilli()
	})
}

// checkCountedOnce checks that the fleet counted deadline_missed (the
// lockcron.job.runs metric) once per such tick in the job's history.
func checkCountedOnce(t *testing.T, s *scheduler.Scheduler, job string, meters ...*meter) {
	t.Helper()
	runs, err := s.History(testkit.Context(t), job, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var entries int64
	for _, r := range runs {
		if r.Outcome == scheduler.OutcomeDeadlineMissed {
			entries += countOf(r) // consecutive ones are one entry
		}
	}
	if got := runsOf(t, job, scheduler.OutcomeDeadlineMissed, meters...); got != entries {
		t.Errorf("runs{outcome=deadline_missed} = %d over the fleet, want %d: one per history entry", got, entries)
	}
}

// The test: another replica's run holds the job's lock (a manual
// run, which takes the same lock) from before a tick until after its start
// deadline. Both replicas fire the tick and wait for the lock (overlap
// queue); when it is released, the tick is not run, and it is recorded
// deadline_missed once across the fleet: one history entry, one
// notification (WithOnRun), counted once; the other replica skips it as
// done.
func TestStartDeadlineMissedWhileLockHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job, deadline = "report", time.Second
	j, release, held := newJournal(), make(chan struct{}), make(chan time.Time, 1)
	work := func(ctx context.Context) error {
		if info, _ := jobs.InfoFrom(ctx); info.Trigger != 0 {
			held <- time.Now()
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}
	var log runLog
	fleet, meters := fleetWith(t, srv, 2, nil, []scheduler.Option{log.option()}, scheduler.Job{
		Name: job, Schedule: "@every 2s", Overlap: scheduler.OverlapQueue, StartDeadline: deadline, Run: j.fn(work),
	})
	// A trigger published before the replicas subscribe reaches none.
	testkit.Eventually(t, 10*time.Second, "both replicas running", func() bool { return allRunning(fleet) })
	if _, err := fleet[0].s.Trigger(testkit.Context(t), job); err != nil {
		t.Fatal(err)
	}
	heldAt := receive(t, held, 10*time.Second, "the manual run started")
	tick := heldAt.Truncate(2 * time.Second).Add(2 * time.Second) // the first tick after the lock was taken
	pastDeadline(t, srv, job, tick, deadline)
	close(release)

	testkit.Eventually(t, 10*time.Second, "the tick recorded in the history", func() bool {
		return len(historyOf(t, fleet[1].s, job, tick)) > 0
	})
	testkit.Eventually(t, 10*time.Second, "every replica decided on the tick", func() bool {
		for _, r := range fleet {
			if st := statusOf(t, r.s, job); st.LastTick.Before(tick) || st.Running && st.LastTick.Equal(tick) {
				return false
			}
		}
		return true
	})
	stopAll(t, fleet...)

	if ranTick(j, tick) {
		t.Errorf("tick %s ran after its start deadline", fmtT(tick))
	}
	h := historyOf(t, fleet[0].s, job, tick)
	if len(h) != 1 || h[0].Outcome != scheduler.OutcomeDeadlineMissed {
		t.Fatalf("history of tick %s: %+v; want one entry, deadline_missed", fmtT(tick), h)
	}
	if !strings.Contains(h[0].Reason, "start_deadline of 1s") {
		t.Errorf("deadline_missed entry's reason %q, want it to name the start_deadline", h[0].Reason)
	}
	if got := log.of(tick); len(got) != 1 || got[0].Outcome != scheduler.OutcomeDeadlineMissed || got[0].Replica != h[0].Replica {
		t.Errorf("runs recorded for tick %s (WithOnRun, both replicas): %+v; want one, deadline_missed, by %s", fmtT(tick), got, h[0].Replica)
	}
	checkCountedOnce(t, fleet[0].s, job, meters...)
	if st := ledgerState(t, srv, job, job); st.Done < tick.UnixMilli() {
		t.Errorf("ledger done %d, want the tick %d done: no replica runs it later", st.Done, tick.UnixMilli())
	}
	t.Logf("outcomes: r1 %v, r2 %v", meters[0].outcomes(t, job), meters[1].outcomes(t, job))
}

// Overlap queue: a tick queued behind a run of the job's earlier tick that
// lasts past the queued tick's start deadline is not run when the lock
// comes free, and is recorded deadline_missed.
func TestStartDeadlineQueuedOverlap(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job, deadline = "queued-late", time.Second
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
	fleet, meters := fleetOf(t, srv, 1, nil, scheduler.Job{
		Name: job, Schedule: "@every 2s", Overlap: scheduler.OverlapQueue, StartDeadline: deadline, Run: j.fn(work),
	})
	x := j.awaitStart(t, 10*time.Second) // the run that holds the lock
	queued := x.info.Tick.Add(2 * time.Second)
	pastDeadline(t, srv, job, queued, deadline)
	close(release)

	testkit.Eventually(t, 10*time.Second, "the queued tick recorded in the history", func() bool {
		return len(historyOf(t, fleet[0].s, job, queued)) > 0
	})
	r := fleet[0]
	r.stop(t)
	if h := historyOf(t, r.s, job, queued); len(h) != 1 || h[0].Outcome != scheduler.OutcomeDeadlineMissed {
		t.Fatalf("history of the queued tick %s: %+v; want one entry, deadline_missed", fmtT(queued), h)
	}
	if h := historyOf(t, r.s, job, x.info.Tick); len(h) != 1 || h[0].Outcome != scheduler.OutcomeRan {
		t.Errorf("history of the first tick %s: %+v; want one entry, ran", fmtT(x.info.Tick), h)
	}
	if ranTick(j, queued) {
		t.Errorf("the queued tick %s ran after its start deadline", fmtT(queued))
	}
	checkCountedOnce(t, r.s, job, meters...)
}

// Misfire run_once: the latest missed tick, older than the start deadline
// when the replica comes up, is not run; it is recorded deadline_missed,
// and the ticks before it missed, as without a deadline.
func TestStartDeadlineMisfireCatchUp(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job, every, deadline = "catch-up", 10 * time.Second, time.Second
	// Start at least 1.5s after a tick, so that the latest missed tick is
	// older than the deadline, and well before the next.
	testkit.Eventually(t, every+time.Second, "a start 1.5s to 7s after a tick", func() bool {
		since := time.Since(time.Now().Truncate(every))
		return since >= 1500*time.Millisecond && since <= 7*time.Second
	})
	latest := time.Now().Truncate(every)
	seedLedger(t, srv, job, job, latest.Add(-3*every))
	j := newJournal()
	fleet, meters := fleetOf(t, srv, 1, nil, scheduler.Job{
		Name: job, Schedule: "@every 10s", Misfire: scheduler.MisfireRunOnce, StartDeadline: deadline, Run: j.fn(nil),
	})
	r := fleet[0]
	testkit.Eventually(t, 10*time.Second, "the latest missed tick recorded", func() bool {
		return len(historyOf(t, r.s, job, latest)) > 0
	})
	r.stop(t)
	if ranTick(j, latest) {
		t.Errorf("the latest missed tick %s ran, %v after it; the start deadline is %v", fmtT(latest), time.Since(latest), deadline)
	}
	if h := historyOf(t, r.s, job, latest); len(h) != 1 || h[0].Outcome != scheduler.OutcomeDeadlineMissed {
		t.Fatalf("history of the latest missed tick %s: %+v; want one entry, deadline_missed", fmtT(latest), h)
	}
	if h := historyOf(t, r.s, job, latest.Add(-every)); len(h) != 1 || h[0].Outcome != scheduler.OutcomeMissed || h[0].Missed != 2 {
		t.Errorf("history of the tick before it: %+v; want one entry, missed, 2 ticks", h)
	}
	if got := meters[0].runs(t, job, scheduler.OutcomeDeadlineMissed); got != 1 {
		t.Errorf("runs{outcome=deadline_missed} = %d, want 1", got)
	}
}

// A try fails and its retry's backoff would end after the start deadline:
// the retry is not made, and the tick ends deadline_missed with the try's
// error.
func TestStartDeadlineRetryBackoff(t *testing.T) {
	t.Parallel()
	c, err := lock.New(redistest.Start(t).Client())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	j, m := newJournal(), newMeter()
	var log runLog
	r := newReplica(t, c, "r1", m.option(), log.option())
	r.add(t, scheduler.Job{
		Name: "flaky", Schedule: "@every 1s", StartDeadline: 500 * time.Millisecond, Retries: 3, Backoff: 2 * time.Second,
		Run: j.fn(func(context.Context) error { return errFlaky }),
	})
	r.start()
	x := j.awaitStart(t, 10*time.Second)
	var got []scheduler.Run
	testkit.Eventually(t, 10*time.Second, "the tick's run recorded", func() bool {
		got = log.of(x.info.Tick)
		return len(got) > 0
	})
	r.stop(t)
	if len(got) != 1 || got[0].Outcome != scheduler.OutcomeDeadlineMissed || got[0].Attempt != 1 || !strings.Contains(got[0].Error, errFlaky.Error()) {
		t.Fatalf("runs of tick %s: %+v; want one, deadline_missed, attempt 1, with the try's error", fmtT(x.info.Tick), got)
	}
	var tries int
	for _, y := range j.all() {
		if y.info.Tick.Equal(x.info.Tick) {
			tries++
		}
	}
	if tries != 1 {
		t.Errorf("%d tries of tick %s, want 1: the retry would start after the deadline", tries, fmtT(x.info.Tick))
	}
}

// A concurrency group that stays full until the start deadline: the tick
// is not run, and is recorded deadline_missed.
func TestStartDeadlineConcurrencyPermit(t *testing.T) {
	t.Parallel()
	c, err := lock.New(redistest.Start(t).Client())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// The group's one permit, taken by someone else for the whole test.
	permit, err := c.Semaphore("batch", 1).Lock(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = permit.Unlock(context.Background()) }()
	j, m := newJournal(), newMeter()
	var log runLog
	r := newReplica(t, c, "r1", m.option(), log.option())
	r.add(t, scheduler.Job{
		Name: "grouped", Schedule: "@every 2s", StartDeadline: 500 * time.Millisecond,
		MaxConcurrency: 1, ConcurrencyGroup: "batch", Run: j.fn(nil),
	})
	r.start()
	var got []scheduler.Run
	testkit.Eventually(t, 10*time.Second, "a tick recorded", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		got = append(got[:0], log.runs...)
		return len(got) > 0
	})
	r.stop(t)
	if got[0].Outcome != scheduler.OutcomeDeadlineMissed {
		t.Errorf("run %+v; want deadline_missed: the group was full past the deadline", got[0])
	}
	if len(j.all()) != 0 {
		t.Errorf("the job ran %d times without a permit", len(j.all()))
	}
}

// StartDeadline must not be negative; zero is none.
func TestStartDeadlineValidate(t *testing.T) {
	j := scheduler.Job{Name: "j", Schedule: "@every 1m", StartDeadline: -time.Second, Run: jobs.Func(func(context.Context) error { return nil })}
	err := j.Validate()
	var fe *scheduler.FieldError
	if !errors.As(err, &fe) || fe.Field != "start_deadline" || fe.Job != "j" || !errors.Is(err, scheduler.ErrInvalid) {
		t.Fatalf("Validate = %v; want a FieldError of job j, start_deadline, wrapping ErrInvalid", err)
	}
	j.StartDeadline = 0
	if err := j.Validate(); err != nil {
		t.Errorf("Validate with no deadline = %v", err)
	}
}

// A run that started in time, handed off by its replica's stop after the
// deadline: the replica that takes the tick over does not start it again;
// it records it deadline_missed, and the job ran once (attempt 1).
func TestStartDeadlineHandoffAfterDeadline(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job, deadline = "handed", time.Second
	j := newJournal()
	fleet, _ := fleetOf(t, srv, 2, nil, scheduler.Job{
		Name: job, Schedule: "@every 3s", StartDeadline: deadline, Run: j.fn(heldUntil(nil)), // runs until stopped
	})
	x := j.awaitStart(t, 10*time.Second)
	tick := x.info.Tick
	var holder, other *replica
	for _, r := range fleet {
		if r.id == x.info.Replica {
			holder = r
		} else {
			other = r
		}
	}
	testkit.Eventually(t, 10*time.Second, "the start deadline passed", func() bool {
		return time.Now().After(tick.Add(deadline + 250*time.Millisecond))
	})
	holder.stop(t) // the run is handed off
	testkit.Eventually(t, 10*time.Second, "the tick taken over and recorded", func() bool {
		for _, r := range historyOf(t, other.s, job, tick) {
			if r.Outcome == scheduler.OutcomeDeadlineMissed {
				return true
			}
		}
		return false
	})
	other.stop(t)
	h := historyOf(t, other.s, job, tick)
	outcomes := map[scheduler.Outcome]string{}
	for _, r := range h {
		outcomes[r.Outcome] = r.Replica
	}
	if len(h) != 2 || outcomes[scheduler.OutcomeHandedOff] != holder.id || outcomes[scheduler.OutcomeDeadlineMissed] != other.id {
		t.Errorf("history of tick %s: %+v; want handed_off by %s, then deadline_missed by %s", fmtT(tick), h, holder.id, other.id)
	}
	var tries []int
	for _, y := range j.all() {
		if y.info.Tick.Equal(tick) {
			tries = append(tries, y.info.Attempt)
		}
	}
	if len(tries) != 1 || tries[0] != 1 {
		t.Errorf("tries of tick %s: attempts %v; want one, attempt 1: the takeover came after the deadline", fmtT(tick), tries)
	}
}
