package scheduler_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/scheduler"
)

// A manual request made before a reload gave the job params (its record
// has none) runs with none, not as a request whose record the store
// lost.
func TestTriggerParamsRequestMadeBeforeTheJobHadParams(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job = "report"
	store, g, m := manualLedgers(t, srv, job)
	// Request 1, as a replica of the job without params records it.
	if n, err := g.Trigger(ctx, m, nil); err != nil || n != 1 {
		t.Fatalf("Trigger = %d, %v", n, err)
	}
	j := newJournal()
	r := newRedisReplica(t, srv, "replica", nil)
	r.add(t, scheduler.Job{Name: job, Schedule: "@yearly", Run: j.fn(nil), Params: []string{"customer"}})
	r.start()
	testkit.Eventually(t, 10*time.Second, "the replica running", r.s.Running)
	msg := strings.Join([]string{"trigger", job, "1", strconv.FormatInt(time.Now().UnixMilli(), 10)}, "\n")
	if heard, err := store.Publish(ctx, "control", msg); err != nil || heard == 0 {
		t.Fatalf("Publish = %d, %v", heard, err)
	}
	var runs []scheduler.Run
	testkit.Eventually(t, 20*time.Second, "the request's end in the history", func() bool {
		var err error
		runs, err = r.s.History(ctx, job, 0, "")
		return err == nil && len(runs) == 1
	})
	if got := runs[0]; got.Trigger != 1 || got.Outcome != scheduler.OutcomeRan || len(got.Params) != 0 {
		t.Fatalf("history %+v; want trigger 1, outcome ok, no params", got)
	}
	if xs := j.all(); len(xs) != 1 || len(xs[0].info.Params) != 0 {
		t.Fatalf("ran %+v; want one run without params", xs)
	}
}
