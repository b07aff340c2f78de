package scheduler_test

import (
	"maps"
	"testing"
	"time"

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
	ctx := testkit.Context(t)
	if _, err := r.s.TriggerParams(ctx, "load", map[string]string{"customer": "42"}); err != nil {
		t.Fatal(err)
	}
	awaitCond(t, 30*time.Second, "load's own manual run #1", func() bool { return len(j.byJob()["load"]) == 1 })
	if _, err := r.s.TriggerParams(ctx, "extract", map[string]string{"customer": "7", "date": "2026-01-01"}); err != nil {
		t.Fatal(err)
	}
	awaitCond(t, 30*time.Second, "load and audit after extract's manual run #1", func() bool {
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
