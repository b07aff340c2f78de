package fleet_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

func ledger(t *testing.T, c *lock.Client, name string) *fleet.Ledger {
	t.Helper()
	g, err := fleet.New(c).Ledger(name, "job")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func mustClaim(t *testing.T, ctx context.Context, g *fleet.Ledger, tick int64) *fleet.Claim {
	t.Helper()
	cl, err := g.Claim(ctx, tick, false)
	if err != nil {
		t.Fatalf("claim of tick %d: %v", tick, err)
	}
	return cl
}

type claimResult struct {
	cl  *fleet.Claim
	err error
}

func claimAsync(ctx context.Context, g *fleet.Ledger, tick int64, queue bool) <-chan claimResult {
	ch := make(chan claimResult, 1)
	go func() {
		cl, err := g.Claim(ctx, tick, queue)
		ch <- claimResult{cl, err}
	}()
	return ch
}

func awaitClaim(t *testing.T, ch <-chan claimResult) claimResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("claim did not return within 10s")
		return claimResult{}
	}
}

func TestLedgerOncePerTick(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := testkit.Context(t)
		a, b := ledger(t, store.NewClient(t), "job"), ledger(t, store.NewClient(t), "job")
		cl := mustClaim(t, ctx, a, 100)
		if cl.Try != 1 || cl.Tick != 100 || cl.Token() <= 0 {
			t.Fatalf("claim = try %d, tick %d, token %d; want 1, 100, > 0", cl.Try, cl.Tick, cl.Token())
		}
		if _, err := b.Claim(ctx, 100, false, lock.WithWait(0)); !errors.Is(err, lock.ErrLocked) {
			t.Fatalf("one attempt while held for the same tick: %v, want ErrLocked", err)
		}
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(cl.Err(), lock.ErrReleased) {
			t.Fatalf("lease after Finish: %v, want ErrReleased", cl.Err())
		}
		for _, tick := range []int64{100, 99} {
			if _, err := b.Claim(ctx, tick, true); !errors.Is(err, fleet.ErrDone) {
				t.Fatalf("claim of tick %d after 100 was done: %v, want ErrDone", tick, err)
			}
		}
		st, err := b.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Done != 100 || st.Seen != 100 || st.Running != 0 || st.Outcome != "ran" || st.Tries != 1 || st.Finished != cl.Owner() || st.Held {
			t.Fatalf("state = %+v", st)
		}
		before := time.Now()
		next := mustClaim(t, ctx, b, 101)
		after := time.Now()
		if next.Token() <= cl.Token() {
			t.Fatalf("token of tick 101 = %d, not above %d", next.Token(), cl.Token())
		}
		if st, err = b.State(ctx); err != nil || !st.Held || st.Running != 101 || st.Owner != next.Owner() {
			t.Fatalf("state while tick 101 runs = %+v, %v", st, err)
		}
		// Since is on the store's clock, which is this machine's here; a
		// millisecond of truncation either way.
		if st.Since.Before(before.Add(-time.Millisecond)) || st.Since.After(after.Add(time.Millisecond)) {
			t.Fatalf("claim of tick 101 since %v, not between %v and %v", st.Since, before, after)
		}
		// The claimant skipped ticks up to 105 while it ran: seen moves on.
		if err := next.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: 105}); err != nil {
			t.Fatal(err)
		}
		if st, err = b.State(ctx); err != nil || st.Seen != 105 || st.Done != 101 {
			t.Fatalf("state after Finish with Seen 105 = %+v, %v", st, err)
		}
	})
}

func TestLedgerWaiterStopsWhenTickIsDone(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := testkit.Context(t)
		a := ledger(t, store.NewClient(t), "job")
		cb := store.NewClient(t)
		b := ledger(t, cb, "job")
		cl := mustClaim(t, ctx, a, 7)
		ch := claimAsync(ctx, b, 7, false)
		locktest.WaitForWaiter(t, cb, "job")
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
			t.Fatal(err)
		}
		if r := awaitClaim(t, ch); !errors.Is(r.err, fleet.ErrDone) {
			t.Fatalf("waiter after the tick was done: %v, want ErrDone", r.err)
		}
	})
}

func TestLedgerGiveBack(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := testkit.Context(t)
		a := ledger(t, store.NewClient(t), "job")
		cb := store.NewClient(t)
		b := ledger(t, cb, "job")
		cl := mustClaim(t, ctx, a, 7)
		ch := claimAsync(ctx, b, 7, false)
		locktest.WaitForWaiter(t, cb, "job")
		if err := cl.Finish(ctx, fleet.Record{Done: false, Outcome: "handed_off", Tries: 3}); err != nil {
			t.Fatal(err)
		}
		r := awaitClaim(t, ch)
		if r.err != nil {
			t.Fatalf("waiter after the tick was given back: %v", r.err)
		}
		if r.cl.Try != 4 || r.cl.Tick != 7 || r.cl.Token() <= cl.Token() {
			t.Fatalf("taken over: try %d tick %d token %d; want 4, 7, above %d", r.cl.Try, r.cl.Tick, r.cl.Token(), cl.Token())
		}
		if err := r.cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 4}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLedgerDeadHolder(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := testkit.Context(t)
		ca := store.NewClient(t)
		a, b := ledger(t, ca, "job"), ledger(t, store.NewClient(t), "job")
		cl := mustClaim(t, ctx, a, 7)
		// The holder dies: its lock goes, its ledger entry stays.
		if ok, err := ca.ForceUnlock(ctx, "job"); err != nil || !ok {
			t.Fatalf("ForceUnlock = %v, %v", ok, err)
		}
		again, err := b.Claim(ctx, 7, false)
		if err != nil {
			t.Fatal(err)
		}
		if again.Try != 2 || again.Tick != 7 {
			t.Fatalf("claim after the holder died: try %d tick %d, want 2, 7", again.Try, again.Tick)
		}
		// The dead holder's Finish records nothing.
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Finish of a lost claim: %v, want ErrNotHeld", err)
		}
		st, err := b.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Done != 0 || st.Running != 7 || st.Owner != again.Owner() {
			t.Fatalf("state after a lost claim's Finish = %+v", st)
		}
		// After another death, a claim of a later tick takes the one
		// left unfinished first (it is never overtaken), then its own.
		if _, err := ca.ForceUnlock(ctx, "job"); err != nil {
			t.Fatal(err)
		}
		first := mustClaim(t, ctx, a, 8)
		if first.Try != 3 || first.Tick != 7 {
			t.Fatalf("claim of tick 8 with tick 7 unfinished: try %d tick %d, want 3, 7", first.Try, first.Tick)
		}
		if err := first.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 3}); err != nil {
			t.Fatal(err)
		}
		later := mustClaim(t, ctx, a, 8)
		if later.Try != 1 || later.Tick != 8 {
			t.Fatalf("claim of tick 8 again: try %d tick %d, want 1, 8", later.Try, later.Tick)
		}
		if err := later.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
			t.Fatal(err)
		}
		if st, err := b.State(ctx); err != nil || st.Done != 8 || st.Running != 0 {
			t.Fatalf("state after both ticks: %+v, %v", st, err)
		}
	})
}

func TestLedgerOverlap(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := testkit.Context(t)
		a := ledger(t, store.NewClient(t), "job")
		cb := store.NewClient(t)
		b := ledger(t, cb, "job")
		cl := mustClaim(t, ctx, a, 7)
		if _, err := b.Claim(ctx, 8, false); !errors.Is(err, lock.ErrLocked) {
			t.Fatalf("claim of tick 8 while 7 runs, no queue: %v, want ErrLocked", err)
		}
		if _, err := a.Claim(ctx, 6, true); !errors.Is(err, fleet.ErrDone) {
			t.Fatalf("claim of tick 6 while 7 runs: %v, want ErrDone", err)
		}
		ch := claimAsync(ctx, b, 8, true)
		locktest.WaitForWaiter(t, cb, "job")
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
			t.Fatal(err)
		}
		r := awaitClaim(t, ch)
		if r.err != nil || r.cl.Tick != 8 {
			t.Fatalf("queued claim of tick 8: %+v, %v", r.cl, r.err)
		}
		if err := r.cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestLedgerReentryAndFinishDropsAllHolds(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := testkit.Context(t)
		c := store.NewClient(t)
		cl := mustClaim(t, ctx, ledger(t, c, "job"), 1)
		inner, err := c.Mutex("job").Lock(cl.Context())
		if err != nil || inner.Owner() != cl.Owner() || inner.Token() != cl.Token() {
			t.Fatalf("re-entry under a claim: %v, %v; want the claim's lease", inner, err)
		}
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
			t.Fatal(err)
		}
		l, err := store.NewClient(t).Mutex("job").TryLock(ctx)
		if err != nil {
			t.Fatalf("the lock after Finish with two holds: %v", err)
		}
		_ = l.Unlock(ctx)
	})
}

func TestLedgerWaitEndsWithCtx(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := testkit.Context(t)
		cl := mustClaim(t, ctx, ledger(t, store.NewClient(t), "job"), 1)
		defer cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1})
		cb := store.NewClient(t)
		wctx, cancel := context.WithCancel(ctx)
		ch := claimAsync(wctx, ledger(t, cb, "job"), 1, false)
		locktest.WaitForWaiter(t, cb, "job")
		cancel()
		if r := awaitClaim(t, ch); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("claim after its ctx ended: %v, want context.Canceled", r.err)
		}
	})
}

func TestLedgerBadInput(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct{ name, lock, id string }{
		{"empty lock", "", "j"},
		{"brace in lock", "a{b", "j"},
		{"empty id", "a", ""},
		{"brace in id", "a", "j}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := fleet.New(c).Ledger(tc.lock, tc.id); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("Ledger(%q, %q) = %v, want ErrInvalid", tc.lock, tc.id, err)
			}
		})
	}
	g := ledger(t, c, "a")
	if _, err := g.Claim(context.Background(), 1, false, lock.WithLease(time.Second)); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("Claim with WithLease: %v, want ErrInvalid", err)
	}
}

func TestLedgerWrongTypeKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv)
	ctx := testkit.Context(t)
	g := ledger(t, c, "job")
	srv.Do("SET", g.Key(), "not a ledger")
	if _, err := g.Claim(ctx, 1, false); !errors.Is(err, lock.ErrBadKey) {
		t.Fatalf("claim with a string at the ledger's key: %v, want ErrBadKey", err)
	}
	if _, err := g.State(ctx); !errors.Is(err, lock.ErrBadKey) {
		t.Fatalf("State with a string at the ledger's key: %v, want ErrBadKey", err)
	}
	if got := srv.Do("GET", g.Key()); got != "not a ledger" {
		t.Fatalf("the foreign key now holds %v", got)
	}
	if n := srv.Do("EXISTS", "lockcron:{job}").(int64); n != 0 {
		t.Fatal("a refused claim left the lock taken")
	}
}

func TestLedgerKeyAndTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv)
	ctx := testkit.Context(t)
	g := ledger(t, c, "nightly")
	if g.Key() != "lockcron:{nightly}:ledger:job" {
		t.Fatalf("key = %q", g.Key())
	}
	cl := mustClaim(t, ctx, g, 1)
	if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
		t.Fatal(err)
	}
	// The ledger outlives its last claim or finish by LedgerTTL, and by
	// at most a day more (its lifetime is renewed once a day, not at each
	// claim and finish).
	ttl := time.Duration(srv.Do("PTTL", g.Key()).(int64)) * time.Millisecond
	if ttl < fleet.LedgerTTL || ttl > fleet.LedgerTTL+24*time.Hour {
		t.Fatalf("ledger PTTL = %v, want [%v, %v]", ttl, fleet.LedgerTTL, fleet.LedgerTTL+24*time.Hour)
	}
}

// TestLedgerLifetimeRenewedOncePerPeriod: claims and finishes renew the
// ledger's and the history's lifetimes only once their renewal period
// has passed since the last renewal (the ledger's fields renewed and
// hrenewed), not at each call; and then they do.
func TestLedgerLifetimeRenewedOncePerPeriod(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv)
	ctx := testkit.Context(t)
	rdb := srv.Client()
	g := ledger(t, c, "renewal")
	finishWith(t, ctx, g, 1)
	// Shorten both lifetimes by hand: a claim and a finish within the
	// period leave them as they are.
	for _, key := range []string{g.Key(), g.HistoryKey()} {
		if err := rdb.PExpire(ctx, key, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	finishWith(t, ctx, g, 2)
	for _, key := range []string{g.Key(), g.HistoryKey()} {
		if ttl := rdb.PTTL(ctx, key).Val(); ttl > time.Hour {
			t.Fatalf("%s: TTL %v after a claim and finish within the renewal period, want at most the hour left", key, ttl)
		}
	}
	// The renewals are due: the next claim renews the ledger's, the next
	// finish both.
	if err := rdb.HSet(ctx, g.Key(), "renewed", 1, "hrenewed", 1).Err(); err != nil {
		t.Fatal(err)
	}
	cl := mustClaim(t, ctx, g, 3)
	if ttl := rdb.PTTL(ctx, g.Key()).Val(); ttl < fleet.LedgerTTL {
		t.Fatalf("ledger TTL %v after a claim with its renewal due, want at least %v", ttl, fleet.LedgerTTL)
	}
	if ttl := rdb.PTTL(ctx, g.HistoryKey()).Val(); ttl > time.Hour {
		t.Fatalf("history TTL %v after a claim, want the hour left (a claim does not touch the history)", ttl)
	}
	if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: 3, Entry: map[string]string{"tick": "3"}}); err != nil {
		t.Fatal(err)
	}
	if ttl := rdb.PTTL(ctx, g.HistoryKey()).Val(); ttl < fleet.DefaultHistoryMaxAge {
		t.Fatalf("history TTL %v after a finish with its renewal due, want at least %v", ttl, fleet.DefaultHistoryMaxAge)
	}
}

// Each claim records its ledger's definition; the next claim is told the
// one recorded before it and by whom, whichever replica made it, and a
// claimant without one leaves them as they are.
func TestLedgerDefinition(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := testkit.Context(t)
		c1, c2 := store.NewClient(t), store.NewClient(t)
		v1, err := fleet.New(c1).Ledger("job", "job", fleet.WithDefinition("v1"))
		if err != nil {
			t.Fatal(err)
		}
		v2, err := fleet.New(c2).Ledger("job", "job", fleet.WithDefinition("v2"))
		if err != nil {
			t.Fatal(err)
		}
		none := ledger(t, c2, "job")
		for i, step := range []struct {
			g      *fleet.Ledger
			want   string // the definition the claim is told
			wantBy string // the Client whose claim recorded it
		}{
			{v1, "", ""}, {v1, "v1", c1.ID()}, {v2, "v1", c1.ID()}, {v2, "v2", c2.ID()},
			{none, "v2", c2.ID()}, {v1, "v2", c2.ID()}, {none, "v1", c1.ID()},
		} {
			tick := int64(100 + i)
			cl := mustClaim(t, ctx, step.g, tick)
			by, _, _ := strings.Cut(cl.DefinitionBy, ":")
			if cl.Definition != step.want || by != step.wantBy {
				t.Errorf("claim %d of tick %d: Definition = %q by %q, want %q by Client %q", i, tick, cl.Definition, cl.DefinitionBy, step.want, step.wantBy)
			}
			if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
				t.Fatal(err)
			}
		}
	})
}
