package scheduler_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// manualLedgers returns the ledger of a job and its ledger of manual runs,
// through a Client of its own.
func manualLedgers(t *testing.T, srv *redistest.Server, job string) (*fleet.Store, *fleet.Ledger, *fleet.Ledger) {
	t.Helper()
	c, err := lock.New(srv.Client(), lock.WithClientID("test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	store := fleet.New(c)
	g, err := store.Ledger(job, job)
	if err != nil {
		t.Fatal(err)
	}
	m, err := store.Ledger(job, job+"!manual", fleet.WithSharedHistory(job))
	if err != nil {
		t.Fatal(err)
	}
	return store, g, m
}

// Concurrent triggers of a job with params from two senders, on three
// replicas: their messages reach the replicas in any order, yet each
// request runs exactly once, with its own params.
func TestTriggerParamsConcurrentNoneLost(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job, n = "report", 20
	j := newJournal()
	js := []scheduler.Job{{Name: job, Schedule: "@yearly", Run: j.fn(nil), Params: []string{"customer"}}}
	fl, _ := fleetWith(t, srv, 3, nil, nil, js...)
	var senders [2]*replica
	for i := range senders {
		senders[i] = newRedisReplica(t, srv, fmt.Sprintf("cli%d", i), nil)
		senders[i].add(t, js...)
	}
	testkit.Eventually(t, 20*time.Second, "the fleet running", func() bool { return allRunning(fl) })
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := senders[i%2].s.TriggerParams(ctx, job, map[string]string{"customer": strconv.Itoa(i)}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	_, _, m := manualLedgers(t, srv, job)
	testkit.Eventually(t, 60*time.Second, "every request done", func() bool {
		st, err := m.State(ctx)
		return err == nil && st.Done == n && st.Running <= st.Done
	})
	stopAll(t, fl...)
	got := map[string]int{}
	for _, x := range j.all() {
		got[x.info.Params["customer"]]++
	}
	for i := range n {
		if c := got[strconv.Itoa(i)]; c != 1 {
			t.Errorf("customer %d ran %d times; want once (all runs: %v)", i, c, got)
		}
	}
	if len(j.all()) != n {
		t.Errorf("%d runs of %d requests", len(j.all()), n)
	}
}

// A request whose message no replica hears (stored, then not published, as
// when the message is lost or nobody listens) runs, with its params,
// before the next request that is heard.
func TestTriggerParamsMissedMessage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job = "report"
	_, g, m := manualLedgers(t, srv, job)
	j := newJournal()
	r := newRedisReplica(t, srv, "replica", nil)
	r.add(t, scheduler.Job{Name: job, Schedule: "@yearly", Run: j.fn(nil), Params: []string{"customer"}})
	r.start()
	testkit.Eventually(t, 10*time.Second, "the replica running", r.s.Running)
	if n, err := g.Trigger(ctx, m, map[string]string{"customer": "unheard"}); err != nil || n != 1 {
		t.Fatalf("Trigger = %d, %v; want 1", n, err)
	}
	if _, err := r.s.TriggerParams(ctx, job, map[string]string{"customer": "heard"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		trigger int64
		who     string
	}{{1, "unheard"}, {2, "heard"}} {
		x := j.awaitStart(t, 20*time.Second)
		if x.info.Trigger != want.trigger || x.info.Params["customer"] != want.who {
			t.Fatalf("run %+v; want trigger %d with customer %s", x.info, want.trigger, want.who)
		}
	}
	testkit.Eventually(t, 10*time.Second, "both runs in the history", func() bool {
		runs, err := r.s.History(ctx, job, 0, "")
		return err == nil && len(runs) == 2 && runs[0].Params["customer"] == "heard" && runs[1].Params["customer"] == "unheard"
	})
}

// A manual run of a job with params whose request the store no longer
// has (Redis restarted empty between the trigger and the claim) does not
// run without them: it ends, done, with the outcome failed and says why.
func TestTriggerParamsRecordLost(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job = "report"
	store, _, _ := manualLedgers(t, srv, job)
	j := newJournal()
	r := newRedisReplica(t, srv, "replica", nil)
	r.add(t, scheduler.Job{Name: job, Schedule: "@yearly", Run: j.fn(nil), Params: []string{"customer"}})
	r.start()
	testkit.Eventually(t, 10*time.Second, "the replica running", r.s.Running)
	// The message of request 1, whose record the store lost.
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
	if got := runs[0]; got.Trigger != 1 || got.Outcome != scheduler.OutcomeFailed || !strings.Contains(got.Error, "no record of this request") {
		t.Fatalf("history %+v; want trigger 1, outcome failed, a reason that says the request's record is gone", got)
	}
	if xs := j.all(); len(xs) != 0 {
		t.Fatalf("ran %+v; want no run without its params", xs)
	}
}

// A job with params that follows another (Job.After) runs after its
// parent's manual run with the parent's params it declares, and with its
// own on a request of its own.
func TestTriggerParamsChainChild(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	j := newJournal()
	fl := chainFleet(t, srv, 1,
		scheduler.Job{Name: "extract", Schedule: "0 0 1 1 *", Run: j.fn(nil), Params: []string{"customer"}},
		scheduler.Job{Name: "load", After: []string{"extract"}, Run: j.fn(nil), Params: []string{"customer"}})
	testkit.Eventually(t, 10*time.Second, "the replica running", fl[0].s.Running)
	if _, err := fl[0].s.TriggerParams(ctx, "load", map[string]string{"customer": "own"}); err != nil {
		t.Fatal(err)
	}
	if _, err := fl[0].s.TriggerParams(ctx, "extract", map[string]string{"customer": "parent"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "extract once, load twice", func() bool {
		by := j.byJob()
		return len(by["extract"]) == 1 && len(by["load"]) == 2
	})
	fl[0].stop(t)
	got := map[string]string{}
	for _, x := range j.all() {
		got[x.info.Job+" "+x.info.Parent] = x.info.Params["customer"]
	}
	for k, v := range got {
		switch {
		case k == "extract " || k == "load ":
			if v != "parent" && v != "own" || (k == "extract ") != (v == "parent") {
				t.Errorf("%s ran with customer %q", k, v)
			}
		case strings.HasPrefix(k, "load extract@"):
			if v != "parent" {
				t.Errorf("load after extract's manual run got customer %q; want the parent's, %q", v, "parent")
			}
		default:
			t.Errorf("unexpected run %q (customer %q)", k, v)
		}
	}
	runs, err := fl[0].s.History(ctx, "load", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Outcome != scheduler.OutcomeRan {
			t.Errorf("load's run %+v: want ran", r)
		}
	}
}
