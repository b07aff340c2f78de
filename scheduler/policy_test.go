package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.uber.org/goleak"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/oteltest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// The policies of a Job (overlap, misfire, retries, timeout, shutdown) and
// what a run goes through (panic, lock loss), against real redis-server.

// --- helpers ---------------------------------------------------------------

// fleetOf starts n replicas on srv, each with its own lock.Client (lopts),
// its own meter and the same jobs, and returns them with their meters.
func fleetOf(t *testing.T, srv *redistest.Server, n int, lopts []lock.Option, js ...scheduler.Job) ([]*replica, []*meter) {
	t.Helper()
	return fleetWith(t, srv, n, lopts, nil, js...)
}

// fleetOn is fleetOf with every replica on the fake clock clk.
func fleetOn(t *testing.T, srv *redistest.Server, n int, clk *testclock.Fake, js ...scheduler.Job) ([]*replica, []*meter) {
	t.Helper()
	return fleetWith(t, srv, n, nil, []scheduler.Option{scheduler.WithClock(clk)}, js...)
}

func fleetWith(t *testing.T, srv *redistest.Server, n int, lopts []lock.Option, opts []scheduler.Option, js ...scheduler.Job) ([]*replica, []*meter) {
	t.Helper()
	var fleet []*replica
	var meters []*meter
	for i := range n {
		m := newMeter()
		r := newRedisReplica(t, srv, "r"+strconv.Itoa(i+1), lopts, append([]scheduler.Option{m.option()}, opts...)...)
		r.add(t, js...)
		fleet = append(fleet, r)
		meters = append(meters, m)
	}
	for _, r := range fleet {
		r.start()
	}
	return fleet, meters
}

// stopAll stops replicas at the same time, so that none takes over a tick
// another one gives back while stopping.
func stopAll(t *testing.T, fleet ...*replica) {
	t.Helper()
	var wg sync.WaitGroup
	for _, r := range fleet {
		wg.Go(func() { r.stop(t) })
	}
	wg.Wait()
}

// memberOf returns the replica of fleet named id, and its meter.
func memberOf(t *testing.T, fleet []*replica, meters []*meter, id string) (*replica, *meter) {
	t.Helper()
	for i, r := range fleet {
		if r.id == id {
			return r, meters[i]
		}
	}
	t.Fatalf("no replica %q", id)
	return nil, nil
}

// othersOf returns the replicas of fleet other than r, and their meters.
func othersOf(fleet []*replica, meters []*meter, r *replica) ([]*replica, []*meter) {
	var rs []*replica
	var ms []*meter
	for i, x := range fleet {
		if x != r {
			rs, ms = append(rs, x), append(ms, meters[i])
		}
	}
	return rs, ms
}

// seedLedger records in job's ledger that the fleet claimed and ran tick,
// as a fleet that then went down would have left it.
func seedLedger(t *testing.T, srv *redistest.Server, lockName, job string, tick time.Time) {
	t.Helper()
	c, err := lock.New(srv.Client(), lock.WithClientID("seed"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := fleet.New(c).Ledger(lockName, job)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Context(t)
	cl, err := g.Claim(ctx, tick.UnixMilli(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
		t.Fatal(err)
	}
}

// ledgerState reads job's ledger with a lock.Client of its own.
func ledgerState(t *testing.T, srv *redistest.Server, lockName, job string) fleet.LedgerState {
	t.Helper()
	c, err := lock.New(srv.Client(), lock.WithClientID("reader"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := fleet.New(c).Ledger(lockName, job)
	if err != nil {
		t.Fatal(err)
	}
	st, err := g.State(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// lockFree checks that nobody holds lockName: another lock.Client takes it
// with TryLock, and lets it go.
func lockFree(t *testing.T, srv *redistest.Server, lockName string) {
	t.Helper()
	c, err := lock.New(srv.Client(), lock.WithClientID("checker"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testkit.Context(t)
	l, err := c.Mutex(lockName).TryLock(ctx)
	if err != nil {
		t.Fatalf("lock %q is not free: TryLock: %v", lockName, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// checkNoOverlap checks that each run started after the one before it
// (runs in tick order) had returned.
func checkNoOverlap(t *testing.T, runs []execution) {
	t.Helper()
	for i := 1; i < len(runs); i++ {
		prev, cur := runs[i-1], runs[i]
		if cur.start.Before(prev.end) {
			t.Errorf("tick %s (on %s) started %v before tick %s (on %s) returned",
				fmtT(cur.info.Tick), cur.info.Replica, prev.end.Sub(cur.start), fmtT(prev.info.Tick), prev.info.Replica)
		}
	}
}

// receive waits for a value from ch.
func receive[T any](t *testing.T, ch <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(within):
		t.Fatalf("%s: not within %v", what, within)
		var zero T
		return zero
	}
}

// noStart checks that no run has started since the last one taken from j.
func noStart(t *testing.T, j *journal) {
	t.Helper()
	select {
	case x := <-j.ch:
		t.Errorf("unexpected run: %+v", x.info)
	default:
	}
}

func fmtT(tk time.Time) string { return tk.UTC().Format("15:04:05.000") }

// sleepWork is a job's work that takes d and ignores its ctx.
func sleepWork(d time.Duration) func(context.Context) error {
	return func(context.Context) error {
		time.Sleep(d) // the job's work
		return nil
	}
}

// --- overlap ---------------------------------------------------------------

// fakeStart is the time a test's fake clock starts at.
var fakeStart = time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC)

// heldUntil is a job's work that lasts until the test sends on end (one
// run) or closes it (every run), or its ctx ends.
func heldUntil(end <-chan struct{}) func(context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-end:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// A run longer than the period: the ticks that come while it holds the lock
// are skipped (skipped_busy), on the replica that runs it and on the
// others; runs never overlap. The second replica starts while the first
// run is under way, so that its tick finds the lock held by an earlier
// tick's run in Redis, not only here. On a fake clock, the run lasts
// until the test ends it.
func TestOverlapSkip(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "slow"
	j, clk, end := newJournal(), testclock.NewFake(fakeStart), make(chan struct{})
	var fleet []*replica
	var meters []*meter
	for _, id := range []string{"r1", "r2"} {
		m := newMeter()
		r := newRedisReplica(t, srv, id, nil, m.option(), scheduler.WithClock(clk))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Overlap: scheduler.OverlapSkip, Run: j.fn(heldUntil(end))})
		fleet, meters = append(fleet, r), append(meters, m)
	}
	fleet[0].start()
	t1 := step(t, clk, 1)
	if x := j.awaitStart(t, 10*time.Second); !x.info.Tick.Equal(t1) {
		t.Fatalf("first run: tick %s, want %s", fmtT(x.info.Tick), fmtT(t1))
	}
	fleet[1].start()
	// The next tick comes while r1's run of the first holds the lock: r1
	// skips it here, r2 finds the lock held in Redis.
	step(t, clk, 2)
	testkit.Eventually(t, 10*time.Second, "both replicas skip the second tick", func() bool {
		return meters[0].runs(t, job, scheduler.OutcomeSkippedBusy) > 0 && meters[1].runs(t, job, scheduler.OutcomeSkippedBusy) > 0
	})
	end <- struct{}{}
	settle(t, clk, 2, job, fleet[0]) // the first run finished
	t3 := step(t, clk, 2)
	if x := j.awaitStart(t, 10*time.Second); !x.info.Tick.Equal(t3) {
		t.Fatalf("second run: tick %s, want %s, the first tick after the run", fmtT(x.info.Tick), fmtT(t3))
	}
	close(end)
	testkit.Eventually(t, 10*time.Second, "two runs finished", func() bool { return len(j.all()) == 2 })
	stopAll(t, fleet...)

	byJob := j.byJob()
	checkOncePerTick(t, byJob, 0)
	checkNoOverlap(t, byJob[job])
	t.Logf("outcomes: r1 %v, r2 %v", meters[0].outcomes(t, job), meters[1].outcomes(t, job))
	if ran := runsOf(t, job, scheduler.OutcomeRan, meters...); ran != 2 {
		t.Errorf("runs{outcome=ran} = %d, want 2 (the runs that returned nil)", ran)
	}
	if busy := runsOf(t, job, scheduler.OutcomeSkippedBusy, meters...); busy != 2 {
		t.Errorf("runs{outcome=skipped_busy} = %d, want 2: the second tick on each replica", busy)
	}
	// r2 joined while the fleet was up: the ticks skipped as busy before
	// it came were not missed.
	if missed := runsOf(t, job, scheduler.OutcomeMissed, meters...); missed != 0 {
		t.Errorf("runs{outcome=missed} = %d with a replica up all along, want 0", missed)
	}
}

// OverlapQueue: the tick that comes while a run holds the lock waits for
// it and runs as soon as it ends; a further tick is skipped_busy. On a
// fake clock, each run lasts until the test ends it.
func TestOverlapQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "queued"
	j, clk, end := newJournal(), testclock.NewFake(fakeStart), make(chan struct{})
	var fleet []*replica
	var meters []*meter
	for _, id := range []string{"r1", "r2"} {
		m := newMeter()
		r := newRedisReplica(t, srv, id, nil, m.option(), scheduler.WithClock(clk))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Overlap: scheduler.OverlapQueue, Run: j.fn(heldUntil(end))})
		r.start()
		fleet, meters = append(fleet, r), append(meters, m)
	}
	t1 := step(t, clk, 2)
	first := j.awaitStart(t, 10*time.Second)
	t2 := step(t, clk, 2) // queued behind the first run
	step(t, clk, 2)       // and this one skipped_busy, here or in Redis
	testkit.Eventually(t, 10*time.Second, "a tick skipped_busy", func() bool {
		return runsOf(t, job, scheduler.OutcomeSkippedBusy, meters...) > 0
	})
	end <- struct{}{}
	second := j.awaitStart(t, 10*time.Second)
	close(end)
	testkit.Eventually(t, 10*time.Second, "the queued run finished", func() bool { return len(j.all()) >= 2 })
	stopAll(t, fleet...)

	byJob := j.byJob()
	runs := byJob[job]
	checkOncePerTick(t, byJob, 0)
	checkNoOverlap(t, runs)
	t.Logf("outcomes: r1 %v, r2 %v", meters[0].outcomes(t, job), meters[1].outcomes(t, job))
	if !first.info.Tick.Equal(t1) || !second.info.Tick.Equal(t2) {
		t.Errorf("runs of ticks %s then %s; want %s, then %s, which fired while the first ran, queued",
			fmtT(first.info.Tick), fmtT(second.info.Tick), fmtT(t1), fmtT(t2))
	}
	// The queued run starts when the one before it ends, woken by its
	// unlock.
	if gap := runs[1].start.Sub(runs[0].end); gap > time.Second {
		t.Errorf("tick %s started %v after tick %s returned; want right after", fmtT(runs[1].info.Tick), gap, fmtT(runs[0].info.Tick))
	}
}

// --- misfire ---------------------------------------------------------------

// The fleet last claimed a tick 5s ago; a replica starts: under MisfireSkip
// the ticks since are counted missed and none of them runs.
func TestMisfireSkip(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "misfire-skip"
	seed, start := fakeStart, fakeStart.Add(5500*time.Millisecond)
	seedLedger(t, srv, job, job, seed)
	m, clk, j := newMeter(), testclock.NewFake(start), newJournal()
	r := newRedisReplica(t, srv, "r1", nil, m.option(), scheduler.WithClock(clk))
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Misfire: scheduler.MisfireSkip, Run: j.fn(nil)})
	r.start()
	next := step(t, clk, 1)
	x := j.awaitStart(t, 10*time.Second)
	if want := seed.Add(6 * time.Second); !next.Equal(want) || !x.info.Tick.Equal(want) {
		t.Fatalf("first run: tick %s (the loop waited for %s); want %s, the first after the start at %s", fmtT(x.info.Tick), fmtT(next), fmtT(want), fmtT(start))
	}
	if got := m.runs(t, job, scheduler.OutcomeMissed); got != 5 {
		t.Errorf("runs{outcome=missed} = %d, want 5: the ticks after %s up to %s", got, fmtT(seed), fmtT(start))
	}
}

// A replica whose clock runs ahead starts just before a tick: on its own
// clock the tick is due, and the ledger has no claim of it; but it is not
// due yet on the store's clock, where the fleet claims it. Its catch-up
// does not pass the tick over (make soak, seed 56: passed over, the
// fleet's claim was answered done and the tick did not run).
func TestCatchUpLeavesATickNotYetDue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "ahead"
	tick := time.Now().Truncate(time.Second).Add(3 * time.Second) // due in 2-3 s
	seedLedger(t, srv, job, job, tick.Add(-time.Second))
	clk := testclock.NewFake(tick.Add(300 * time.Millisecond)) // tick is due on its clock
	m := newMeter()
	r := newRedisReplica(t, srv, "r1", nil, m.option(), scheduler.WithClock(clk))
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Misfire: scheduler.MisfireSkip, Run: newJournal().fn(nil)})
	r.start()
	settle(t, clk, 1, job, r) // the catch-up is over: the loop waits for the next tick
	if st := ledgerState(t, srv, job, job); st.Seen != tick.Add(-time.Second).UnixMilli() {
		t.Fatalf("ledger seen %s after the catch-up; want %s, the tick before the one not yet due", fmtT(time.UnixMilli(st.Seen)), fmtT(tick.Add(-time.Second)))
	}
	r.stop(t)
}

// Under MisfireRunOnce the latest missed tick runs once at start, with its
// own tick in its jobs.Info; the ones before it are counted missed.
func TestMisfireRunOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "misfire-once"
	seed, start := fakeStart, fakeStart.Add(5500*time.Millisecond)
	seedLedger(t, srv, job, job, seed)
	m, clk, j := newMeter(), testclock.NewFake(start), newJournal()
	r := newRedisReplica(t, srv, "r1", nil, m.option(), scheduler.WithClock(clk))
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Misfire: scheduler.MisfireRunOnce, Run: j.fn(nil)})
	r.start()
	latest := seed.Add(5 * time.Second)
	x := j.awaitStart(t, 10*time.Second)
	if !x.info.Tick.Equal(latest) || x.info.Attempt != 1 {
		t.Fatalf("first run: tick %s attempt %d; want the latest missed tick %s (start at %s), attempt 1",
			fmtT(x.info.Tick), x.info.Attempt, fmtT(latest), fmtT(start))
	}
	testkit.Eventually(t, 10*time.Second, "the first run finished", func() bool {
		st := statusOf(t, r.s, job)
		return !st.Running && st.LastOutcome == scheduler.OutcomeRan
	})
	next := step(t, clk, 1)
	if y := j.awaitStart(t, 10*time.Second); !y.info.Tick.Equal(next) || !next.After(latest) {
		t.Errorf("second run: tick %s; want %s, the next after %s", fmtT(y.info.Tick), fmtT(next), fmtT(latest))
	}
	testkit.Eventually(t, 10*time.Second, "two runs finished", func() bool { return len(j.all()) == 2 })
	r.stop(t)
	if got := m.runs(t, job, scheduler.OutcomeMissed); got != 4 {
		t.Errorf("runs{outcome=missed} = %d, want 4: the ticks after %s before %s", got, fmtT(seed), fmtT(latest))
	}
	var past int
	for _, x := range j.all() {
		if !x.info.Tick.After(start) {
			past++
		}
	}
	if past != 1 {
		t.Errorf("%d runs of ticks due before the start, want 1", past)
	}
}

// MisfireGrace: the latest missed tick runs only if it is no older than
// the grace. An hourly schedule whose latest tick was 3s ago, and a ledger
// that last saw a claim 3 hours ago, on a fake clock that stands still.
func TestMisfireGrace(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	latest := fakeStart // hourly, at :00:00; the replica starts 3s later
	const spec = "CRON_TZ=UTC 0 0 * * * *"
	for _, tc := range []struct {
		name       string
		misfire    scheduler.Misfire
		grace      time.Duration
		seed       bool
		wantRun    bool
		wantMissed int64
	}{
		{name: "skip", misfire: scheduler.MisfireSkip, seed: true, wantMissed: 3},
		{name: "run_once", misfire: scheduler.MisfireRunOnce, seed: true, wantRun: true, wantMissed: 2},
		{name: "run_once_grace_shorter", misfire: scheduler.MisfireRunOnce, grace: time.Second, seed: true, wantMissed: 3},
		{name: "run_once_never_claimed", misfire: scheduler.MisfireRunOnce, seed: false, wantMissed: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := "grace-" + tc.name
			if tc.seed {
				seedLedger(t, srv, job, job, latest.Add(-3*time.Hour))
			}
			m, j := newMeter(), newJournal()
			r := newRedisReplica(t, srv, "r1", nil, m.option(), scheduler.WithClock(testclock.NewFake(latest.Add(3*time.Second))))
			r.add(t, scheduler.Job{Name: job, Schedule: spec, Misfire: tc.misfire, MisfireGrace: tc.grace, Run: j.fn(nil)})
			r.start()
			// The loop waits for the next tick once the misfire policy is
			// applied: a run it started is Running or has an outcome.
			testkit.Eventually(t, 10*time.Second, "the loop waits for the next tick", func() bool {
				return !statusOf(t, r.s, job).Next.IsZero()
			})
			if st := statusOf(t, r.s, job); !st.Next.Equal(latest.Add(time.Hour)) {
				t.Errorf("next tick %s, want %s", st.Next, latest.Add(time.Hour))
			}
			if tc.wantRun {
				x := j.awaitStart(t, 10*time.Second)
				if !x.info.Tick.Equal(latest) || x.info.Attempt != 1 {
					t.Fatalf("run of tick %s attempt %d; want the latest missed tick %s, attempt 1", x.info.Tick, x.info.Attempt, latest)
				}
				testkit.Eventually(t, 10*time.Second, "outcome ran", func() bool { return m.runs(t, job, scheduler.OutcomeRan) == 1 })
				if st := ledgerState(t, srv, job, job); st.Done != latest.UnixMilli() {
					t.Errorf("ledger done = %d, want the tick %d", st.Done, latest.UnixMilli())
				}
			} else if st := statusOf(t, r.s, job); st.Running || !st.LastTick.IsZero() {
				t.Errorf("a past tick was handled: %+v", st)
			}
			noStart(t, j)
			if got := m.runs(t, job, scheduler.OutcomeMissed); got != tc.wantMissed {
				t.Errorf("runs{outcome=missed} = %d, want %d", got, tc.wantMissed)
			}
		})
	}
}

// --- retries, timeout, panic -------------------------------------------------

var errFlaky = errors.New("flaky")

// A job that fails twice runs a third time, under the same lease (same
// token), after a backoff that doubles; one whose retries run out fails.
// The other replica runs neither again.
func TestRetries(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clk := testclock.NewFake(fakeStart)
	const spec = "@daily"
	const backoff = 50 * time.Millisecond
	j := newJournal()
	failUntil := func(ok int) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			info, _ := jobs.InfoFrom(ctx)
			if info.Attempt < ok {
				return fmt.Errorf("attempt %d: %w", info.Attempt, errFlaky)
			}
			return nil
		}
	}
	fleet, meters := fleetOn(t, srv, 2, clk,
		scheduler.Job{Name: "flaky", Schedule: spec, Retries: 2, Backoff: backoff, Run: j.fn(failUntil(3))},
		scheduler.Job{Name: "broken", Schedule: spec, Retries: 2, Backoff: backoff, Run: j.fn(failUntil(100))},
	)
	tick := step(t, clk, 4) // two jobs on two replicas
	testkit.Eventually(t, 15*time.Second, "both jobs handled on both replicas", func() bool {
		return runsOf(t, "flaky", scheduler.OutcomeRan, meters...)+runsOf(t, "flaky", scheduler.OutcomeSkippedDone, meters...) == 2 &&
			runsOf(t, "broken", scheduler.OutcomeFailed, meters...)+runsOf(t, "broken", scheduler.OutcomeSkippedDone, meters...) == 2
	})
	stopAll(t, fleet...)
	byJob := j.byJob()
	for job, want := range map[string]struct {
		outcome scheduler.Outcome
		errs    []bool
	}{
		"flaky":  {scheduler.OutcomeRan, []bool{true, true, false}},
		"broken": {scheduler.OutcomeFailed, []bool{true, true, true}},
	} {
		xs := byJob[job]
		if len(xs) != 3 {
			t.Errorf("job %s: %d tries, want 3", job, len(xs))
			continue
		}
		for i, x := range xs {
			if x.info.Attempt != i+1 || !x.info.Tick.Equal(tick) || x.info.Token != xs[0].info.Token || x.info.Replica != xs[0].info.Replica {
				t.Errorf("job %s: try %d: %+v; want attempt %d of tick %s, token %d on %s", job, i+1, x.info, i+1, tick, xs[0].info.Token, xs[0].info.Replica)
			}
			if (x.err != nil) != want.errs[i] {
				t.Errorf("job %s: try %d returned %v", job, i+1, x.err)
			}
			if i > 0 {
				if least := backoff << (i - 1); x.start.Sub(xs[i-1].end) < least {
					t.Errorf("job %s: try %d started %v after try %d, want a backoff of at least %v", job, i+1, x.start.Sub(xs[i-1].end), i, least)
				}
			}
		}
		runner, m := memberOf(t, fleet, meters, xs[0].info.Replica)
		if got := m.outcomes(t, job); len(got) != 1 || got[want.outcome] != 1 {
			t.Errorf("job %s: outcomes on %s: %v, want %s once", job, runner.id, got, want.outcome)
		}
		if st := statusOf(t, runner.s, job); st.LastOutcome != want.outcome {
			t.Errorf("job %s: status on %s: last outcome %q, want %q", job, runner.id, st.LastOutcome, want.outcome)
		}
		if st := ledgerState(t, srv, job, job); st.Done != tick.UnixMilli() || st.Tries != 3 || st.Outcome != string(want.outcome) {
			t.Errorf("job %s: ledger %+v; want done at the tick %d, 3 tries, outcome %s", job, st, tick.UnixMilli(), want.outcome)
		}
	}
}

// A run that blocks on its ctx past the job's Timeout: the ctx ends with
// cause jobs.ErrTimeout, the run fails with an error that wraps it, and the
// lock is free.
func TestTimeout(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clk := testclock.NewFake(fakeStart)
	const spec = "@daily"
	const job = "timeout"
	spans := oteltest.NewTracerProvider()
	tp := spans
	m, j := newMeter(), newJournal()
	r := newRedisReplica(t, srv, "r1", nil, m.option(), scheduler.WithTracerProvider(tp), scheduler.WithClock(clk))
	causes := make(chan error, 1)
	r.add(t, scheduler.Job{Name: job, Schedule: spec, Timeout: 100 * time.Millisecond, Run: j.fn(func(ctx context.Context) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})})
	r.start()
	tick := step(t, clk, 1)
	cause := receive(t, causes, 10*time.Second, "the run's ctx ended")
	if !errors.Is(cause, jobs.ErrTimeout) {
		t.Errorf("cause of the run's ctx: %v, want jobs.ErrTimeout", cause)
	}
	testkit.Eventually(t, 10*time.Second, "outcome failed", func() bool { return m.runs(t, job, scheduler.OutcomeFailed) == 1 })
	lockFree(t, srv, job)
	if st := statusOf(t, r.s, job); st.LastOutcome != scheduler.OutcomeFailed {
		t.Errorf("last outcome %q, want failed", st.LastOutcome)
	}
	x := j.all()[0]
	if !errors.Is(x.err, context.DeadlineExceeded) || x.end.Sub(x.start) < 100*time.Millisecond {
		t.Errorf("the job returned %v after %v; want context.DeadlineExceeded after 100ms", x.err, x.end.Sub(x.start))
	}
	// What the scheduler made of it: the job.run span's error.
	var found bool
	for _, s := range spans.Ended() {
		if s.Name() != "job.run" {
			continue
		}
		found = true
		attrs := attribute.NewSet(s.Attributes()...)
		if v, _ := attrs.Value("lockcron.outcome"); v.AsString() != string(scheduler.OutcomeFailed) {
			t.Errorf("job.run outcome %q, want failed", v.AsString())
		}
		if s.Status().Code != codes.Error || !strings.Contains(s.Status().Description, jobs.ErrTimeout.Error()) {
			t.Errorf("job.run status %+v; want an error that wraps %q", s.Status(), jobs.ErrTimeout)
		}
	}
	if !found {
		t.Error("no job.run span")
	}
	if st := ledgerState(t, srv, job, job); st.Done != tick.UnixMilli() || st.Outcome != string(scheduler.OutcomeFailed) {
		t.Errorf("ledger %+v; want the tick %d done, failed", st, tick.UnixMilli())
	}
}

// A panic in the job: the run fails, the lock is released, the other
// replica does not run the tick again, and the next tick runs normally.
func TestPanic(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clk := testclock.NewFake(fakeStart)
	const job = "panicky"
	j := newJournal()
	var calls atomic.Int32
	fleet, meters := fleetOn(t, srv, 2, clk, scheduler.Job{Name: job, Schedule: "@hourly", Run: j.fn(func(ctx context.Context) error {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return nil
	})})
	ticks := []time.Time{step(t, clk, 2)}
	x := j.awaitStart(t, 10*time.Second)
	if !x.info.Tick.Equal(ticks[0]) {
		t.Fatalf("first run: tick %s, want %s", x.info.Tick, ticks[0])
	}
	testkit.Eventually(t, 10*time.Second, "outcome failed", func() bool { return runsOf(t, job, scheduler.OutcomeFailed, meters...) == 1 })
	lockFree(t, srv, job) // before the next tick
	runner, _ := memberOf(t, fleet, meters, x.info.Replica)
	if st := statusOf(t, runner.s, job); st.LastOutcome != scheduler.OutcomeFailed || !st.LastTick.Equal(ticks[0]) {
		t.Errorf("status on %s after the panic: %+v", runner.id, st)
	}
	settle(t, clk, 2, job, fleet...)
	ticks = append(ticks, step(t, clk, 2))
	y := j.awaitStart(t, 10*time.Second)
	if !y.info.Tick.Equal(ticks[1]) || y.info.Attempt != 1 {
		t.Fatalf("run after the panic: tick %s attempt %d; want the next tick %s, attempt 1", y.info.Tick, y.info.Attempt, ticks[1])
	}
	testkit.Eventually(t, 10*time.Second, "the next tick ran, the other replica skipped both", func() bool {
		return runsOf(t, job, scheduler.OutcomeRan, meters...) == 1 &&
			runsOf(t, job, scheduler.OutcomeSkippedDone, meters...) == 2
	})
	noStart(t, j)
}

// --- lock loss -------------------------------------------------------------

// The lock's key is deleted while the job runs: the watchdog's renewal
// finds it gone, the run's ctx ends with cause lock.ErrLockLost, and the
// run counts as lost_lock.
func TestLockDeletedUnderRunningJob(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clk := testclock.NewFake(fakeStart)
	const spec = "@daily"
	const job = "fragile"
	m, j := newMeter(), newJournal()
	r := newRedisReplica(t, srv, "r1", []lock.Option{lock.WithLeaseTime(600 * time.Millisecond)}, m.option(), scheduler.WithClock(clk))
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	r.add(t, scheduler.Job{Name: job, Schedule: spec, Run: j.fn(func(ctx context.Context) error {
		started <- struct{}{}
		timer := time.NewTimer(30 * time.Second)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
			return context.Cause(ctx)
		case <-timer.C:
			causes <- nil
			return nil
		}
	})})
	r.start()
	step(t, clk, 1)
	receive(t, started, 10*time.Second, "the run started")
	if n := srv.Do("DEL", "lockcron:{"+job+"}"); n != int64(1) {
		t.Logf("DEL of the lock key: %v; the lease ended before it", n) // a renewal so late is not the point here
	}
	cause := receive(t, causes, 10*time.Second, "the run's ctx ended")
	if !errors.Is(cause, lock.ErrLockLost) {
		t.Fatalf("cause of the run's ctx: %v, want lock.ErrLockLost", cause)
	}
	testkit.Eventually(t, 10*time.Second, "outcome lost_lock", func() bool { return m.runs(t, job, scheduler.OutcomeLostLock) == 1 })
	if n := m.counter(t, "lockcron.job.locks_lost", attribute.String("lockcron.job", job)); n != 1 {
		t.Errorf("lockcron.job.locks_lost = %d, want 1", n)
	}
	if got := m.outcomes(t, job); len(got) != 1 {
		t.Errorf("outcomes %v, want lost_lock only", got)
	}
	if st := statusOf(t, r.s, job); st.LastOutcome != scheduler.OutcomeLostLock {
		t.Errorf("last outcome %q, want lost_lock", st.LastOutcome)
	}
}

// --- shutdown --------------------------------------------------------------

// Shutdown of the replica that runs a tick: the run's ctx ends with cause
// ErrClosed. Handoff: the other replica runs the tick at once, attempt 2.
// Abandon: the tick is done, interrupted, and nobody runs it again.
func TestShutdownInProcess(t *testing.T) {
	t.Parallel()
	for _, policy := range []scheduler.ShutdownPolicy{scheduler.ShutdownHandoff, scheduler.ShutdownAbandon} {
		t.Run(string(policy), func(t *testing.T) {
			srv := redistest.Start(t)
			clk := testclock.NewFake(fakeStart)
			const job = "report"
			j := newJournal()
			causes := make(chan error, 2)
			fleet, meters := fleetOn(t, srv, 2, clk, scheduler.Job{Name: job, Schedule: "@daily", OnShutdown: policy,
				Run: j.fn(func(ctx context.Context) error {
					if info, _ := jobs.InfoFrom(ctx); info.Attempt > 1 {
						return nil // taken over: a short run
					}
					timer := time.NewTimer(5 * time.Second)
					defer timer.Stop()
					select {
					case <-timer.C:
						causes <- nil
						return nil
					case <-ctx.Done():
						causes <- context.Cause(ctx)
						return context.Cause(ctx)
					}
				})})
			tick := step(t, clk, 2)
			x := j.awaitStart(t, 10*time.Second)
			if !x.info.Tick.Equal(tick) || x.info.Attempt != 1 {
				t.Fatalf("first run: tick %s attempt %d, want %s, 1", x.info.Tick, x.info.Attempt, tick)
			}
			runner, rm := memberOf(t, fleet, meters, x.info.Replica)
			others, oms := othersOf(fleet, meters, runner)
			other, om := others[0], oms[0]
			runner.stop(t) // Shutdown, and Run returns ErrClosed
			if cause := receive(t, causes, time.Second, "the run's ctx ended"); !errors.Is(cause, scheduler.ErrClosed) {
				t.Errorf("cause of the stopped run's ctx: %v, want scheduler.ErrClosed", cause)
			}
			want := scheduler.OutcomeHandedOff
			if policy == scheduler.ShutdownAbandon {
				want = scheduler.OutcomeInterrupted
			}
			if got := rm.outcomes(t, job); len(got) != 1 || got[want] != 1 {
				t.Errorf("outcomes on %s: %v, want %s once", runner.id, got, want)
			}
			if st := statusOf(t, runner.s, job); st.LastOutcome != want {
				t.Errorf("status on %s: last outcome %q, want %q", runner.id, st.LastOutcome, want)
			}

			if policy == scheduler.ShutdownHandoff {
				y := j.awaitStart(t, 10*time.Second)
				if y.info.Replica != other.id || !y.info.Tick.Equal(tick) || y.info.Attempt != 2 || y.info.Token <= x.info.Token {
					t.Fatalf("run after the handoff: %+v; want %s on tick %s, attempt 2, token above %d", y.info, other.id, tick, x.info.Token)
				}
				testkit.Eventually(t, 10*time.Second, "outcome ran on "+other.id, func() bool { return om.runs(t, job, scheduler.OutcomeRan) == 1 })
				if st := ledgerState(t, srv, job, job); st.Done != tick.UnixMilli() || st.Tries != 2 {
					t.Errorf("ledger %+v; want the tick %d done after 2 tries", st, tick.UnixMilli())
				}
				return
			}
			testkit.Eventually(t, 10*time.Second, other.id+" finds the tick done", func() bool {
				return om.runs(t, job, scheduler.OutcomeSkippedDone) == 1
			})
			noStart(t, j)
			if st := ledgerState(t, srv, job, job); st.Done != tick.UnixMilli() || st.Outcome != string(scheduler.OutcomeInterrupted) {
				t.Errorf("ledger %+v; want the tick %d done, interrupted", st, tick.UnixMilli())
			}
		})
	}
}

// Once Run has returned after Shutdown, and the lock.Client is closed,
// nothing the Scheduler started is left: trigger loops, tick goroutines,
// waits for locks, renewals.
func TestNoGoroutineLeftAfterRun(t *testing.T) {
	srv := redistest.Start(t) // its process watcher belongs to the test
	ignore := goleak.IgnoreCurrent()
	rdb := redis.NewClient(srv.Options())
	locks, err := lock.New(rdb, lock.WithClientID("r1"))
	if err != nil {
		t.Fatal(err)
	}
	holder, err := lock.New(rdb, lock.WithClientID("holder"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Context(t)
	held, err := holder.Mutex("held").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFake(fakeStart)
	s, err := scheduler.New(locks, scheduler.WithReplicaID("r1"), scheduler.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	j := newJournal()
	for _, job := range []scheduler.Job{
		{Name: "quick", Schedule: "@every 1s", Run: j.fn(nil)},
		{Name: "long", Schedule: "@every 1s", LockName: "shared", Run: j.fn(func(ctx context.Context) error {
			<-ctx.Done()
			return context.Cause(ctx)
		})},
		// Waits for the lock that "long" holds.
		{Name: "behind", Schedule: "@every 1s", LockName: "shared", Overlap: scheduler.OverlapQueue, Run: j.fn(nil)},
		// Waits for the lock held by another client.
		{Name: "blocked", Schedule: "@every 1s", LockName: "held", Overlap: scheduler.OverlapQueue, Run: j.fn(nil)},
	} {
		if err := s.Add(job); err != nil {
			t.Fatal(err)
		}
	}
	runc := make(chan error, 1)
	go func() { runc <- s.Run(context.Background()) }()
	// "long" and "behind" share a lock: at a tick that "behind" takes it
	// first, "long" skips (busy) and "behind" is soon done. Tick until
	// "long" holds the lock.
	started := func() bool {
		for {
			select {
			case x := <-j.ch:
				if x.info.Job == "long" {
					return true
				}
			default:
				return false
			}
		}
	}
	for tick := 0; ; tick++ {
		if tick == 20 {
			t.Fatal("long did not take the shared lock in 20 ticks")
		}
		step(t, clk, 4)
		var longStarted bool
		testkit.Eventually(t, 15*time.Second, "the tick handled", func() bool {
			longStarted = longStarted || started()
			if n, _ := clk.Waiting(); n < 4 {
				return false
			}
			for _, st := range s.Status() {
				if st.Running && (st.Job == "quick" || (!longStarted && st.Job != "blocked")) {
					return false
				}
			}
			return true
		})
		if longStarted {
			break
		}
	}
	if !statusOf(t, s, "behind").Running {
		step(t, clk, 4) // "behind" took the lock before "long": its next tick waits
	}
	testkit.Eventually(t, 15*time.Second, "every job under way", func() bool {
		for _, st := range s.Status() {
			if (st.Job == "quick" && st.LastOutcome != scheduler.OutcomeRan) || (st.Job != "quick" && !st.Running) {
				return false
			}
		}
		return true
	})
	sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(sctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := receive(t, runc, 5*time.Second, "Run returned"); !errors.Is(err, scheduler.ErrClosed) {
		t.Errorf("Run = %v, want ErrClosed", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	if err := locks.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Close(); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, ignore)
}

// Shutdown whose ctx ends while a job ignores its own: Shutdown returns the
// ctx's error at once, the lock is released all the same, and Run returns
// ErrClosed. The job func is left to return when it will.
func TestShutdownDeadlineWithStubbornJob(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	clk := testclock.NewFake(fakeStart)
	const spec = "@daily"
	const job = "stubborn"
	m := newMeter()
	r := newRedisReplica(t, srv, "r1", nil, m.option(), scheduler.WithClock(clk))
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(unblock) // before the replica's own clean-up
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	r.add(t, scheduler.Job{Name: job, Schedule: spec, Run: jobs.Func(func(ctx context.Context) error {
		started <- struct{}{}
		<-release // ignores ctx
		causes <- context.Cause(ctx)
		return nil
	})})
	r.start()
	step(t, clk, 1)
	receive(t, started, 10*time.Second, "the run started")

	const grace = 300 * time.Millisecond
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	begin := time.Now()
	err := r.s.Shutdown(sctx)
	took := time.Since(begin)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want context.DeadlineExceeded", err)
	}
	t.Logf("Shutdown returned after %v (ctx of %v)", took, grace)
	if took > grace+5*time.Second {
		t.Errorf("Shutdown returned %v after its ctx ended", took-grace)
	}
	lockFree(t, srv, job)
	if err := receive(t, r.runc, 5*time.Second, "Run returned"); !errors.Is(err, scheduler.ErrClosed) {
		t.Errorf("Run = %v, want ErrClosed", err)
	}
	r.runc = nil
	if got := m.runs(t, job, scheduler.OutcomeHandedOff); got != 1 {
		t.Errorf("runs{outcome=handed_off} = %d, want 1; outcomes %v", got, m.outcomes(t, job))
	}
	unblock()
	if cause := receive(t, causes, 5*time.Second, "the job returned"); !errors.Is(cause, scheduler.ErrClosed) {
		t.Errorf("cause of the run's ctx: %v, want scheduler.ErrClosed", cause)
	}
}
