package fleet_test

import (
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
