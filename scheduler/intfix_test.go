package scheduler_test

import (
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/scheduler"
)

// A child paused while its parent's manual runs #1 and #2 finish (the
// second trigger drops request #1's record) runs after each with the
// params of that run, and so does its own child: the parent's chain
// record carries them.
func TestChainChildParamsAfterTheParentsNextRequest(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	r := newRedisReplica(t, srv, "r1", nil)
	r.add(t,
		scheduler.Job{Name: "extract", Schedule: "0 0 1 1 *", Params: []string{"customer"}, Run: j.fn(nil)},
		scheduler.Job{Name: "load", After: []string{"extract"}, Params: []string{"customer"}, MisfireGrace: time.Hour, Run: j.fn(nil)},
		scheduler.Job{Name: "report", After: []string{"load"}, Params: []string{"customer"}, MisfireGrace: time.Hour, Run: j.fn(nil)})
	r.start()
	testkit.Eventually(t, 30*time.Second, "r1 running (its subscriptions confirmed)", r.s.Running)
	ctx := testkit.Context(t)
	if err := r.s.Pause(ctx, "load", true, fleet.PauseInfo{By: "test", Note: "hold the child"}); err != nil {
		t.Fatal(err)
	}
	// finished waits for extract's history to hold n runs: the finish that
	// records one marks its request done in the same step.
	finished := func(n int) {
		testkit.Eventually(t, 30*time.Second, "extract's run #"+strconv.Itoa(n)+" recorded", func() bool {
			runs, err := r.s.History(ctx, "extract", 0, "")
			return err == nil && len(runs) == n
		})
	}
	if _, err := r.s.TriggerParams(ctx, "extract", map[string]string{"customer": "7"}); err != nil {
		t.Fatal(err)
	}
	finished(1)
	if _, err := r.s.TriggerParams(ctx, "extract", map[string]string{"customer": "8"}); err != nil {
		t.Fatal(err)
	}
	finished(2)
	if err := r.s.Pause(ctx, "load", false, fleet.PauseInfo{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "load and report after both", func() bool {
		by := j.byJob()
		return len(by["load"]) == 2 && len(by["report"]) == 2
	})
	r.stop(t)
	by := j.byJob()
	for _, job := range []string{"load", "report"} {
		for i, want := range []string{"7", "8"} {
			x := by[job][i].info
			if x.Trigger != int64(i+1) || x.Parent == "" || !maps.Equal(x.Params, map[string]string{"customer": want}) {
				t.Errorf("%s after extract's #%d: trigger %d parent %q params %v, want customer=%s", job, i+1, x.Trigger, x.Parent, x.Params, want)
			}
		}
	}
	for _, job := range []string{"load", "report"} {
		runs, err := r.s.History(ctx, job, 0, "")
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range runs {
			if x.Outcome != scheduler.OutcomeRan {
				t.Errorf("%s: run %+v, want ok", job, x)
			}
		}
	}
}

// A child's run after a parent's manual run whose params neither the
// chain record (one written before it carried them) nor the request's
// record (dropped by the next trigger) has ends with the outcome error and
// says why, never without its params (nor another run's, when a claim of
// the next one takes it over).
func TestChainChildParamsNotFound(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	_, _, m := manualLedgers(t, srv, "extract")
	j := newJournal()
	r := newRedisReplica(t, srv, "r1", nil)
	r.add(t,
		scheduler.Job{Name: "extract", Schedule: "0 0 1 1 *", Params: []string{"customer"}, Run: j.fn(nil)},
		scheduler.Job{Name: "load", After: []string{"extract"}, Params: []string{"customer"}, MisfireGrace: time.Hour, Run: j.fn(nil)})
	r.start()
	testkit.Eventually(t, 30*time.Second, "r1 running (its subscriptions confirmed)", r.s.Running)
	ctx := testkit.Context(t)
	if err := r.s.Pause(ctx, "load", true, fleet.PauseInfo{By: "test", Note: "hold the child"}); err != nil {
		t.Fatal(err)
	}
	finished := func(n int) {
		testkit.Eventually(t, 30*time.Second, "extract's run #"+strconv.Itoa(n)+" recorded", func() bool {
			runs, err := r.s.History(ctx, "extract", 0, "")
			return err == nil && len(runs) == n
		})
	}
	if _, err := r.s.TriggerParams(ctx, "extract", map[string]string{"customer": "7"}); err != nil {
		t.Fatal(err)
	}
	finished(1)
	// Run #1's chain member as a finish before params wrote it: 4 fields.
	rdb, key := srv.Client(), m.Key()+":chain"
	ms, err := rdb.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil || len(ms) != 1 || strings.Count(ms[0].Member.(string), "\n") != 4 {
		t.Fatalf("chain record %q: %v, %v; want one member of 5 fields", key, ms, err)
	}
	old := ms[0].Member.(string)
	if err := rdb.ZRem(ctx, key, old).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ZAdd(ctx, key, redis.Z{Score: ms[0].Score, Member: old[:strings.LastIndex(old, "\n")]}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.s.TriggerParams(ctx, "extract", map[string]string{"customer": "8"}); err != nil {
		t.Fatal(err)
	}
	finished(2)
	if err := r.s.Pause(ctx, "load", false, fleet.PauseInfo{}); err != nil {
		t.Fatal(err)
	}
	// The run after #1 ends failed, done, not run (not with #2's params);
	// the run after #2 is not held up behind it.
	testkit.Eventually(t, 60*time.Second, "load's run after #1 ended failed, and after #2 ran", func() bool {
		runs, err := r.s.History(ctx, "load", 0, "")
		lost, ran := 0, 0
		for _, x := range runs {
			switch {
			case x.Trigger == 1 && x.Outcome == scheduler.OutcomeFailed && strings.Contains(x.Error, "no record of the parameters of the manual run of extract"):
				lost++
			case x.Trigger == 2 && x.Outcome == scheduler.OutcomeRan:
				ran++
			}
		}
		return err == nil && lost == 1 && ran == 1
	})
	r.stop(t)
	for _, x := range j.byJob()["load"] {
		if x.info.Trigger == 1 {
			t.Errorf("load ran after extract's #1 with params %v, want not run", x.info.Params)
		}
		if x.info.Trigger == 2 && x.info.Params["customer"] != "8" {
			t.Errorf("load ran after extract's #2 with params %v, want customer 8", x.info.Params)
		}
	}
}
