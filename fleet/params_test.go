package fleet_test

import (
	"errors"
	"testing"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// Trigger keeps a request's params in the ledger that claims it, where
// another Client reads them by the request's number; once the request is
// done, a later Trigger drops them. A ledger of another lock is refused.
func TestTriggerParams(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			cs := locktest.NewStore(t, be).NewClients(t, 2)
			ctx := testkit.Context(t)
			g, _ := fleet.New(cs[0]).Ledger("job", "job")
			m, _ := fleet.New(cs[0]).Ledger("job", "job!manual")
			other, _ := fleet.New(cs[1]).Ledger("job", "job!manual")
			n, err := g.Trigger(ctx, m, map[string]string{"customer": "42"})
			if err != nil || n != 1 {
				t.Fatalf("Trigger = %d, %v; want 1", n, err)
			}
			if p, err := other.Params(ctx, 1); err != nil || p["customer"] != "42" || len(p) != 1 {
				t.Fatalf("Params(1) = %v, %v; want customer 42", p, err)
			}
			if p, err := other.Params(ctx, 2); err != nil || p != nil {
				t.Fatalf("Params(2) = %v, %v; want none", p, err)
			}
			cl, err := other.Claim(ctx, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
				t.Fatal(err)
			}
			if n, err := g.Trigger(ctx, m, nil); err != nil || n != 2 {
				t.Fatalf("Trigger = %d, %v; want 2", n, err)
			}
			if p, err := other.Params(ctx, 2); err != nil || p == nil || len(p) != 0 {
				t.Fatalf("Params(2), a request without params = %v, %v; want an empty map", p, err)
			}
			if p, err := other.Params(ctx, 1); err != nil || p != nil {
				t.Fatalf("Params(1) after it was done and another trigger: %v, %v; want dropped", p, err)
			}
			if st, _ := g.State(ctx); st.Triggers != 2 {
				t.Fatalf("state: %+v; want 2 triggers", st)
			}
			elsewhere, _ := fleet.New(cs[0]).Ledger("other", "other!manual")
			if _, err := g.Trigger(ctx, elsewhere, nil); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("Trigger into a ledger of another lock: %v, want ErrInvalid", err)
			}
			if st, _ := g.State(ctx); st.Triggers != 2 {
				t.Fatalf("state after a refused trigger: %+v; want 2 triggers", st)
			}
		})
	}
}

// Ordered requests (Trigger with params) are claimed in their order: a
// claim of a later one claims the first one not done, with its params,
// so that none is passed over; a request without params is not ordered.
func TestTriggerOrdered(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			cs := locktest.NewStore(t, be).NewClients(t, 2)
			ctx := testkit.Context(t)
			g, _ := fleet.New(cs[0]).Ledger("job", "job")
			m, _ := fleet.New(cs[0]).Ledger("job", "job!manual")
			other, _ := fleet.New(cs[1]).Ledger("job", "job!manual")
			for i, p := range []map[string]string{{"customer": "1"}, {}, nil} {
				if n, err := g.Trigger(ctx, m, p); err != nil || n != int64(i+1) {
					t.Fatalf("Trigger %d = %d, %v", i+1, n, err)
				}
			}
			for _, want := range []struct {
				tick   int64
				params map[string]string
			}{{1, map[string]string{"customer": "1"}}, {2, map[string]string{}}, {3, nil}} {
				cl, err := other.Claim(ctx, 3, false)
				if err != nil {
					t.Fatal(err)
				}
				if cl.Tick != want.tick || (cl.Params == nil) != (want.params == nil) || cl.Params["customer"] != want.params["customer"] {
					t.Fatalf("Claim(3) claimed %d with params %v; want %d with %v", cl.Tick, cl.Params, want.tick, want.params)
				}
				if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := other.Claim(ctx, 3, false); !errors.Is(err, fleet.ErrDone) {
				t.Fatalf("Claim(3) once done: %v; want ErrDone", err)
			}
			// Unordered requests are not waited for: 5 is claimed before 4.
			for range 2 {
				if _, err := g.Trigger(ctx, m, nil); err != nil {
					t.Fatal(err)
				}
			}
			if cl, err := other.Claim(ctx, 5, false); err != nil || cl.Tick != 5 || cl.Params != nil {
				t.Fatalf("Claim(5) past an unordered 4 = %+v, %v; want 5 without params", cl, err)
			}
		})
	}
}
