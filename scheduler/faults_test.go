package scheduler_test

import (
	"testing"
	"time"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// A tick whose claimant died (its lock gone, its ledger entry left running)
// is never overtaken: a replica that was not waiting for it, and claims a
// later tick, runs the unfinished one first with the next attempt, then its
// own. Under abandon, it records the unfinished one as interrupted instead
// and runs its own.
func TestUnfinishedTickRunsFirst(t *testing.T) {
	t.Parallel()
	for _, policy := range []scheduler.ShutdownPolicy{scheduler.ShutdownHandoff, scheduler.ShutdownAbandon} {
		t.Run(string(policy), func(t *testing.T) {
			srv := redistest.Start(t)
			ctx := testkit.Context(t)
			const job = "report"
			// A replica that died mid-run: it claimed a tick an hour ago
			// and vanished; its lock has expired.
			dead, err := lock.New(srv.Client(), lock.WithClientID("dead"))
			if err != nil {
				t.Fatal(err)
			}
			g, err := fleet.New(dead).Ledger(job, job)
			if err != nil {
				t.Fatal(err)
			}
			lost := fakeStart.Add(-time.Hour)
			if _, err := g.Claim(ctx, lost.UnixMilli(), false); err != nil {
				t.Fatal(err)
			}
			if ok, err := dead.ForceUnlock(ctx, job); err != nil || !ok {
				t.Fatalf("ForceUnlock = %v, %v", ok, err)
			}
			_ = dead.Close()

			j := newJournal()
			clk := testclock.NewFake(fakeStart)
			r := newRedisReplica(t, srv, "survivor", nil, scheduler.WithClock(clk))
			r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", OnShutdown: policy, Run: j.fn(nil)})
			r.start()
			own := step(t, clk, 1)
			fired := time.Now()
			first := j.awaitStart(t, 10*time.Second)
			if policy == scheduler.ShutdownHandoff {
				if !first.info.Tick.Equal(lost) || first.info.Attempt != 2 {
					t.Fatalf("first run: tick %s attempt %d, want the unfinished tick %s, attempt 2",
						fmtT(first.info.Tick), first.info.Attempt, fmtT(lost))
				}
				first = j.awaitStart(t, 10*time.Second)
			}
			if !first.info.Tick.Equal(own) || first.info.Attempt != 1 {
				t.Fatalf("run after the unfinished tick: tick %s attempt %d, want its own tick %s, attempt 1", fmtT(first.info.Tick), first.info.Attempt, fmtT(own))
			}
			// The runner's own tick was not lost: it ran right after.
			if d := first.start.Sub(fired); d > 2*time.Second {
				t.Errorf("the replica's own tick %s ran %v after it fell due", fmtT(first.info.Tick), d)
			}
			r.stop(t)
			st := ledgerState(t, srv, job, job)
			if st.Running != 0 || st.Done < first.info.Tick.UnixMilli() {
				t.Fatalf("ledger after both: %+v", st)
			}
		})
	}
}

// A manual run has an identity of its own: its Trigger number, besides the
// time it was asked for as its Tick, even when that falls in the second of
// a scheduled tick; scheduled runs have Trigger 0.
func TestManualRunIdentity(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job = "tagged"
	j := newJournal()
	clk := testclock.NewFake(fakeStart)
	r := newRedisReplica(t, srv, "r1", nil, scheduler.WithClock(clk))
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Run: j.fn(nil)})
	r.start()
	step(t, clk, 1)
	scheduled := j.awaitStart(t, 10*time.Second)
	if scheduled.info.Trigger != 0 {
		t.Fatalf("scheduled run has Trigger %d, want 0", scheduled.info.Trigger)
	}
	testkit.Eventually(t, 10*time.Second, "subscribed to fleet requests", func() bool {
		n, err := r.s.Trigger(ctx, job)
		return err == nil && n > 0
	})
	deadline := time.After(10 * time.Second)
	for {
		var x execution
		select {
		case x = <-j.ch:
		case <-deadline:
			t.Fatal("no manual run within 10s of the trigger")
		}
		if x.info.Trigger == 0 {
			continue // a scheduled tick
		}
		if x.info.Trigger < 1 || x.info.Attempt != 1 {
			t.Fatalf("manual run: %+v", x.info)
		}
		if env := x.info.Env(); env[len(env)-1] == "LOCKCRON_TRIGGER=" {
			t.Fatalf("manual run's environment has no trigger: %q", env)
		}
		break
	}
}
