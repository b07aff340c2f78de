package scheduler_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/scheduler"
)

// perReplica groups executions by tick and replica.
func perReplica(xs []execution) map[time.Time]map[string]int {
	out := make(map[time.Time]map[string]int)
	for _, x := range xs {
		if out[x.info.Tick] == nil {
			out[x.info.Tick] = make(map[string]int)
		}
		out[x.info.Tick][x.info.Replica]++
	}
	return out
}

// ranOnAll reports whether tick ran on every replica of ids.
func ranOnAll(j *journal, tick time.Time, ids ...string) bool {
	by := perReplica(j.all())[tick]
	for _, id := range ids {
		if by[id] == 0 {
			return false
		}
	}
	return true
}

// TestEveryReplicaRunsEachTickOnEachReplica: with Replicas all, three
// replicas run every tick, each once, also when one of them restarts with
// the same replica id (its own ledger says what it ran), and every run is
// in the job's history with its replica.
func TestEveryReplicaRunsEachTickOnEachReplica(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	job := func() scheduler.Job {
		return scheduler.Job{Name: "cache", Schedule: "@every 1s", Replicas: scheduler.ReplicasAll,
			Misfire: scheduler.MisfireRunOnce, Run: j.fn(nil)}
	}
	ids := []string{"r1", "r2", "r3"}
	fleet := make(map[string]*replica)
	for _, id := range ids {
		r := newRedisReplica(t, srv, id, nil)
		r.add(t, job())
		fleet[id] = r
	}
	for _, r := range fleet {
		r.start()
	}
	// Wait for four ticks that ran on every replica.
	var full []time.Time
	testkit.Eventually(t, 30*time.Second, "four ticks run on all three replicas", func() bool {
		full = full[:0]
		for tick := range perReplica(j.all()) {
			if ranOnAll(j, tick, ids...) {
				full = append(full, tick)
			}
		}
		return len(full) >= 4
	})
	// r2 restarts with the same id: its first tick after the restart is
	// one it has not run, and the tick it ran last is not run again.
	fleet["r2"].stop(t)
	stoppedAt := time.Now()
	// Every tick from the first that ran on all three to r2's stop ran on
	// each: three runs per tick.
	slices.SortFunc(full, func(a, b time.Time) int { return a.Compare(b) })
	for tick := full[0]; tick.Before(stoppedAt.Add(-time.Second)); tick = tick.Add(time.Second) {
		if !ranOnAll(j, tick, ids...) {
			t.Errorf("tick %s before r2's stop did not run on all three replicas: %v", fmtT(tick), perReplica(j.all())[tick])
		}
	}
	r2 := newRedisReplica(t, srv, "r2", nil)
	r2.add(t, job())
	r2.start()
	fleet["r2"] = r2
	testkit.Eventually(t, 30*time.Second, "a tick after the restart runs on all three replicas", func() bool {
		for tick := range perReplica(j.all()) {
			if tick.After(stoppedAt.Add(time.Second)) && ranOnAll(j, tick, ids...) {
				return true
			}
		}
		return false
	})
	for _, r := range fleet {
		r.stop(t)
	}
	xs := j.all()
	for tick, by := range perReplica(xs) {
		for id, n := range by {
			if n > 1 {
				t.Errorf("tick %s ran %d times on %s", fmtT(tick), n, id)
			}
		}
	}
	// No fleet-wide lock: the runs of one tick on the three replicas are
	// three runs, each with its replica in the history.
	runs, err := r2.s.History(context.Background(), "cache", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[string]map[time.Time]int)
	for _, r := range runs {
		if r.Outcome != scheduler.OutcomeRan {
			continue
		}
		if seen[r.Replica] == nil {
			seen[r.Replica] = make(map[time.Time]int)
		}
		seen[r.Replica][r.Tick]++
		if seen[r.Replica][r.Tick] > 1 {
			t.Errorf("history: tick %s ran twice on %s", fmtT(r.Tick), r.Replica)
		}
	}
	for _, id := range ids {
		if len(seen[id]) == 0 {
			t.Errorf("history: no run of %s: %+v", id, runs)
		}
	}
	views := r2.s.Jobs(context.Background())
	if len(views) != 1 || len(views[0].PerReplica) != 3 {
		t.Fatalf("JobView.PerReplica = %+v, want one entry per replica", views)
	}
	for i, r := range views[0].PerReplica {
		if r.Replica != ids[i] || r.Outcome != scheduler.OutcomeRan {
			t.Errorf("PerReplica[%d] = %s %s, want %s ran", i, r.Replica, r.Outcome, ids[i])
		}
	}
}

// TestEveryReplicaOverlapAndTimeoutPerReplica: overlap and timeout apply to
// each replica's runs on their own: the replicas run the same tick at the
// same time (no fleet-wide lock), none runs two ticks at once (overlap
// skip), and a run past its timeout fails on its replica.
func TestEveryReplicaOverlapAndTimeoutPerReplica(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	ids := []string{"r1", "r2", "r3"}
	var fleet []*replica
	for _, id := range ids {
		r := newRedisReplica(t, srv, id, nil)
		r.add(t,
			// Runs 2.5 ticks: each replica skips the ticks in between.
			scheduler.Job{Name: "slow", Schedule: "@every 1s", Replicas: scheduler.ReplicasAll, Run: j.fn(func(ctx context.Context) error {
				select {
				case <-time.After(2500 * time.Millisecond):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})},
			// Never ends by itself: its timeout ends it on every replica.
			scheduler.Job{Name: "hang", Schedule: "@every 1s", Replicas: scheduler.ReplicasAll, Timeout: 300 * time.Millisecond,
				Run: j.fn(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })},
		)
		fleet = append(fleet, r)
	}
	for _, r := range fleet {
		r.start()
	}
	testkit.Eventually(t, 40*time.Second, "two runs of slow on each replica, and a timeout of hang on each", func() bool {
		slow, hang := make(map[string]int), make(map[string]int)
		for _, x := range j.all() {
			switch {
			case x.info.Job == "slow" && x.err == nil:
				slow[x.info.Replica]++
			case x.info.Job == "hang" && errors.Is(x.err, context.DeadlineExceeded):
				hang[x.info.Replica]++
			}
		}
		for _, id := range ids {
			if slow[id] < 2 || hang[id] < 1 {
				return false
			}
		}
		return true
	})
	for _, r := range fleet {
		r.stop(t)
	}
	byRep := make(map[string][]execution)
	byTick := make(map[time.Time][]execution)
	for _, x := range j.all() {
		if x.info.Job != "slow" || x.err != nil {
			continue
		}
		byRep[x.info.Replica] = append(byRep[x.info.Replica], x)
		byTick[x.info.Tick] = append(byTick[x.info.Tick], x)
	}
	for id, xs := range byRep {
		for a := range xs {
			for b := range xs {
				if a < b && xs[a].start.Before(xs[b].end) && xs[b].start.Before(xs[a].end) {
					t.Errorf("replica %s ran ticks %s and %s of slow at once", id, fmtT(xs[a].info.Tick), fmtT(xs[b].info.Tick))
				}
			}
		}
	}
	concurrent := false
	for _, xs := range byTick {
		if len(xs) > 1 && xs[0].start.Before(xs[1].end) && xs[1].start.Before(xs[0].end) {
			concurrent = true
		}
	}
	if !concurrent {
		t.Errorf("no tick of slow ran on two replicas at once: a fleet-wide lock? %v", byTick)
	}
	runs, err := fleet[0].s.History(context.Background(), "hang", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	failed := make(map[string]bool)
	for _, r := range runs {
		if r.Outcome == scheduler.OutcomeFailed {
			failed[r.Replica] = true
		}
	}
	if len(failed) != 3 {
		t.Errorf("hang failed in the history on %v, want all three replicas", failed)
	}
}

// TestEveryReplicaValidate: replicas all refuses what needs a fleet-wide
// lock or count, and a bad value is named.
func TestEveryReplicaValidate(t *testing.T) {
	t.Parallel()
	run := jobs.Func(func(context.Context) error { return nil })
	for _, tc := range []struct {
		name  string
		job   scheduler.Job
		field string
	}{
		{"bad value", scheduler.Job{Replicas: "some"}, "replicas"},
		{"max_concurrency", scheduler.Job{Replicas: scheduler.ReplicasAll, MaxConcurrency: 2}, "max_concurrency"},
		{"pause_after_failures", scheduler.Job{Replicas: scheduler.ReplicasAll, PauseAfterFailures: 3}, "pause_after_failures"},
		{"handoff", scheduler.Job{Replicas: scheduler.ReplicasAll, OnShutdown: scheduler.ShutdownHandoff}, "on_shutdown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := tc.job
			j.Name, j.Schedule, j.Run = "x", "@every 1s", run
			err := j.Validate()
			var fe *scheduler.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, scheduler.ErrInvalid) {
				t.Fatalf("Validate() = %v, want a FieldError of %s", err, tc.field)
			}
			if tc.field == "replicas" && !strings.Contains(err.Error(), `"some"`) {
				t.Errorf("error %q does not name the value", err)
			}
		})
	}
	// Neither follows nor is followed: after on such a job, and after that
	// names one, are refused.
	child := scheduler.Job{Name: "x", After: []string{"p"}, Run: run, Replicas: scheduler.ReplicasAll}
	var fe *scheduler.FieldError
	if err := child.Validate(); !errors.As(err, &fe) || fe.Field != "after" || !strings.Contains(err.Error(), "every replica") {
		t.Fatalf("Validate() of a job after another with replicas all = %v, want a FieldError of after", err)
	}
	parent := scheduler.Job{Name: "p", Schedule: "@every 1s", Run: run, Replicas: scheduler.ReplicasAll}
	follower := scheduler.Job{Name: "c", After: []string{"p"}, Run: run}
	if err := scheduler.CheckChains([]scheduler.Job{parent, follower}); !errors.As(err, &fe) || fe.Job != "c" || fe.Field != "after" || !strings.Contains(err.Error(), "every replica") {
		t.Fatalf("CheckChains() of a job after one with replicas all = %v, want a FieldError of c's after", err)
	}
	j := scheduler.Job{Name: "x", Schedule: "@every 1s", Run: run, Replicas: scheduler.ReplicasAll}
	if err := j.Validate(); err != nil || j.OnShutdown != scheduler.ShutdownAbandon {
		t.Fatalf("Validate() = %v, OnShutdown %q; want nil, abandon", err, j.OnShutdown)
	}
	j = scheduler.Job{Name: "x", Schedule: "@every 1s", Run: run}
	if err := j.Validate(); err != nil || j.Replicas != scheduler.ReplicasOne {
		t.Fatalf("Validate() = %v, Replicas %q; want nil, one", err, j.Replicas)
	}
}

// TestEveryReplicaPauseTriggerAndMetrics: a pause holds the ticks of a job
// that runs on every replica on each of them, a manual run runs once on
// each, and the metrics of its runs carry the replica.
func TestEveryReplicaPauseTriggerAndMetrics(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	j := newJournal()
	ids := []string{"r1", "r2"}
	var reps []*replica
	meters := make(map[string]*meter)
	for _, id := range ids {
		m := newMeter()
		r := newRedisReplica(t, srv, id, nil, m.option())
		r.add(t,
			scheduler.Job{Name: "warm", Schedule: "@every 1s", Replicas: scheduler.ReplicasAll, Run: j.fn(nil)},
			scheduler.Job{Name: "flush", Schedule: "@yearly", Replicas: scheduler.ReplicasAll, Run: j.fn(nil)},
		)
		reps, meters[id] = append(reps, r), m
	}
	for _, r := range reps {
		r.start()
	}
	count := func(job string, match func(execution) bool) map[string]int {
		out := make(map[string]int)
		for _, x := range j.all() {
			if x.info.Job == job && match(x) {
				out[x.info.Replica]++
			}
		}
		return out
	}
	testkit.Eventually(t, 30*time.Second, "warm runs on both replicas", func() bool {
		n := count("warm", func(execution) bool { return true })
		return n["r1"] > 0 && n["r2"] > 0
	})
	for _, id := range ids {
		// Counted as the run finishes, just after the job func returns.
		testkit.Eventually(t, 10*time.Second, id+": lockcron.job.runs of warm with lockcron.replica="+id, func() bool {
			return meters[id].counter(t, "lockcron.job.runs", attribute.String("lockcron.job", "warm"),
				attribute.String("lockcron.outcome", "ran"), attribute.String("lockcron.replica", id)) > 0
		})
	}

	// A manual run: once on each replica.
	testkit.Eventually(t, 10*time.Second, "both replicas subscribed", func() bool { return reps[0].s.Running() && reps[1].s.Running() })
	if _, err := reps[0].s.Trigger(ctx, "flush"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "flush's manual run on both replicas", func() bool {
		n := count("flush", func(x execution) bool { return x.info.Trigger == 1 })
		return n["r1"] == 1 && n["r2"] == 1
	})

	// A pause: no tick after it runs anywhere, each replica records its
	// ticks paused; a resume runs them again.
	if err := reps[1].s.Pause(ctx, "warm", true, testPause); err != nil {
		t.Fatal(err)
	}
	pausedAt := time.Now()
	testkit.Eventually(t, 30*time.Second, "a tick after the pause recorded paused on both replicas", func() bool {
		for _, r := range reps {
			st := statusOf(t, r.s, "warm")
			if st.LastOutcome != scheduler.OutcomePaused || !st.LastTick.After(pausedAt.Add(time.Second)) {
				return false
			}
		}
		return true
	})
	if n := count("warm", func(x execution) bool { return x.info.Tick.After(pausedAt) }); len(n) > 0 {
		t.Errorf("ticks after the pause ran: %v", n)
	}
	if err := reps[0].s.Pause(ctx, "warm", false, fleet.PauseInfo{}); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	testkit.Eventually(t, 30*time.Second, "warm runs again on both replicas after the resume", func() bool {
		n := count("warm", func(x execution) bool { return x.info.Tick.After(resumedAt) })
		return n["r1"] > 0 && n["r2"] > 0
	})
	for _, r := range reps {
		r.stop(t)
	}
	if n := count("flush", func(x execution) bool { return true }); n["r1"] != 1 || n["r2"] != 1 {
		t.Errorf("flush ran %v, want once on each replica", n)
	}
}
