package scheduler_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockcron/lockcron/jobs"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/scheduler"
)

// A child that follows a parent's manual run gets the parent run's params
// that it declares (none if it declares none), not those of its own manual
// run of the same number.
func TestChainChildTakesTheParentsParams(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	r := newRedisReplica(t, srv, "r1", nil)
	r.add(t,
		scheduler.Job{Name: "extract", Schedule: "0 0 1 1 *", Params: []string{"customer", "date"}, Run: j.fn(nil)},
		scheduler.Job{Name: "load", After: []string{"extract"}, Params: []string{"customer"}, Run: j.fn(nil)},
		scheduler.Job{Name: "audit", After: []string{"extract"}, Run: j.fn(nil)})
	r.start()
	testkit.Eventually(t, 30*time.Second, "r1 running (its subscriptions confirmed)", r.s.Running)
	ctx := testkit.Context(t)
	if _, err := r.s.TriggerParams(ctx, "load", map[string]string{"customer": "42"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "load's own manual run #1", func() bool { return len(j.byJob()["load"]) == 1 })
	if _, err := r.s.TriggerParams(ctx, "extract", map[string]string{"customer": "7", "date": "2026-01-01"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "load and audit after extract's manual run #1", func() bool {
		by := j.byJob()
		return len(by["load"]) == 2 && len(by["audit"]) == 1
	})
	r.stop(t)
	by := j.byJob()
	own, follow := by["load"][0].info, by["load"][1].info
	if own.Parent != "" || !maps.Equal(own.Params, map[string]string{"customer": "42"}) {
		t.Errorf("load's own manual run: parent %q params %v, want none and customer=42", own.Parent, own.Params)
	}
	if follow.Parent == "" || follow.Trigger != 1 || !maps.Equal(follow.Params, map[string]string{"customer": "7"}) {
		t.Errorf("load after extract's manual run: parent %q trigger %d params %v, want extract's run #1 and customer=7 alone", follow.Parent, follow.Trigger, follow.Params)
	}
	if a := by["audit"][0].info; a.Parent == "" || len(a.Params) != 0 {
		t.Errorf("audit (declares no params) after extract's manual run: parent %q params %v, want none", a.Parent, a.Params)
	}
}

// A child whose run takes longer than its MisfireGrace follows every
// parent run that finished meanwhile: the grace drops only the runs
// missed while the child did not run.
func TestChainBusyChildKeepsItsParentsRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	release := make(chan struct{})
	started, hold := holdFirst(release)
	r := newRedisReplica(t, srv, "r1", nil)
	r.add(t,
		scheduler.Job{Name: "extract", Schedule: "@every 1s", Run: j.fn(nil)},
		scheduler.Job{Name: "load", After: []string{"extract"}, MisfireGrace: time.Second, Run: j.fn(hold)})
	r.start()
	held := awaitStarted(t, started, "load did not start")
	// Four parent runs finish while load's first run goes on: the first
	// of them more than the grace before load is free again.
	var last time.Time
	testkit.Eventually(t, 60*time.Second, "4 runs of extract after the one load follows", func() bool {
		n := 0
		for _, x := range j.byJob()["extract"] {
			if x.info.Tick.After(held.Tick) {
				n, last = n+1, x.info.Tick
			}
		}
		return n >= 4
	})
	close(release)
	testkit.Eventually(t, 60*time.Second, "load after each of them", func() bool {
		n := 0
		for _, x := range j.byJob()["load"] {
			if !x.info.Tick.After(last) {
				n++
			}
		}
		return n >= 5
	})
	r.stop(t)
	checkFollowersUpTo(t, j.byJob(), last)
}

// checkFollowersUpTo checks load's runs against extract's, up to tick last.
func checkFollowersUpTo(t *testing.T, by map[string][]execution, last time.Time) {
	t.Helper()
	want := make(map[time.Time]bool)
	for _, x := range by["extract"] {
		if !x.info.Tick.After(last) {
			want[x.info.Tick] = true
		}
	}
	var load []execution
	for _, x := range by["load"] {
		if !x.info.Tick.After(last) {
			load = append(load, x)
		}
	}
	checkFollowers(t, load, "extract", want)
}

// A child added to a fleet whose parent ran before (its chain record kept
// for another child) does not follow the parent's runs that finished
// before it was added.
func TestChainNewChildFollowsNoPastRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	r1 := newRedisReplica(t, srv, "r1", nil)
	r1.add(t,
		scheduler.Job{Name: "extract", Schedule: "@every 1s", Run: j.fn(nil)},
		scheduler.Job{Name: "load", After: []string{"extract"}, Run: j.fn(nil)})
	r1.start()
	testkit.Eventually(t, 60*time.Second, "3 extract runs", func() bool { return len(j.byJob()["extract"]) >= 3 })
	r1.stop(t)
	var before time.Time
	for _, x := range j.byJob()["extract"] {
		before = maxTime(before, x.info.Tick)
	}
	r2 := newRedisReplica(t, srv, "r2", nil)
	r2.add(t,
		scheduler.Job{Name: "extract", Schedule: "@every 1s", Run: j.fn(nil)},
		scheduler.Job{Name: "load", After: []string{"extract"}, Run: j.fn(nil)},
		scheduler.Job{Name: "audit", After: []string{"extract"}, Run: j.fn(nil)})
	r2.start()
	testkit.Eventually(t, 60*time.Second, "2 audit runs", func() bool { return len(j.byJob()["audit"]) >= 2 })
	r2.stop(t)
	for _, x := range j.byJob()["audit"] {
		if !x.info.Tick.After(before) {
			t.Errorf("audit, added after extract's run of %s, followed it", x.info.Tick.Format(time.RFC3339))
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// A child's run handed off by a replica's stop is run by another replica
// with its parent, the same tick and the next attempt.
func TestChainHandedOffChildKeepsItsParent(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	started, slow := holdFirst(nil) // its first run until the stop hands it off
	js := []scheduler.Job{
		{Name: "extract", Schedule: "@every 2s", Run: j.fn(nil)},
		{Name: "load", After: []string{"extract"}, Run: j.fn(slow)},
	}
	fleet := chainFleet(t, srv, 2, js...)
	held := awaitStarted(t, started, "no load run")
	victim, other := fleet[0], fleet[1]
	if held.Replica == "r2" {
		victim, other = fleet[1], fleet[0]
	}
	victim.stop(t)
	deadline := time.After(60 * time.Second)
	for {
		var x jobs.Info
		select {
		case x = <-started:
		case <-deadline:
			t.Fatal("the handed-off load run not run again")
		}
		if !x.Tick.Equal(held.Tick) {
			continue
		}
		if x.Parent != held.Parent || x.Attempt != held.Attempt+1 {
			t.Errorf("handed-off load run of %s run again on %s: parent %q attempt %d, want %q and %d", x.Tick.Format(time.RFC3339), x.Replica, x.Parent, x.Attempt, held.Parent, held.Attempt+1)
		}
		break
	}
	other.stop(t)
}

// A parent's manual run starts its grandchildren too: the child's run that
// follows it starts theirs, with the child as their parent, the trigger
// number and the params they declare.
func TestChainManualRunReachesGrandchildren(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	r := newRedisReplica(t, srv, "r1", nil)
	r.add(t,
		scheduler.Job{Name: "extract", Schedule: "0 0 1 1 *", Params: []string{"customer"}, Run: j.fn(nil)},
		scheduler.Job{Name: "load", After: []string{"extract"}, Run: j.fn(nil)},
		scheduler.Job{Name: "report", After: []string{"load"}, Params: []string{"customer"}, Run: j.fn(nil)})
	r.start()
	testkit.Eventually(t, 30*time.Second, "r1 running (its subscriptions confirmed)", r.s.Running)
	ctx := testkit.Context(t)
	if _, err := r.s.TriggerParams(ctx, "extract", map[string]string{"customer": "7"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "report after load after extract's manual run", func() bool { return len(j.byJob()["report"]) == 1 })
	// load's own manual run #1 starts report's run of load's #1: not taken
	// for the one that followed extract's #1.
	if _, err := r.s.Trigger(ctx, "load"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "report after load's own manual run", func() bool { return len(j.byJob()["report"]) == 2 })
	r.stop(t)
	by := j.byJob()
	load, report := by["load"][0].info, by["report"][0].info
	if report.Trigger != 1 || report.Parent != "load@"+load.Tick.UTC().Format(time.RFC3339Nano) || !report.Tick.Equal(load.Tick) ||
		!maps.Equal(report.Params, map[string]string{"customer": "7"}) {
		t.Errorf("report after load after extract's manual run: trigger %d parent %q tick %s params %v; load's tick %s", report.Trigger, report.Parent, report.Tick, report.Params, load.Tick)
	}
	if x := by["report"][1].info; x.Trigger != 1 || len(x.Params) != 0 || x.Parent == "" {
		t.Errorf("report after load's own manual run: trigger %d parent %q params %v", x.Trigger, x.Parent, x.Params)
	}
	if n := len(by["load"]); n != 2 {
		t.Errorf("load ran %d times, want 2", n)
	}
}

// A backfill of a child is refused with the advice to backfill its
// parent, whose backfill runs start no children.
func TestChainBackfillOfAChildRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	r := newRedisReplica(t, srv, "r1", nil)
	r.add(t,
		scheduler.Job{Name: "extract", Schedule: "@every 1s", Run: j.fn(nil)},
		scheduler.Job{Name: "load", After: []string{"extract"}, Run: j.fn(nil)})
	r.start()
	defer r.stop(t)
	ctx := testkit.Context(t)
	now := time.Now()
	_, err := r.s.Backfill(ctx, "load", scheduler.BackfillOptions{From: now.Add(-time.Minute), To: now.Add(-time.Second)})
	if !errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), "follows extract (after) and has no ticks of its own: backfill its parent") {
		t.Errorf("Backfill(load) = %v, want ErrInvalid saying to backfill extract", err)
	}
	b, err := r.s.Backfill(ctx, "extract", scheduler.BackfillOptions{From: now.Add(-5 * time.Second), To: now.Add(-time.Second), Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	if b = awaitBackfill(t, r.s, b.ID, time.Minute); b.State != "finished" {
		t.Fatalf("backfill of extract: %+v", b)
	}
	for _, x := range j.byJob()["load"] {
		if x.info.Tick.Before(now) {
			t.Errorf("load ran for extract's backfilled tick %s", x.info.Tick.Format(time.RFC3339))
		}
	}
}

// The grace drops no parent run that finished while another replica ran
// the child: a replica that starts meanwhile, and takes the run over at
// the other's stop, runs the ones queued behind it too.
func TestChainBusyChildElsewhereKeepsItsParentsRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	started, hold := holdFirst(nil) // its first run until r1's stop hands it off
	js := []scheduler.Job{
		{Name: "extract", Schedule: "@every 1s", Run: j.fn(nil)},
		{Name: "load", After: []string{"extract"}, MisfireGrace: time.Second, Run: j.fn(hold)},
	}
	r1 := newRedisReplica(t, srv, "r1", nil)
	r1.add(t, js...)
	r1.start()
	held := awaitStarted(t, started, "load did not start")
	testkit.Eventually(t, 60*time.Second, "3 runs of extract after the one load follows", func() bool {
		n := 0
		for _, x := range j.byJob()["extract"] {
			if x.info.Tick.After(held.Tick) {
				n++
			}
		}
		return n >= 3
	})
	r2 := newRedisReplica(t, srv, "r2", nil)
	r2.add(t, js...)
	r2.start()
	r1.stop(t)
	var last time.Time
	for _, x := range j.byJob()["extract"] {
		last = maxTime(last, x.info.Tick)
	}
	testkit.Eventually(t, 60*time.Second, "load after each run of extract up to r1's stop", func() bool {
		n := 0
		for _, x := range j.byJob()["load"] {
			if !x.info.Tick.After(last) && x.err == nil {
				n++
			}
		}
		want := 0
		for _, x := range j.byJob()["extract"] {
			if !x.info.Tick.After(last) {
				want++
			}
		}
		return n == want
	})
	r2.stop(t)
}

// Update of a child returns while its run goes on; the new definition
// follows the parent runs after it, each once, with none lost.
func TestChainUpdateDuringChildRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	release := make(chan struct{})
	started, hold := holdFirst(release)
	r := newRedisReplica(t, srv, "r1", nil)
	r.add(t,
		scheduler.Job{Name: "extract", Schedule: "@every 1s", Run: j.fn(nil)},
		scheduler.Job{Name: "load", After: []string{"extract"}, Run: j.fn(hold)})
	r.start()
	held := awaitStarted(t, started, "load did not start")
	updated := make(chan error, 1)
	go func() {
		updated <- r.s.Update(scheduler.Job{Name: "load", After: []string{"extract"}, Timeout: time.Hour, Run: j.fn(hold)})
	}()
	select {
	case err := <-updated:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		close(release)
		t.Fatal("Update waited for the child's run")
	}
	close(release)
	var last time.Time
	testkit.Eventually(t, 60*time.Second, "3 runs of extract after the update", func() bool {
		n := 0
		for _, x := range j.byJob()["extract"] {
			if x.info.Tick.After(held.Tick) {
				n, last = n+1, x.info.Tick
			}
		}
		return n >= 3
	})
	testkit.Eventually(t, 60*time.Second, "load after each run of extract", func() bool {
		n := 0
		for _, x := range j.byJob()["load"] {
			if !x.info.Tick.After(last) {
				n++
			}
		}
		want := 0
		for _, x := range j.byJob()["extract"] {
			if !x.info.Tick.After(last) {
				want++
			}
		}
		return n == want
	})
	r.stop(t)
	checkFollowersUpTo(t, j.byJob(), last)
}

// holdFirst is a job func that sends each run's Info on started and holds
// its first run until release is closed or the run's ctx ends (a nil
// release: until its ctx ends).
func holdFirst(release <-chan struct{}) (started chan jobs.Info, run func(context.Context) error) {
	started = make(chan jobs.Info, 100)
	var first atomic.Bool
	return started, func(ctx context.Context) error {
		info, _ := jobs.InfoFrom(ctx)
		started <- info
		if first.CompareAndSwap(false, true) {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
}

// awaitStarted is the next Info on started, or fails the test (what) after
// a minute.
func awaitStarted(t *testing.T, started <-chan jobs.Info, what string) jobs.Info {
	t.Helper()
	select {
	case info := <-started:
		return info
	case <-time.After(60 * time.Second):
		t.Fatal(what)
		return jobs.Info{}
	}
}
