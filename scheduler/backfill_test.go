package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// backfillFleet starts n replicas on srv, each with the hourly job "report"
// recorded in j, and returns them with the job's 50 latest past ticks.
func backfillFleet(t *testing.T, srv *redistest.Server, n int, j *journal) ([]*replica, []time.Time) {
	t.Helper()
	var fleet []*replica
	for i := range n {
		r := newRedisReplica(t, srv, "r"+string(rune('a'+i)), nil)
		r.add(t, scheduler.Job{Name: "report", Schedule: "@every 1h", Run: j.fn(nil)})
		r.start()
		fleet = append(fleet, r)
	}
	last := time.Now().Truncate(time.Hour)
	var ticks []time.Time
	for i := 49; i >= 0; i-- {
		ticks = append(ticks, last.Add(-time.Duration(i)*time.Hour))
	}
	return fleet, ticks
}

// awaitBackfill waits until the backfill id is no longer running, and
// returns it.
func awaitBackfill(t *testing.T, s *scheduler.Scheduler, id string, within time.Duration) scheduler.Backfill {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		bs, err := s.Backfills(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.ID == id && !b.Running() {
				return b
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("backfill %s still running after %v: %+v", id, within, bs)
		}
		time.Sleep(20 * time.Millisecond) // a poll, with a deadline
	}
}

// A backfill with OnlyMissing after some ticks were run runs exactly the
// others, once each across three replicas, with their own ticks, marked
// backfill, at most at its rate; the history has each.
func TestBackfillOnlyMissingRunsEachMissingTickOnce(t *testing.T) {
	srv := redistest.Start(t)
	j := newJournal()
	fleet, ticks := backfillFleet(t, srv, 3, j)
	ctx := context.Background()
	s := fleet[0].s

	first, err := s.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[10], To: ticks[19], Rate: 50})
	if err != nil {
		t.Fatal(err)
	}
	if b := awaitBackfill(t, s, first.ID, time.Minute); b.State != "finished" || b.Done != 10 || b.Total != 10 {
		t.Fatalf("first backfill = %+v, want finished with 10 of 10 done", b)
	}
	dry, n, err := s.BackfillTicks(ctx, "report", scheduler.BackfillOptions{From: ticks[0], To: ticks[49], OnlyMissing: true})
	if err != nil || len(dry) != 40 || n != 40 || !dry[0].Equal(ticks[0]) || !dry[39].Equal(ticks[49]) {
		t.Fatalf("dry run = %d ticks (%v), %v; want the 40 missing", len(dry), dry, err)
	}
	started := time.Now()
	b, err := fleet[1].s.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[0], To: ticks[49], OnlyMissing: true, Rate: 20, By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if b.Total != 50 || b.State != "running" || b.By != "test" {
		t.Fatalf("backfill = %+v", b)
	}
	end := awaitBackfill(t, s, b.ID, time.Minute)
	if end.State != "finished" || end.Done != 50 || !end.Last.Equal(ticks[49]) {
		t.Fatalf("backfill at its end = %+v, want finished, 50 of 50 done, up to the last tick", end)
	}
	seen := make(map[time.Time]int)
	var second []execution
	for _, x := range j.all() {
		seen[x.info.Tick]++
		if !x.info.Backfill {
			t.Errorf("run of tick %s not marked backfill", x.info.Tick)
		}
		if x.start.After(started) {
			second = append(second, x)
		}
	}
	for i, tk := range ticks {
		if seen[tk] != 1 {
			t.Errorf("tick %d (%s) ran %d times, want once", i, tk, seen[tk])
		}
	}
	if len(seen) != 50 || len(second) != 40 {
		t.Errorf("%d ticks ran, %d of them by the only-missing backfill; want 50 and 40", len(seen), len(second))
	}
	if len(second) == 40 {
		lo, hi := second[0].start, second[0].start
		for _, x := range second {
			if x.start.Before(lo) {
				lo = x.start
			}
			if x.start.After(hi) {
				hi = x.start
			}
		}
		if span := hi.Sub(lo); span < 39*50*time.Millisecond*9/10 {
			t.Errorf("40 ticks at 20/s started within %v", span)
		}
	}
	runs, err := s.History(ctx, "report", 100, "")
	if err != nil {
		t.Fatal(err)
	}
	byBackfill := make(map[string]int)
	for _, r := range runs {
		byBackfill[r.Backfill]++
	}
	if byBackfill[b.ID] != 40 || byBackfill[first.ID] != 10 {
		t.Errorf("history: %v entries by backfill, want 40 of %s and 10 of %s", byBackfill, b.ID, first.ID)
	}
}

// A backfill goes on when the replica that carries it stops: another
// takes it on from its progress, and no tick runs twice. A cancelled
// backfill starts no tick after its carrier read the cancel.
func TestBackfillTakenOverAndCancelled(t *testing.T) {
	srv := redistest.Start(t)
	j := newJournal()
	fleet, ticks := backfillFleet(t, srv, 3, j)
	ctx := context.Background()
	b, err := fleet[0].s.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[0], To: ticks[49], Rate: 20})
	if err != nil {
		t.Fatal(err)
	}
	x := j.awaitStart(t, 30*time.Second)
	var carrier *replica
	for _, r := range fleet {
		if r.id == x.info.Replica {
			carrier = r
		}
	}
	carrier.stop(t)
	end := awaitBackfill(t, fleet[(indexOf(fleet, carrier)+1)%3].s, b.ID, time.Minute)
	if end.State != "finished" || end.Done != 50 {
		t.Fatalf("backfill = %+v, want finished with 50 done", end)
	}
	seen := make(map[time.Time]int)
	replicas := make(map[string]bool)
	for _, x := range j.all() {
		seen[x.info.Tick]++
		replicas[x.info.Replica] = true
	}
	for i, tk := range ticks {
		if seen[tk] != 1 {
			t.Errorf("tick %d ran %d times, want once", i, seen[tk])
		}
	}
	if len(replicas) < 2 {
		t.Errorf("ran on %v: no other replica took it over", replicas)
	}

	// Cancel.
	liveR := fleet[(indexOf(fleet, carrier)+1)%3]
	live := liveR.s
	c, err := live.Backfill(ctx, "report", scheduler.BackfillOptions{From: ticks[0], To: ticks[49], Rate: 10})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		j.awaitStart(t, 30*time.Second)
	}
	if _, err := live.CancelBackfill(ctx, c.ID, "test"); err != nil {
		t.Fatal(err)
	}
	atCancel := len(j.all())
	got := awaitBackfill(t, live, c.ID, time.Second)
	if got.State != "cancelled" || got.CancelledBy != "test" {
		t.Fatalf("backfill = %+v, want cancelled by test", got)
	}
	// Once its carrier has ended (its carrier lock is free), nothing of it
	// can start: at most the run whose claim came before the cancel did.
	awaitCarrierEnd(t, liveR.locks, "report", c.ID)
	if n := len(j.all()); n > atCancel+1 {
		t.Errorf("%d runs started after the cancel (at most the one claimed then may)", n-atCancel)
	}
	if _, err := live.CancelBackfill(ctx, "bf-none", "test"); !errors.Is(err, scheduler.ErrUnknownBackfill) {
		t.Errorf("cancel of an unknown id = %v, want ErrUnknownBackfill", err)
	}
	if _, err := live.CancelBackfill(ctx, b.ID, "test"); !errors.Is(err, scheduler.ErrBackfillEnded) {
		t.Errorf("cancel of a finished backfill = %v, want ErrBackfillEnded", err)
	}
}

// awaitCarrierEnd waits until no replica carries job's backfill id: its
// carrier lock is free (a carrier holds it, and gives it back as it ends).
func awaitCarrierEnd(t *testing.T, c *lock.Client, job, id string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := c.Mutex(job + "!backfill:" + id).TryLock(ctx)
		if err == nil {
			_ = l.Unlock(ctx)
			return
		}
		if !errors.Is(err, lock.ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("the carrier of backfill %s did not end: %v", id, err)
		}
		time.Sleep(10 * time.Millisecond) // a poll, with a deadline
	}
}

func indexOf(fleet []*replica, r *replica) int {
	for i, x := range fleet {
		if x == r {
			return i
		}
	}
	return -1
}

// Bad backfills are refused with ErrInvalid (ErrUnknownJob), and nothing
// is recorded.
func TestBackfillRefusesBadInput(t *testing.T) {
	srv := redistest.Start(t)
	r := newRedisReplica(t, srv, "ra", nil)
	r.add(t, scheduler.Job{Name: "report", Schedule: "@every 1h", Run: newJournal().fn(nil)},
		scheduler.Job{Name: "fast", Schedule: "@every 1s", Run: newJournal().fn(nil)})
	ctx := context.Background()
	now := time.Now()
	for _, c := range []struct {
		name, job string
		o         scheduler.BackfillOptions
		want      error
	}{
		{"from after to", "report", scheduler.BackfillOptions{From: now.Add(-time.Hour), To: now.Add(-3 * time.Hour)}, scheduler.ErrInvalid},
		{"to in the future", "report", scheduler.BackfillOptions{From: now.Add(-3 * time.Hour), To: now.Add(time.Hour)}, scheduler.ErrInvalid},
		{"no from", "report", scheduler.BackfillOptions{To: now.Add(-time.Hour)}, scheduler.ErrInvalid},
		{"no tick", "report", scheduler.BackfillOptions{From: now.Add(-time.Second), To: now.Add(-time.Second)}, scheduler.ErrInvalid},
		{"over 100,000 ticks", "fast", scheduler.BackfillOptions{From: now.Add(-48 * time.Hour), To: now.Add(-time.Hour)}, scheduler.ErrInvalid},
		{"rate", "report", scheduler.BackfillOptions{From: now.Add(-3 * time.Hour), To: now.Add(-time.Hour), Rate: -1}, scheduler.ErrInvalid},
		{"rate below one a day", "report", scheduler.BackfillOptions{From: now.Add(-3 * time.Hour), To: now.Add(-time.Hour), Rate: 1e-10}, scheduler.ErrInvalid},
		{"unknown job", "nope", scheduler.BackfillOptions{From: now.Add(-3 * time.Hour), To: now.Add(-time.Hour)}, scheduler.ErrUnknownJob},
	} {
		if _, err := r.s.Backfill(ctx, c.job, c.o); !errors.Is(err, c.want) {
			t.Errorf("%s: Backfill = %v, want %v", c.name, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
		if _, _, err := r.s.BackfillTicks(ctx, c.job, c.o); !errors.Is(err, c.want) {
			t.Errorf("%s: BackfillTicks = %v, want %v", c.name, err, c.want)
		}
	}
	if bs, err := r.s.Backfills(ctx, ""); err != nil || len(bs) != 0 {
		t.Errorf("Backfills = %v, %v; want none recorded", bs, err)
	}
	// Force allows more than 100,000 ticks, up to a ceiling; a dry run
	// lists the first MaxBackfillListed and counts them all.
	ticks, n, err := r.s.BackfillTicks(ctx, "fast", scheduler.BackfillOptions{From: now.Add(-48 * time.Hour), To: now.Add(-time.Hour), Force: true})
	if err != nil || n < 100_000 || len(ticks) != scheduler.MaxBackfillListed || !ticks[0].After(now.Add(-48*time.Hour-time.Second)) {
		t.Errorf("forced dry run = %d ticks listed of %d, %v", len(ticks), n, err)
	}
	for _, o := range []scheduler.BackfillOptions{
		{From: now.Add(-30 * 24 * time.Hour), To: now.Add(-time.Hour), Force: true},
		{From: now.Add(-30 * 24 * time.Hour), To: now.Add(-time.Hour), Force: true, OnlyMissing: true},
	} {
		if _, _, err := r.s.BackfillTicks(ctx, "fast", o); !errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), "most a forced backfill may hold") {
			t.Errorf("forced dry run of 30 days of @every 1s = %v, want refused (ErrInvalid)", err)
		}
		if _, err := r.s.Backfill(ctx, "fast", o); !errors.Is(err, scheduler.ErrInvalid) {
			t.Errorf("forced backfill of 30 days of @every 1s = %v, want refused (ErrInvalid)", err)
		}
	}
}

// A Backfill and a CancelBackfill whose replies are lost, and which the
// Redis client sends again, answer success and record one backfill, one
// cancel (DESIGN.md: no script may run twice because of a client retry).
func TestBackfillLostReplyMadeOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var l replyLoser
	c, err := lock.New(l.client(t, srv), lock.WithClientID("r1"))
	if err != nil {
		t.Fatal(err)
	}
	r := newReplica(t, c, "r1")
	r.add(t, scheduler.Job{Name: "report", Schedule: "@every 1h", Run: newJournal().fn(nil)})
	ctx := testkit.Context(t)
	if _, err := r.s.Backfills(ctx, ""); err != nil { // loads the script: the EVALSHA below runs it
		t.Fatal(err)
	}
	now := time.Now()
	l.arm(":backfills:report", "\r\nadd\r\n")
	b, err := r.s.Backfill(ctx, "report", scheduler.BackfillOptions{From: now.Add(-5 * time.Hour), To: now.Add(-time.Hour)})
	if err != nil {
		t.Fatalf("Backfill with its reply lost: %v", err)
	}
	if l.lostReplies() != 1 {
		t.Fatalf("%d replies lost, want 1: the test did not lose the add's", l.lostReplies())
	}
	bs, err := r.s.Backfills(ctx, "report")
	if err != nil || len(bs) != 1 || bs[0].ID != b.ID || bs[0].Total != 4 && bs[0].Total != 5 {
		t.Fatalf("Backfills after a retried add = %+v, %v; want the one backfill %+v", bs, err, b)
	}
	l.arm(":backfills:report", "\r\ncancel\r\n")
	if _, err := r.s.CancelBackfill(ctx, b.ID, "test"); err != nil {
		t.Errorf("CancelBackfill with its reply lost: %v, want success", err)
	}
	if l.lostReplies() != 2 {
		t.Fatalf("%d replies lost, want 2: the test did not lose the cancel's", l.lostReplies())
	}
	if bs, err := r.s.Backfills(ctx, "report"); err != nil || len(bs) != 1 || bs[0].State != "cancelled" || bs[0].CancelledBy != "test" {
		t.Errorf("Backfills after the cancel = %+v, %v; want it cancelled by test", bs, err)
	}
}
