package fleet_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// WithReplace: a claim that finds the lock held for an earlier tick
// records its tick in the ledger (LedgerState.Replace), tells the holder's
// Client (a TickEvent with Replace), and waits for the lock; a claim of a
// ledger without it records nothing. On both backends.
func TestLedgerReplace(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := testkit.Context(t)
		ca, cb := store.NewClient(t), store.NewClient(t)
		a := ledger(t, ca, "job")
		b, err := fleet.New(cb).Ledger("job", "job", fleet.WithReplace())
		if err != nil {
			t.Fatal(err)
		}
		heard := make(chan fleet.TickEvent, 10)
		stop, err := a.Watch(func(ev fleet.TickEvent) {
			if ev.Replace {
				heard <- ev
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
		testkit.Eventually(t, 10*time.Second, "the watch subscribed", fleet.New(ca).Subscribed)

		cl := mustClaim(t, ctx, a, 7)
		if _, err := a.Claim(ctx, 8, true, lock.WithWait(0)); err == nil {
			t.Fatal("claim of tick 8 while 7 runs: no error")
		}
		if st, err := a.State(ctx); err != nil || st.Replace != 0 {
			t.Fatalf("after a claim that does not replace: Replace %d, %v; want 0", st.Replace, err)
		}
		ch := claimAsync(ctx, b, 9, true)
		select {
		case ev := <-heard:
			if ev.Tick != 9 {
				t.Errorf("heard %+v, want a request of tick 9", ev)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the holder's Client heard no request to replace within 10s")
		}
		if st, err := a.State(ctx); err != nil || st.Replace != 9 {
			t.Fatalf("ledger Replace %d, %v; want 9", st.Replace, err)
		}
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "replaced", Tries: 1}); err != nil {
			t.Fatal(err)
		}
		r := awaitClaim(t, ch)
		if r.err != nil || r.cl.Tick != 9 {
			t.Fatalf("replacing claim of tick 9: %+v, %v", r.cl, r.err)
		}
		if err := r.cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
			t.Fatal(err)
		}
		if st, err := a.State(ctx); err != nil || st.Replace != 9 || st.Done != 9 {
			t.Fatalf("after both: %+v, %v; want Replace 9, Done 9", st, err)
		}
	})
}

// A claim that replaces and takes over an earlier unfinished tick (its
// holder gone, its lock free) records its own tick in the ledger's
// replace: the earlier tick is to be recorded replaced, not run again. A
// claim that does not replace takes it over as before, recording nothing.
// ReplaceAsked reads the field alone. On both backends.
func TestLedgerReplaceTakeover(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := testkit.Context(t)
		for _, replace := range []bool{false, true} {
			name := fmt.Sprintf("job-%v", replace)
			dead, c := store.NewClient(t), store.NewClient(t)
			mustClaim(t, ctx, ledger(t, dead, name), 7)
			if ok, err := dead.ForceUnlock(ctx, name); err != nil || !ok {
				t.Fatalf("ForceUnlock = %v, %v", ok, err)
			}
			var opts []fleet.LedgerOption
			if replace {
				opts = append(opts, fleet.WithReplace())
			}
			g, err := fleet.New(c).Ledger(name, "job", opts...)
			if err != nil {
				t.Fatal(err)
			}
			cl := mustClaim(t, ctx, g, 9)
			if cl.Tick != 7 || cl.Try != 2 {
				t.Fatalf("replace %v: claim of 9 took tick %d try %d, want the unfinished tick 7, try 2", replace, cl.Tick, cl.Try)
			}
			want := int64(0)
			if replace {
				want = 9
			}
			by, err := g.ReplaceAsked(ctx)
			if err != nil || by != want {
				t.Errorf("replace %v: ReplaceAsked after the takeover = %d, %v; want %d", replace, by, err, want)
			}
			if st, err := g.State(ctx); err != nil || st.Replace != want {
				t.Errorf("replace %v: State().Replace after the takeover = %d, %v; want %d", replace, st.Replace, err, want)
			}
			if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "replaced", Tries: 2}); err != nil {
				t.Fatal(err)
			}
			own := mustClaim(t, ctx, g, 9)
			if own.Tick != 9 || own.Try != 1 {
				t.Errorf("replace %v: claim of 9 after 7 finished: tick %d try %d, want 9, try 1", replace, own.Tick, own.Try)
			}
		}
	})
}

// A fair claim that replaces and fails (its queue's deadlines key holds
// another type: keepPlace cannot take its place) changes nothing: the
// ledger's replace is not written. Redis only: the memory store has no
// keys of another type.
func TestLedgerReplaceNotWrittenByFailedClaim(t *testing.T) {
	t.Parallel()
	store := locktest.NewStore(t, "redis")
	ctx := testkit.Context(t)
	ca, cb := store.NewClient(t), store.NewClient(t)
	a, err := fleet.New(ca).FairLedger("job", "job")
	if err != nil {
		t.Fatal(err)
	}
	b, err := fleet.New(cb).FairLedger("job", "job", fleet.WithReplace())
	if err != nil {
		t.Fatal(err)
	}
	mustClaim(t, ctx, a, 7)
	store.Server.Do("SET", "lockcron:{job}:timeout", "not a sorted set")
	if _, err := b.Claim(ctx, 9, true); !errors.Is(err, lock.ErrBadKey) {
		t.Fatalf("claim of 9 with a bad queue key: %v, want ErrBadKey", err)
	}
	if by, err := b.ReplaceAsked(ctx); err != nil || by != 0 {
		t.Errorf("ledger's replace after the failed claim = %d, %v; want 0 (nothing changed)", by, err)
	}
}

// ReplaceAsked on a key of another type: ErrBadKey naming it.
func TestLedgerReplaceAskedBadKey(t *testing.T) {
	t.Parallel()
	store := locktest.NewStore(t, "redis")
	g := ledger(t, store.NewClient(t), "job")
	store.Server.Do("SET", "lockcron:{job}:ledger:job", "x")
	if _, err := g.ReplaceAsked(testkit.Context(t)); !errors.Is(err, lock.ErrBadKey) || !strings.Contains(err.Error(), "lockcron:{job}:ledger:job") {
		t.Errorf("ReplaceAsked on a string key: %v, want ErrBadKey naming the key", err)
	}
}
