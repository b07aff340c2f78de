package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/scheduler"
)

// runsSince returns how many of xs ran a tick after t.
func runsSince(xs []execution, t time.Time) int {
	n := 0
	for _, x := range xs {
		if x.info.Tick.After(t) {
			n++
		}
	}
	return n
}

// Updates, removals and additions on every replica of a running fleet, one
// replica after the other: no tick of the updated job is doubled or lost,
// the new definition runs once every replica has it, the removed job takes
// no tick once the last replica removed it, the added one runs each tick
// once, and a schedule change takes effect.
func TestChangesDuringFleetRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const every = time.Second
	j, clk := newJournal(), testclock.NewFake(fakeStart)
	var v2 sync.Map // ticks (ms) of keep run by its second definition
	keepV1 := scheduler.Job{Name: "keep", Schedule: "@every 1s", Revision: "v1", Run: j.fn(nil)}
	keepV2 := keepV1
	keepV2.Revision = "v2"
	keepV2.Run = j.fn(func(ctx context.Context) error {
		info, _ := jobs.InfoFrom(ctx)
		v2.Store(info.Tick.UnixMilli(), true)
		return nil
	})
	var fleet []*replica
	for i := range 3 {
		r := newRedisReplica(t, srv, "r"+string(rune('1'+i)), nil, scheduler.WithClock(clk))
		r.add(t, keepV1, scheduler.Job{Name: "gone", Schedule: "@every 1s", Run: j.fn(nil)})
		fleet = append(fleet, r)
	}
	for _, r := range fleet {
		r.start()
	}
	// Two jobs on three replicas: six trigger loops.
	stepUntil(t, clk, 6, "", fleet, "three ticks of keep", func() bool { return len(j.byJob()["keep"]) >= 3 })

	// One replica after the other, a tick apart: the fleet runs two
	// definitions meanwhile.
	for _, r := range fleet {
		if err := r.s.Update(keepV2); err != nil {
			t.Fatal(err)
		}
		if err := r.s.Remove("gone"); err != nil {
			t.Fatal(err)
		}
		if err := r.s.Add(scheduler.Job{Name: "new", Schedule: "@every 1s", Run: j.fn(nil)}); err != nil {
			t.Fatal(err)
		}
		settle(t, clk, 6, "", fleet...)
		step(t, clk, 6)
	}
	changed := clk.Now()
	stepUntil(t, clk, 6, "", fleet, "three ticks of keep and new after the changes", func() bool {
		b := j.byJob()
		return runsSince(b["keep"], changed) >= 3 && runsSince(b["new"], changed) >= 3
	})

	// A schedule change, on every replica.
	keepV3 := keepV2
	keepV3.Schedule = "@every 2s"
	for _, r := range fleet {
		if err := r.s.Update(keepV3); err != nil {
			t.Fatal(err)
		}
	}
	rescheduled := clk.Now()
	stepUntil(t, clk, 6, "", fleet, "three ticks of the new schedule", func() bool {
		return runsSince(j.byJob()["keep"], rescheduled) >= 3
	})
	for _, r := range fleet {
		r.stop(t)
	}

	b := j.byJob()
	var before, after []execution
	for _, x := range b["keep"] {
		if x.info.Tick.After(rescheduled) {
			after = append(after, x)
		} else {
			before = append(before, x)
		}
	}
	// Through the updates of the definition: each tick once, none left out.
	checkOncePerTick(t, map[string][]execution{"keep": before, "new": b["new"]}, every)
	checkOncePerTick(t, map[string][]execution{"keep": after}, 2*time.Second)
	for _, x := range after {
		if x.info.Tick.UnixMilli()%2000 != 0 {
			t.Errorf("keep ran tick %s after its schedule became @every 2s", x.info.Tick.Format(time.RFC3339Nano))
		}
	}
	// Once every replica had the new definition, it ran every tick.
	for _, x := range before {
		if _, ok := v2.Load(x.info.Tick.UnixMilli()); x.info.Tick.After(changed) && !ok {
			t.Errorf("tick %s after every replica was updated ran the old definition", x.info.Tick.Format(time.RFC3339Nano))
		}
	}
	for _, x := range b["gone"] {
		if x.info.Tick.After(changed) {
			t.Errorf("removed job gone ran tick %s, after every replica removed it", x.info.Tick.Format(time.RFC3339Nano))
		}
	}
	checkOncePerTick(t, map[string][]execution{"gone": b["gone"]}, every)
}

// Updates at a high rate while a job ticks: every tick that falls at the
// instant of an update runs once, under one definition, and none is lost;
// and the replica, alone, never takes its own earlier definition for
// another replica's.
func TestUpdateAtTheInstantOfTicks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	lg := newLockedWriter()
	r := newRedisReplica(t, srv, "r1", nil, scheduler.WithLogger(hclog.New(&hclog.LoggerOptions{Output: lg, Level: hclog.Info})))
	job := scheduler.Job{Name: "busy", Schedule: "@every 1s", Run: j.fn(nil)}
	r.add(t, job)
	r.start()
	deadline := time.Now().Add(4 * time.Second)
	updates := 0
	for time.Now().Before(deadline) {
		updates++
		job.Revision = string(rune('a' + updates%26))
		if err := r.s.Update(job); err != nil {
			t.Fatal(err)
		}
		time.Sleep(17 * time.Millisecond) // the rate of updates; no synchronisation
	}
	// The updates went on for 4 s: wait for one more tick, so that the
	// last of them has a successor.
	last := time.Now()
	testkit.Eventually(t, 10*time.Second, "a tick after the updates", func() bool { return runsSince(j.byJob()["busy"], last) >= 1 })
	r.stop(t)
	xs := j.byJob()["busy"]
	if len(xs) < 4 {
		t.Fatalf("%d ticks ran during %d updates in 4s, want at least 4", len(xs), updates)
	}
	checkOncePerTick(t, map[string][]execution{"busy": xs}, time.Second)
	// A replica alone finds only the definitions it recorded itself.
	if n := lg.count("another definition"); n != 0 {
		t.Errorf("a replica alone warned %d times of another definition, want none", n)
	}
}

// Remove lets a run under way finish under its lock; with CancelRuns it
// cancels it (cause ErrRemoved), and the run finishes under the job's
// OnShutdown policy. The job's manual runs are refused afterwards, and
// Update and Remove of an unknown job fail.
func TestRemoveRunInProgress(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, cancelRuns := range []bool{false, true} {
		name := "slow"
		if cancelRuns {
			name = "cancelled"
		}
		j := newJournal()
		release := make(chan struct{})
		var cause atomic.Value
		outcomes := make(chan scheduler.Run, 10)
		clk := testclock.NewFake(fakeStart)
		r := newRedisReplica(t, srv, "r-"+name, nil, scheduler.WithOnRun(func(run scheduler.Run) { outcomes <- run }), scheduler.WithClock(clk))
		r.add(t, scheduler.Job{Name: name, Schedule: "@every 1s", Run: j.fn(func(ctx context.Context) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				cause.Store(context.Cause(ctx))
				return ctx.Err()
			}
		})})
		r.start()
		step(t, clk, 1)
		x := j.awaitStart(t, 10*time.Second)
		var opts []scheduler.RemoveOption
		if cancelRuns {
			opts = append(opts, scheduler.CancelRuns())
		}
		if err := r.s.Remove(name, opts...); err != nil {
			t.Fatal(err)
		}
		if _, err := r.s.Trigger(testkit.Context(t), name); !errors.Is(err, scheduler.ErrUnknownJob) {
			t.Errorf("%s: Trigger after Remove: %v, want ErrUnknownJob", name, err)
		}
		if !cancelRuns {
			// The run goes on, holding the lock, until it returns.
			if n := len(j.all()); n != 0 {
				t.Errorf("%s: %d runs finished right after Remove, want the run going on", name, n)
			}
			close(release)
		}
		testkit.Eventually(t, 10*time.Second, name+": the run finished", func() bool { return len(j.all()) == 1 })
		got := j.all()[0]
		switch {
		case !cancelRuns && got.err != nil:
			t.Errorf("%s: run after Remove ended with %v, want it to finish", name, got.err)
		case cancelRuns && !errors.Is(cause.Load().(error), scheduler.ErrRemoved):
			t.Errorf("%s: cancelled run's cause = %v, want ErrRemoved", name, cause.Load())
		}
		testkit.Eventually(t, 10*time.Second, name+": the lock released", func() bool {
			ls, err := r.locks.Locks(testkit.Context(t))
			for _, l := range ls {
				if l.Name == name && len(l.Holders) > 0 {
					return false
				}
			}
			return err == nil
		})
		want := scheduler.OutcomeRan
		if cancelRuns {
			want = scheduler.OutcomeHandedOff
		}
		select {
		case run := <-outcomes:
			if run.Outcome != want {
				t.Errorf("%s: outcome %s, want %s", name, run.Outcome, want)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s: no outcome recorded", name)
		}
		if x.info.Job != name {
			t.Errorf("run of %q, want %q", x.info.Job, name)
		}
		if err := r.s.Remove(name); !errors.Is(err, scheduler.ErrUnknownJob) {
			t.Errorf("second Remove: %v, want ErrUnknownJob", err)
		}
		if err := r.s.Update(scheduler.Job{Name: name, Schedule: "@every 1s", Run: j.fn(nil)}); !errors.Is(err, scheduler.ErrUnknownJob) {
			t.Errorf("Update of a removed job: %v, want ErrUnknownJob", err)
		}
		r.stop(t)
	}
}

// Two replicas with different definitions of one job: each tick still
// runs once, and each replica warns, once, when its claim finds the
// other's definition, and says so in Status.
func TestDefinitionMismatch(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j, clk := newJournal(), testclock.NewFake(fakeStart)
	var fleet []*replica
	var logs []*lockedWriter
	for i, rev := range []string{"v1", "v2"} {
		lg := newLockedWriter()
		logs = append(logs, lg)
		r := newRedisReplica(t, srv, "r"+rev, nil, scheduler.WithLogger(hclog.New(&hclog.LoggerOptions{Output: lg, Level: hclog.Info})), scheduler.WithClock(clk))
		r.add(t, scheduler.Job{Name: "mixed", Schedule: "@every 1s", Revision: rev, Run: j.fn(nil)})
		fleet = append(fleet, r)
		_ = i
	}
	for _, r := range fleet {
		r.start()
	}
	stepUntil(t, clk, 2, "mixed", fleet, "both replicas find the other's definition, six ticks", func() bool {
		return logs[0].count("another definition") >= 1 && logs[1].count("another definition") >= 1 && len(j.byJob()["mixed"]) >= 6
	})
	for i, r := range fleet {
		st := r.s.Status()[0]
		if st.Digest == "" || st.Digest == fleet[1-i].s.Status()[0].Digest {
			t.Errorf("replica %s: digest %q, the other's %q: want two different digests", r.id, st.Digest, fleet[1-i].s.Status()[0].Digest)
		}
	}
	for _, r := range fleet {
		r.stop(t)
	}
	for i, lg := range logs {
		if n := lg.count("another definition"); n != 1 {
			t.Errorf("replica %d warned %d times of the other definition, want once", i, n)
		}
	}
	checkOncePerTick(t, j.byJob(), 0)
}
