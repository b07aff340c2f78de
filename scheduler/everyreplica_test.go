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
	"github.com/lockcron/lockcron/lock"
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
	// Taken before the stop: the stop may take a while under load, and
	// the ticks of that while must not count as before it.
	stoppedAt := time.Now()
	fleet["r2"].stop(t)
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
		{"params", scheduler.Job{Replicas: scheduler.ReplicasAll, Params: []string{"customer"}}, "params"},
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

// outcomesOf returns the job's history entries of outcome, newest first.
func outcomesOf(t *testing.T, s *scheduler.Scheduler, job string, outcome scheduler.Outcome) []scheduler.Run {
	t.Helper()
	runs, err := s.History(context.Background(), job, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []scheduler.Run
	for _, r := range runs {
		if r.Outcome == outcome {
			out = append(out, r)
		}
	}
	return out
}

// ticksIn is how many ticks an entry of skipped ticks stands for.
func ticksIn(r scheduler.Run) int64 {
	if r.Count == 0 {
		return 1
	}
	return r.Count
}

// TestEveryReplicaPausedTicksOnceForTheFleet: the paused ticks of a job
// that runs on every replica are recorded once for the fleet, one entry
// for the run of them, not one per replica and tick; and a paused tick
// renews the lifetime of the job's ledger, which holds the pause and which
// no claim renews.
func TestEveryReplicaPausedTicksOnceForTheFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	j := newJournal()
	ids := []string{"r1", "r2", "r3"}
	var reps []*replica
	for _, id := range ids {
		r := newRedisReplica(t, srv, id, nil)
		r.add(t, scheduler.Job{Name: "idle", Schedule: "@every 1s", Replicas: scheduler.ReplicasAll, Run: j.fn(nil)})
		reps = append(reps, r)
	}
	for _, r := range reps {
		r.start()
	}
	testkit.Eventually(t, 30*time.Second, "idle runs on all three replicas", func() bool {
		for tick := range perReplica(j.all()) {
			if ranOnAll(j, tick, ids...) {
				return true
			}
		}
		return false
	})
	if err := reps[0].s.Pause(ctx, "idle", true, testPause); err != nil {
		t.Fatal(err)
	}
	// The job's ledger as if no claim had renewed it for weeks: its
	// lifetime is about to end, and the pause with it.
	keys, err := srv.Client().Keys(ctx, "*}:ledger:idle").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("the job's ledger: keys %v, %v", keys, err)
	}
	if err := srv.Client().PExpire(ctx, keys[0], time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 40*time.Second, "six ticks recorded paused", func() bool {
		n := int64(0)
		for _, r := range outcomesOf(t, reps[0].s, "idle", scheduler.OutcomePaused) {
			n += ticksIn(r)
		}
		return n >= 6
	})
	for _, r := range reps {
		r.stop(t)
	}
	paused := outcomesOf(t, reps[0].s, "idle", scheduler.OutcomePaused)
	// One entry; two if a run under way at the pause ended after the
	// first paused tick was recorded.
	if len(paused) > 2 {
		t.Errorf("%d history entries of paused ticks, want one for the run of them: %+v", len(paused), paused)
	}
	for _, r := range paused {
		// Once per tick: as many as the ticks from First to Tick.
		first := r.First
		if first.IsZero() {
			first = r.Tick
		}
		if want := int64(r.Tick.Sub(first)/time.Second) + 1; ticksIn(r) != want {
			t.Errorf("paused entry %s..%s counts %d ticks, want %d (once each for the fleet)", fmtT(first), fmtT(r.Tick), ticksIn(r), want)
		}
	}
	if ttl, err := srv.Client().PTTL(ctx, keys[0]).Result(); err != nil || ttl < 24*time.Hour {
		t.Errorf("the job's ledger expires in %v (%v): a paused tick did not renew it", ttl, err)
	}
}

// TestEveryReplicaBusyTicksCoalesce: a job that runs on every replica and
// whose runs outlast many ticks has each replica record its busy ticks;
// the three replicas' entries come in turn, and each replica's coalesce
// all the same: one entry per replica, not one per replica and tick.
func TestEveryReplicaBusyTicksCoalesce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	ids := []string{"r1", "r2", "r3"}
	var reps []*replica
	for _, id := range ids {
		r := newRedisReplica(t, srv, id, nil)
		r.add(t, scheduler.Job{Name: "long", Schedule: "@every 1s", Replicas: scheduler.ReplicasAll,
			Run: j.fn(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })})
		reps = append(reps, r)
	}
	for _, r := range reps {
		r.start()
	}
	testkit.Eventually(t, 40*time.Second, "four busy ticks recorded by each replica", func() bool {
		n := make(map[string]int64)
		for _, r := range outcomesOf(t, reps[0].s, "long", scheduler.OutcomeSkippedBusy) {
			n[r.Replica] += ticksIn(r)
		}
		return n["r1"] >= 4 && n["r2"] >= 4 && n["r3"] >= 4
	})
	for _, r := range reps {
		r.stop(t)
	}
	busy := outcomesOf(t, reps[0].s, "long", scheduler.OutcomeSkippedBusy)
	per := make(map[string]int)
	for _, r := range busy {
		per[r.Replica]++
	}
	for _, id := range ids {
		if per[id] != 1 {
			t.Errorf("%s has %d entries of busy ticks, want one coalesced: %+v", id, per[id], busy)
		}
	}
}

// TestEveryReplicaMisfireRunOnceAfterDowntime: a replica down for several
// ticks of a job that runs on every replica, with MisfireRunOnce, runs one
// catch-up run of the latest tick it missed when it starts again, and
// records the others missed in the history with its replica; the replica
// that stayed up missed nothing.
func TestEveryReplicaMisfireRunOnceAfterDowntime(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	job := scheduler.Job{Name: "rotate", Schedule: "@every 1s", Replicas: scheduler.ReplicasAll,
		Misfire: scheduler.MisfireRunOnce, MisfireGrace: time.Minute, Run: j.fn(nil)}
	r1, r2 := newRedisReplica(t, srv, "r1", nil), newRedisReplica(t, srv, "r2", nil)
	r1.add(t, job)
	r2.add(t, job)
	r1.start()
	r2.start()
	ran := func(id string, after time.Time) []time.Time {
		var out []time.Time
		for _, x := range j.all() {
			if x.info.Replica == id && x.info.Tick.After(after) {
				out = append(out, x.info.Tick)
			}
		}
		return out
	}
	testkit.Eventually(t, 30*time.Second, "rotate runs on r2", func() bool { return len(ran("r2", time.Time{})) > 0 })
	r2.stop(t)
	stoppedAt := time.Now()
	testkit.Eventually(t, 30*time.Second, "r1 runs four ticks while r2 is down", func() bool { return len(ran("r1", stoppedAt)) >= 4 })
	last := slices.MaxFunc(ran("r2", time.Time{}), func(a, b time.Time) int { return a.Compare(b) })
	restartedAt := time.Now()
	r2 = newRedisReplica(t, srv, "r2", nil)
	r2.add(t, job)
	r2.start()
	testkit.Eventually(t, 30*time.Second, "r2 runs a tick after its restart", func() bool { return len(ran("r2", restartedAt.Add(time.Second))) > 0 })
	r1.stop(t)
	r2.stop(t)
	// Between r2's last tick before the stop and its first scheduled one
	// after the restart: the catch-up run of the latest missed tick alone.
	var down []time.Time
	for _, tick := range ran("r2", last) {
		if !tick.After(restartedAt) {
			down = append(down, tick)
		}
	}
	if len(down) != 1 {
		t.Errorf("r2 ran ticks %v of its downtime, want one catch-up run", down)
	}
	missed := outcomesOf(t, r1.s, "rotate", scheduler.OutcomeMissed)
	if len(missed) != 1 || missed[0].Replica != "r2" || missed[0].Missed < 2 {
		t.Fatalf("missed entries %+v, want one of r2 with two or more ticks", missed)
	}
	if len(down) == 1 && !missed[0].Tick.Before(down[0]) {
		t.Errorf("missed up to %s, not before the catch-up run's tick %s", fmtT(missed[0].Tick), fmtT(down[0]))
	}
}

// TestEveryReplicaManualRunNotHeard: a manual run of a job that runs on
// every replica whose request a replica did not hear (here: no replica,
// the request is counted in the job's ledger and never published) runs on
// each replica all the same, once, found by the ledger read before its
// next claim; a request made before a replica started is not run there.
func TestEveryReplicaManualRunNotHeard(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	j := newJournal()
	c, err := lock.New(srv.Client(), lock.WithClientID("operator"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	store := fleet.New(c)
	ledger, err := store.Ledger("tidy", "tidy")
	if err != nil {
		t.Fatal(err)
	}
	manual, err := store.Ledger("tidy", "tidy!manual")
	if err != nil {
		t.Fatal(err)
	}
	// Before any replica starts: not theirs to run.
	if _, err := ledger.Trigger(ctx, manual, nil); err != nil {
		t.Fatal(err)
	}
	ids := []string{"r1", "r2"}
	var reps []*replica
	for _, id := range ids {
		r := newRedisReplica(t, srv, id, nil)
		r.add(t, scheduler.Job{Name: "tidy", Schedule: "@every 1s", Replicas: scheduler.ReplicasAll, Run: j.fn(nil)})
		reps = append(reps, r)
	}
	for _, r := range reps {
		r.start()
	}
	testkit.Eventually(t, 30*time.Second, "tidy runs a tick on both replicas", func() bool {
		for tick := range perReplica(j.all()) {
			if ranOnAll(j, tick, ids...) {
				return true
			}
		}
		return false
	})
	if _, err := ledger.Trigger(ctx, manual, nil); err != nil {
		t.Fatal(err)
	}
	manuals := func() map[string]map[int64]int {
		out := make(map[string]map[int64]int)
		for _, x := range j.all() {
			if x.info.Trigger != 0 {
				if out[x.info.Replica] == nil {
					out[x.info.Replica] = make(map[int64]int)
				}
				out[x.info.Replica][x.info.Trigger]++
			}
		}
		return out
	}
	testkit.Eventually(t, 30*time.Second, "manual run 2 on both replicas", func() bool {
		m := manuals()
		return m["r1"][2] > 0 && m["r2"][2] > 0
	})
	// A few ticks more, each reading the ledger: the run stays one.
	after := time.Now()
	testkit.Eventually(t, 30*time.Second, "three more ticks on both replicas", func() bool {
		n := 0
		for tick := range perReplica(j.all()) {
			if tick.After(after) && ranOnAll(j, tick, ids...) {
				n++
			}
		}
		return n >= 3
	})
	for _, r := range reps {
		r.stop(t)
	}
	for _, id := range ids {
		if m := manuals()[id]; len(m) != 1 || m[2] != 1 {
			t.Errorf("%s ran manual runs %v, want run 2 once", id, m)
		}
	}
}
