package fleet_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// Fair claims queue behind a run for an earlier tick in the order they
// came, across Clients and ledgers sharing the lock; the release wakes the
// first alone. A claim of a tick done meanwhile leaves the queue with
// ErrDone.
func TestFairLedgerOrder(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			cs := locktest.NewStore(t, be).NewClients(t, 3)
			ctx := testkit.Context(t)
			first, err := fleet.New(cs[0]).FairLedger("shared", "job-0")
			if err != nil {
				t.Fatal(err)
			}
			held, err := first.Claim(ctx, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				i   int
				err error
			}
			order := make(chan result, 6)
			for i := range 6 {
				c := cs[i%3]
				g, err := fleet.New(c).FairLedger("shared", fmt.Sprintf("job-%d", i%2+1)) // two jobs share the lock
				if err != nil {
					t.Fatal(err)
				}
				before := c.Waiting("shared")
				go func() {
					cl, err := g.Claim(ctx, int64(10+i), true)
					if err == nil {
						order <- result{i: i}
						err = cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1})
					}
					if err != nil {
						order <- result{i: i, err: err}
					}
				}()
				locktest.WaitQueued(t, c, "shared", before+1)
			}
			if err := held.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
				t.Fatal(err)
			}
			// job-1 claims 10, 12, 14 and job-2 11, 13, 15, in queue order;
			// each finishes before the next claims.
			for want := range 6 {
				select {
				case r := <-order:
					if r.err != nil {
						t.Fatalf("claim %d: %v", r.i, r.err)
					}
					if r.i != want {
						t.Fatalf("claim %d took the lock %dth, want queue order", r.i, want)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("claim %d did not come", want)
				}
			}
		})
	}
}

// A fair claim that would not wait takes a free lock even while the queue
// still holds the waiters of a tick just done (on their way out), and a
// one-attempt claim never leaves a place behind.
func TestFairLedgerNoWaitClaims(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			cs := locktest.NewStore(t, be).NewClients(t, 3, lock.WithWaiterTTL(time.Minute))
			ctx := testkit.Context(t)
			ledger := func(c *lock.Client) *fleet.Ledger {
				g, err := fleet.New(c).FairLedger("job", "job")
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			first, err := ledger(cs[0]).Claim(ctx, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			// Another replica waits for the same tick: it has a place.
			waited := make(chan error, 1)
			go func() {
				_, err := ledger(cs[1]).Claim(ctx, 1, false)
				waited <- err
			}()
			locktest.WaitQueued(t, cs[1], "job", 1)
			// A one-attempt claim of a later tick finds the lock held and
			// takes no place.
			if _, err := ledger(cs[2]).Claim(ctx, 2, false, lock.WithWait(0)); !errors.Is(err, lock.ErrLocked) {
				t.Fatalf("one attempt while held: %v, want ErrLocked", err)
			}
			if err := first.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
				t.Fatal(err)
			}
			// The next tick's claim does not wait behind the waiter of the
			// tick done, whether or not that one has left yet.
			next, err := ledger(cs[0]).Claim(ctx, 2, false)
			if err != nil {
				t.Fatalf("claim of the next tick after a finish: %v", err)
			}
			if err := <-waited; !errors.Is(err, fleet.ErrDone) {
				t.Fatalf("the waiter of the tick done: %v, want ErrDone", err)
			}
			if err := next.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
				t.Fatal(err)
			}
			if n := cs[0].Waiting("job") + cs[1].Waiting("job") + cs[2].Waiting("job"); n != 0 {
				t.Fatalf("%d waiters left", n)
			}
		})
	}
}
