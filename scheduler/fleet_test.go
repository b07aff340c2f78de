package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// fleetDuration is how long the fleet tests run.
func fleetDuration(full time.Duration) time.Duration {
	if testing.Short() {
		return full / 4
	}
	return full
}

func TestOncePerTickAcrossReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	var fleet []*replica
	for i := range 3 {
		r := newRedisReplica(t, srv, "r"+string(rune('1'+i)), nil)
		for k := range 5 {
			r.add(t, scheduler.Job{Name: jobName(k), Schedule: "@every 1s", Run: j.fn(nil)})
		}
		fleet = append(fleet, r)
	}
	for _, r := range fleet {
		r.start()
	}
	d := fleetDuration(20 * time.Second)
	time.Sleep(d) // the length of the experiment, not a synchronisation
	for _, r := range fleet {
		r.stop(t)
	}
	byJob := j.byJob()
	if len(byJob) != 5 {
		t.Fatalf("%d jobs ran, want 5", len(byJob))
	}
	want := int(d/time.Second) - 2
	for job, xs := range byJob {
		if len(xs) < want {
			t.Errorf("job %s ran %d ticks in %v, want at least %d", job, len(xs), d, want)
		}
	}
	checkOncePerTick(t, byJob, time.Second)
}

func TestOncePerTickWithClockSkew(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	var fleet []*replica
	for i, skew := range []time.Duration{-800 * time.Millisecond, 0, 800 * time.Millisecond} {
		r := newRedisReplica(t, srv, "r"+string(rune('1'+i)), nil, scheduler.WithClock(testclock.Offset(skew)))
		for k := range 3 {
			r.add(t, scheduler.Job{Name: jobName(k), Schedule: "@every 2s", Run: j.fn(func(ctx context.Context) error {
				time.Sleep(10 * time.Millisecond) // the job's work
				return nil
			})})
		}
		fleet = append(fleet, r)
	}
	for _, r := range fleet {
		r.start()
	}
	d := fleetDuration(16 * time.Second)
	time.Sleep(d)
	for _, r := range fleet {
		r.stop(t)
	}
	byJob := j.byJob()
	ran := map[string]int{}
	for job, xs := range byJob {
		for _, x := range xs {
			ran[x.info.Replica]++
		}
		if len(xs) < int(d/(2*time.Second))-2 {
			t.Errorf("job %s ran %d ticks in %v", job, len(xs), d)
		}
	}
	checkOncePerTick(t, byJob, 2*time.Second)
	t.Logf("runs by replica: %v", ran)
}

func TestInMemoryBackend(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory(lock.WithClientID("solo"))
	if err != nil {
		t.Fatal(err)
	}
	clk := testclock.NewFake(fakeStart)
	r := newReplica(t, c, "solo", scheduler.WithClock(clk))
	j := newJournal()
	r.add(t, scheduler.Job{Name: "tick", Schedule: "@every 1s", Run: j.fn(nil)})
	r.start()
	step(t, clk, 1)
	x := j.awaitStart(t, 5*time.Second)
	if x.info.Job != "tick" || x.info.Replica != "solo" || x.info.Token <= 0 || x.info.Attempt != 1 || x.info.Tick.Nanosecond() != 0 {
		t.Fatalf("run info on the memory backend: %+v", x.info)
	}
	settle(t, clk, 1, "tick", r)
	step(t, clk, 1)
	y := j.awaitStart(t, 5*time.Second)
	if y.info.Tick.Sub(x.info.Tick) != time.Second || y.info.Token <= x.info.Token {
		t.Fatalf("second run %+v after %+v", y.info, x.info)
	}
}
