package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	fleetpkg "github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
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

// A run on replica r1 is replaced by a tick that only r2 claims (their
// clocks apart: r1's stays at the first tick): the request reaches r1 by
// its message, well before r1 would read the ledger on its own (every
// third of the 30s lease).
func TestOverlapReplaceAcrossReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "replaced-across"
	j, causes := newJournal(), make(chan error, 10)
	work := func(ctx context.Context) error {
		info, _ := jobs.InfoFrom(ctx)
		if info.Replica != "r1" {
			return nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}
	clocks := map[string]*testclock.Fake{"r1": testclock.NewFake(fakeStart), "r2": testclock.NewFake(fakeStart)}
	var fleet []*replica
	var meters []*meter
	for _, id := range []string{"r1", "r2"} {
		m := newMeter()
		r := newRedisReplica(t, srv, id, nil, m.option(), scheduler.WithClock(clocks[id]), scheduler.WithClaimFallback(0))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Overlap: scheduler.OverlapReplace, Run: j.fn(work)})
		r.start()
		fleet, meters = append(fleet, r), append(meters, m)
	}
	t1 := step(t, clocks["r1"], 1)
	first := j.awaitStart(t, 10*time.Second)
	if first.info.Replica != "r1" || !first.info.Tick.Equal(t1) {
		t.Fatalf("first run %+v, want tick %s on r1", first.info, fmtT(t1))
	}
	step(t, clocks["r2"], 1) // t1 on r2: under way on r1
	t2 := step(t, clocks["r2"], 1)
	asked := time.Now()
	select {
	case cause := <-causes:
		if !errors.Is(cause, scheduler.ErrReplaced) || !strings.Contains(cause.Error(), rfc(t2)) {
			t.Errorf("cause %v, want ErrReplaced naming tick %s", cause, rfc(t2))
		}
	case <-time.After(8 * time.Second):
		t.Fatalf("the run on r1 was not ended within 8s of tick %s on r2", fmtT(t2))
	}
	t.Logf("r1's run ended %v after r2's tick", time.Since(asked).Round(time.Millisecond))
	second := j.awaitStart(t, 10*time.Second)
	if second.info.Replica != "r2" || !second.info.Tick.Equal(t2) {
		t.Errorf("second run %+v, want tick %s on r2", second.info, fmtT(t2))
	}
	testkit.Eventually(t, 10*time.Second, "the replaced run recorded on r1", func() bool {
		return runsOf(t, job, scheduler.OutcomeReplaced, meters[0]) == 1
	})
	stopAll(t, fleet...)
	checkNoOverlap(t, j.byJob()[job])
}

// A request to replace whose message is lost (here: written to the ledger
// with no message at all) ends the run all the same: the run's replica
// reads the ledger every third of the lease.
func TestOverlapReplaceWithoutMessage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "replaced-quietly"
	j, clk, causes := newJournal(), testclock.NewFake(fakeStart), make(chan error, 1)
	work := func(ctx context.Context) error {
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}
	m := newMeter()
	r := newRedisReplica(t, srv, "r1", []lock.Option{lock.WithLeaseTime(3 * time.Second)}, m.option(), scheduler.WithClock(clk))
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Overlap: scheduler.OverlapReplace, Run: j.fn(work)})
	r.start()
	t1 := step(t, clk, 1)
	j.awaitStart(t, 10*time.Second)
	by := t1.Add(time.Second)
	srv.Do("HSET", "lockcron:{"+job+"}:ledger:"+job, "replace", by.UnixMilli())
	select {
	case cause := <-causes:
		if !errors.Is(cause, scheduler.ErrReplaced) || !strings.Contains(cause.Error(), rfc(by)) {
			t.Errorf("cause %v, want ErrReplaced naming tick %s", cause, rfc(by))
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the run was not ended within 15s of the request in the ledger (lease 3s)")
	}
	testkit.Eventually(t, 10*time.Second, "the replaced run recorded", func() bool {
		return runsOf(t, job, scheduler.OutcomeReplaced, m) == 1
	})
	r.stop(t)
}

// On the in-memory backend (one process, no fleet), the next tick ends the
// run all the same: the claim's request reaches the run at once.
func TestOverlapReplaceMemory(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	const job = "replaced-in-memory"
	j, clk, causes := newJournal(), testclock.NewFake(fakeStart), make(chan error, 1)
	work := func(ctx context.Context) error {
		info, _ := jobs.InfoFrom(ctx)
		if !info.Tick.Equal(fakeStart.Add(time.Second)) {
			return nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return context.Cause(ctx)
	}
	m := newMeter()
	r := newReplica(t, c, "r1", m.option(), scheduler.WithClock(clk))
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Overlap: scheduler.OverlapReplace, Run: j.fn(work)})
	r.start()
	step(t, clk, 1)
	j.awaitStart(t, 10*time.Second)
	t2 := step(t, clk, 1)
	select {
	case cause := <-causes:
		if !errors.Is(cause, scheduler.ErrReplaced) || !strings.Contains(cause.Error(), rfc(t2)) {
			t.Errorf("cause %v, want ErrReplaced naming tick %s", cause, rfc(t2))
		}
	case <-time.After(8 * time.Second):
		t.Fatalf("the run was not ended within 8s of tick %s", fmtT(t2))
	}
	second := j.awaitStart(t, 10*time.Second)
	if !second.info.Tick.Equal(t2) {
		t.Errorf("second run of tick %s, want %s", fmtT(second.info.Tick), fmtT(t2))
	}
	testkit.Eventually(t, 10*time.Second, "the replaced run recorded", func() bool {
		return runsOf(t, job, scheduler.OutcomeReplaced, m) == 1
	})
	r.stop(t)
	checkNoOverlap(t, j.byJob()[job])
}

// With Replicas all, each replica's runs are replaced by its own later
// ticks: the claim in the replica's own ledger asks the run to end, and the
// run's watch reads that ledger.
func TestOverlapReplaceEveryReplica(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "replaced-everywhere"
	j, clk := newJournal(), testclock.NewFake(fakeStart)
	causes := make(chan error, 10)
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
	for _, id := range []string{"r1", "r2"} {
		r := newRedisReplica(t, srv, id, nil, scheduler.WithClock(clk))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Replicas: scheduler.ReplicasAll, Overlap: scheduler.OverlapReplace, Run: j.fn(work)})
		r.start()
		fleet = append(fleet, r)
	}
	t1 := step(t, clk, 2)
	j.awaitStart(t, 10*time.Second)
	j.awaitStart(t, 10*time.Second)
	t2 := step(t, clk, 2)
	for range fleet {
		select {
		case cause := <-causes:
			if !errors.Is(cause, scheduler.ErrReplaced) || !strings.Contains(cause.Error(), rfc(t2)) {
				t.Errorf("cause %v, want ErrReplaced naming tick %s", cause, rfc(t2))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("a run of tick %s was not ended within 10s of tick %s (its watch reads its ledger every 10s)", fmtT(t1), fmtT(t2))
		}
	}
	var hist []scheduler.Run
	testkit.Eventually(t, 20*time.Second, "each replica's run of the first tick replaced, and the second tick run on each", func() bool {
		var err error
		if hist, err = fleet[0].s.History(context.Background(), job, 20, ""); err != nil {
			t.Fatal(err)
		}
		replaced, ran := map[string]bool{}, map[string]bool{}
		for _, h := range hist {
			if h.Outcome == scheduler.OutcomeReplaced && h.Tick.Equal(t1) {
				replaced[h.Replica] = true
			}
			if h.Outcome == scheduler.OutcomeRan && h.Tick.Equal(t2) {
				ran[h.Replica] = true
			}
		}
		return len(replaced) == 2 && len(ran) == 2
	})
	stopAll(t, fleet...)
	perReplica := make(map[string][]execution)
	for _, x := range j.all() {
		perReplica[x.info.Replica] = append(perReplica[x.info.Replica], x)
	}
	for _, runs := range perReplica {
		checkNoOverlap(t, runs)
	}
}

// The ticks of a backfill of a replace job run, whatever the ledger's
// replace says: neither replaced nor replacing (a backfill's ticks are
// past ones, each later than none of the scheduled ones).
func TestBackfillOfReplaceJobRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "replaced-backfilled"
	j := newJournal()
	r := newRedisReplica(t, srv, "r1", nil)
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1h", Overlap: scheduler.OverlapReplace, Run: j.fn(nil)})
	r.start()
	last := time.Now().Truncate(time.Hour)
	// A scheduled tick of the last hour asked a run to end.
	srv.Do("HSET", "lockcron:{"+job+"}:ledger:"+job, "replace", last.UnixMilli())
	ctx := context.Background()
	b, err := r.s.Backfill(ctx, job, scheduler.BackfillOptions{From: last.Add(-5 * time.Hour), To: last.Add(-time.Hour), Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	got := awaitBackfill(t, r.s, b.ID, time.Minute)
	hist, err := r.s.History(ctx, job, 20, "")
	if err != nil {
		t.Fatal(err)
	}
	r.stop(t)
	if n := len(j.all()); n != 5 {
		t.Errorf("backfill %+v: %d of its 5 ticks ran, want all", got, n)
	}
	for _, h := range hist {
		if h.Outcome != scheduler.OutcomeRan {
			t.Errorf("history: tick %s %s (%s), want ran", h.Tick.Format(time.RFC3339), h.Outcome, h.Reason)
		}
	}
}

// The holder of a replace job's run died, and its lease ended before the
// next tick: the next tick's claim takes the dead run's tick over only to
// record it replaced by itself (not run again: it hung before, it would
// hang again), and runs its own tick at once.
func TestOverlapReplaceDeadHolderLeaseEnded(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job = "replaced-dead"
	dead, err := lock.New(srv.Client(), lock.WithClientID("dead"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := fleetpkg.New(dead).Ledger(job, job, fleetpkg.WithReplace())
	if err != nil {
		t.Fatal(err)
	}
	lost := fakeStart.Add(-time.Second)
	if _, err := g.Claim(ctx, lost.UnixMilli(), false); err != nil {
		t.Fatal(err)
	}
	// Its lease ended: the lock is free, the tick unfinished.
	if ok, err := dead.ForceUnlock(ctx, job); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	_ = dead.Close()
	j, clk := newJournal(), testclock.NewFake(fakeStart)
	m := newMeter()
	r := newRedisReplica(t, srv, "survivor", nil, m.option(), scheduler.WithClock(clk))
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Overlap: scheduler.OverlapReplace, Run: j.fn(func(ctx context.Context) error {
		info, _ := jobs.InfoFrom(ctx)
		if info.Tick.Equal(lost) {
			<-ctx.Done() // it hung before, it hangs again
			return context.Cause(ctx)
		}
		return nil
	})})
	r.start()
	own := step(t, clk, 1)
	first := j.awaitStart(t, 10*time.Second)
	if !first.info.Tick.Equal(own) || first.info.Attempt != 1 {
		t.Errorf("first run: tick %s attempt %d; want the due tick %s, attempt 1 (the dead run's tick %s replaced, not run again)",
			fmtT(first.info.Tick), first.info.Attempt, fmtT(own), fmtT(lost))
	}
	var hist []scheduler.Run
	testkit.Eventually(t, 10*time.Second, "the dead run's tick recorded replaced and the due tick ran", func() bool {
		if hist, err = r.s.History(context.Background(), job, 20, ""); err != nil {
			t.Fatal(err)
		}
		var replaced, ran bool
		for _, h := range hist {
			replaced = replaced || h.Outcome == scheduler.OutcomeReplaced && h.Tick.Equal(lost) && strings.Contains(h.Reason, rfc(own))
			ran = ran || h.Outcome == scheduler.OutcomeRan && h.Tick.Equal(own)
		}
		return replaced && ran
	})
	r.stop(t)
	for _, h := range hist {
		// (The tick at the replica's start, after the dead claim's, is
		// recorded missed: the misfire policy's, not replace's.)
		if mine := h.Tick.Equal(lost) || h.Tick.Equal(own); mine && !(h.Outcome == scheduler.OutcomeReplaced && h.Tick.Equal(lost)) && !(h.Outcome == scheduler.OutcomeRan && h.Tick.Equal(own)) {
			t.Errorf("history: tick %s %s (%s); want %s replaced and %s ran alone", fmtT(h.Tick), h.Outcome, h.Reason, fmtT(lost), fmtT(own))
		}
	}
	for _, run := range j.all() {
		if run.info.Tick.Equal(lost) {
			t.Errorf("the dead run's tick %s ran again (attempt %d)", fmtT(lost), run.info.Attempt)
		}
	}
}
