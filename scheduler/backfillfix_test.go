package scheduler_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/scheduler"
)

// A backfill whose range overlaps that of a running backfill of the job
// is refused, naming it, and nothing is recorded; one beside it, and one
// over the same ticks once the first is cancelled, are accepted.
func TestBackfillOverlapRefused(t *testing.T) {
	srv := redistest.Start(t)
	j := newJournal()
	fleet, ticks := backfillFleet(t, srv, 2, j)
	ctx := context.Background()
	a, err := fleet[0].s.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[10], To: ticks[19], Rate: scheduler.MinBackfillRate})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][2]int{{0, 10}, {19, 30}, {12, 14}, {0, 49}} {
		_, err := fleet[1].s.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[r[0]], To: ticks[r[1]], OnlyMissing: true})
		if !errors.Is(err, scheduler.ErrBackfillOverlap) || !strings.Contains(err.Error(), a.ID) {
			t.Errorf("ticks %d to %d: Backfill = %v, want ErrBackfillOverlap naming %s", r[0], r[1], err, a.ID)
		}
	}
	if bs, err := fleet[0].s.Backfills(ctx, "report"); err != nil || len(bs) != 1 {
		t.Fatalf("Backfills = %+v, %v; want the first alone", bs, err)
	}
	beside, err := fleet[1].s.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[20], To: ticks[21], Rate: 50})
	if err != nil {
		t.Fatalf("a range beside the running one: %v", err)
	}
	if _, err := fleet[0].s.CancelBackfill(ctx, a.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := fleet[1].s.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[10], To: ticks[19], Rate: 50}); err != nil {
		t.Errorf("the same range once the first was cancelled: %v", err)
	}
	awaitBackfill(t, fleet[0].s, beside.ID, time.Minute)
}

// A cancel refuses, in its own step, the claim of the backfill's tick that
// waits for the job's lock: once the lock is free, the carrier ends and no
// tick of the backfill has run.
func TestBackfillCancelRefusesWaitingClaim(t *testing.T) {
	srv := redistest.Start(t)
	j := newJournal()
	release := make(chan struct{})
	var once sync.Once
	rel := func() { once.Do(func() { close(release) }) }
	t.Cleanup(rel)
	r := newRedisReplica(t, srv, "ra", nil)
	r.add(t, scheduler.Job{Name: "report", Schedule: "@every 1h", Run: j.fn(func(ctx context.Context) error {
		if info, _ := jobs.InfoFrom(ctx); info.Trigger != 0 {
			select { // the manual run holds the job's lock until released
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	})})
	r.start()
	// (A Trigger reaches a replica once its subscriptions are confirmed.)
	testkit.Eventually(t, 30*time.Second, "the replica running", r.s.Running)
	ctx := context.Background()
	if _, err := r.s.Trigger(ctx, "report"); err != nil {
		t.Fatal(err)
	}
	j.awaitStart(t, 30*time.Second) // the manual run, holding the job's lock
	last := time.Now().Truncate(time.Hour)
	b, err := r.s.Backfill(ctx, "report", scheduler.BackfillOptions{From: last.Add(-3 * time.Hour), To: last, Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	// The carrier's claim of the first tick waits for the lock: it has
	// moved its ledger's seen there.
	rdb := srv.Client()
	var ledger string
	deadline := time.Now().Add(30 * time.Second)
	for {
		if keys, _ := rdb.Keys(ctx, "*:ledger:report!backfill:"+b.ID).Result(); len(keys) == 1 {
			ledger = keys[0]
			if seen, _ := rdb.HGet(ctx, ledger, "seen").Int64(); seen == last.Add(-3*time.Hour).UnixMilli() {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the backfill's claim did not come")
		}
		time.Sleep(10 * time.Millisecond) // a poll, with a deadline
	}
	if _, err := r.s.CancelBackfill(ctx, b.ID, "test"); err != nil {
		t.Fatal(err)
	}
	rel()
	awaitCarrierEnd(t, r.locks, "report", b.ID)
	for _, x := range j.all() {
		if x.info.Backfill {
			t.Errorf("backfill tick %s ran after the cancel", x.info.Tick.Format(time.RFC3339))
		}
	}
	if done, _ := rdb.HGet(ctx, ledger, "done").Int64(); done != 0 {
		t.Errorf("the backfill's ledger records tick %d done", done)
	}
}

// The rate holds across a takeover: the carrier that takes a backfill on
// starts its next tick no earlier than the rate allows after the last one.
func TestBackfillRateHeldAcrossTakeover(t *testing.T) {
	srv := redistest.Start(t)
	j := newJournal()
	fleet, ticks := backfillFleet(t, srv, 2, j)
	ctx := context.Background()
	const interval = 3 * time.Second
	b, err := fleet[0].s.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[0], To: ticks[9], Rate: float64(time.Second) / float64(interval)})
	if err != nil {
		t.Fatal(err)
	}
	x := j.awaitStart(t, 30*time.Second)
	deadline := time.Now().Add(30 * time.Second)
	for { // its progress is recorded
		bs, err := fleet[0].s.Backfills(ctx, "report")
		if err == nil && len(bs) == 1 && bs[0].Done >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress of %s: %+v, %v", b.ID, bs, err)
		}
		time.Sleep(10 * time.Millisecond) // a poll, with a deadline
	}
	for _, r := range fleet {
		if r.id == x.info.Replica {
			r.stop(t) // the other replica takes it on at once
		}
	}
	y := j.awaitStart(t, 30*time.Second)
	if y.info.Replica == x.info.Replica || !y.info.Backfill {
		t.Fatalf("next run %+v, want the backfill's on the other replica", y.info)
	}
	if gap := y.start.Sub(x.start); gap < interval-200*time.Millisecond {
		t.Errorf("the next tick started %v after the last, on the replica that took it over; the rate allows one each %v", gap, interval)
	}
}

// A scheduled tick that finds the job's lock held by a backfill's run
// waits for it (overlap skip notwithstanding) and runs once it ends: the
// live schedule comes before the backfill.
func TestBackfillYieldsToScheduledTicks(t *testing.T) {
	srv := redistest.Start(t)
	j := newJournal()
	release := make(chan struct{})
	var once sync.Once
	rel := func() { once.Do(func() { close(release) }) }
	t.Cleanup(rel)
	r := newRedisReplica(t, srv, "ra", nil)
	r.add(t, scheduler.Job{Name: "slow", Schedule: "@every 1s", Run: j.fn(func(ctx context.Context) error {
		if info, _ := jobs.InfoFrom(ctx); info.Backfill {
			select { // the backfill's run holds the job's lock until released
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	})})
	r.start()
	ctx := context.Background()
	now := time.Now()
	b, err := r.s.Backfill(ctx, "slow", scheduler.BackfillOptions{From: now.Add(-5 * time.Second), To: now.Add(-time.Second), Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	var bfRun execution
	deadline := time.Now().Add(30 * time.Second)
	for !bfRun.info.Backfill {
		if time.Now().After(deadline) {
			t.Fatal("the backfill's run did not start")
		}
		bfRun = j.awaitStart(t, 30*time.Second)
	}
	// A scheduled tick after it is claimed, while the backfill's run
	// holds the lock: the job's ledger has seen it.
	rdb := srv.Client()
	var seen int64
	for {
		keys, _ := rdb.Keys(ctx, "*:ledger:slow").Result()
		if len(keys) == 1 {
			seen, _ = rdb.HGet(ctx, keys[0], "seen").Int64()
			if seen > bfRun.start.UnixMilli() {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scheduled tick claimed during the backfill's run (seen %d)", seen)
		}
		time.Sleep(10 * time.Millisecond) // a poll, with a deadline
	}
	rel()
	tick := time.UnixMilli(seen)
	for {
		ran := false
		for _, x := range j.all() {
			ran = ran || !x.info.Backfill && x.info.Tick.Equal(tick)
		}
		if ran {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("scheduled tick %s never ran", tick.Format(time.RFC3339Nano))
		}
		time.Sleep(10 * time.Millisecond) // a poll, with a deadline
	}
	awaitBackfill(t, r.s, b.ID, time.Minute)
	hs, err := r.s.History(ctx, "slow", 200, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if h.Outcome == scheduler.OutcomeSkippedBusy {
			t.Errorf("tick %s skipped busy: %+v", h.Tick.Format(time.RFC3339), h)
		}
	}
}

// The fleet's index of running backfills names each running one; a cancel
// or the end drops it, and the replicas drop the entries of backfills that
// are not there (past a grace) or have ended.
func TestBackfillIndex(t *testing.T) {
	srv := redistest.Start(t)
	j := newJournal()
	fleet, ticks := backfillFleet(t, srv, 2, j)
	ctx := context.Background()
	rdb := srv.Client()
	index := func() map[string]string {
		t.Helper()
		keys, err := rdb.Keys(ctx, "*:backfills:{backfills}").Result()
		if err != nil || len(keys) > 1 {
			t.Fatalf("index keys %v, %v", keys, err)
		}
		if len(keys) == 0 {
			return nil
		}
		m, err := rdb.HGetAll(ctx, keys[0]).Result()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	awaitIndex := func(what string, ok func(map[string]string) bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !ok(index()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: index %v", what, index())
			}
			time.Sleep(10 * time.Millisecond) // a poll, with a deadline
		}
	}
	slow, err := fleet[0].s.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[0], To: ticks[9], Rate: scheduler.MinBackfillRate})
	if err != nil {
		t.Fatal(err)
	}
	if v := index()[slow.ID]; !strings.HasPrefix(v, "report/") {
		t.Fatalf("index entry of %s = %q, want its job", slow.ID, v)
	}
	// A stale entry (no such backfill, indexed long ago) and an ended
	// one's are dropped by the replicas' next read.
	keys, _ := rdb.Keys(ctx, "*:backfills:{backfills}").Result()
	old := time.Now().Add(-time.Hour).UnixMilli()
	rdb.HSet(ctx, keys[0], "bf-gone", "report/"+strconv.FormatInt(old, 10), "bf-fresh", "report/"+strconv.FormatInt(time.Now().UnixMilli(), 10))
	fast, err := fleet[1].s.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[20], To: ticks[22], Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	awaitBackfill(t, fleet[0].s, fast.ID, time.Minute)
	awaitIndex("the stale and the finished entries dropped", func(m map[string]string) bool {
		_, gone := m["bf-gone"]
		_, fin := m[fast.ID]
		_, fresh := m["bf-fresh"]
		return !gone && !fin && fresh && m[slow.ID] != ""
	})
	if _, err := fleet[1].s.CancelBackfill(ctx, slow.ID, "test"); err != nil {
		t.Fatal(err)
	}
	if _, ok := index()[slow.ID]; ok {
		t.Errorf("the cancelled backfill %s is still in the index", slow.ID)
	}
}
