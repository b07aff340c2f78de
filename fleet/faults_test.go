package fleet_test

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/faultproxy"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// On a slow network, claims that queue behind a batch on its way keep their
// leases: a claim's lease counts from when it was sent, not from when it
// was queued a round trip earlier.
//
// The delay comes from faultproxy, which delays each chunk by the round
// trip from when it was read (a pipeline's replies arrive together), not
// from faultyConns, whose reads each sleep the whole delay.
func TestNoFalseLockLossOfQueuedClaims(t *testing.T) {
	srv := redistest.Start(t)
	proxy, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	const leaseTime = 2 * time.Second
	const n = 8
	o := srv.Options()
	o.Addr = proxy.Addr()
	o.MinIdleConns = n + 2 // warm connections, as in a service that has run a while
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	c, err := lock.New(rdb, lock.WithLeaseTime(leaseTime))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testkit.Context(t)
	ledgers := make([]*fleet.Ledger, n)
	for i := range ledgers {
		if ledgers[i], err = fleet.New(c).Ledger("queued-"+strconv.Itoa(i), "job"); err != nil {
			t.Fatal(err)
		}
	}
	// Warm: the scripts loaded, connections made.
	for _, g := range ledgers {
		cl, err := g.Claim(ctx, 1, false, lock.WithWait(0))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: cl.Try, Seen: 1}); err != nil {
			t.Fatal(err)
		}
	}
	// Each idle connection has had its handshake (HELLO), as in a service
	// that has run a while: blocking reads at once, one per connection.
	var warm sync.WaitGroup
	for range n + 2 {
		warm.Go(func() { _ = rdb.BLPop(ctx, 100*time.Millisecond, "warm-"+t.Name()).Err() })
	}
	warm.Wait()
	proxy.SetDelay(leaseTime * 35 / 100)
	claims := make([]*fleet.Claim, n)
	var wg sync.WaitGroup
	for i, g := range ledgers {
		wg.Go(func() {
			cl, err := g.Claim(ctx, 2, false, lock.WithWait(0))
			if err != nil {
				t.Error(err)
				return
			}
			claims[i] = cl
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	select {
	case <-time.After(3 * leaseTime):
	case <-claims[0].Done():
	case <-claims[n-1].Done():
	}
	for i, cl := range claims {
		if err := cl.Err(); err != nil {
			t.Errorf("claim %d with a round trip of 0.35 of the lease: %v", i, err)
		}
	}
	proxy.SetDelay(0)
	for _, cl := range claims {
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: cl.Try, Seen: 2}); err != nil && !errors.Is(err, lock.ErrNotHeld) {
			t.Error(err)
		}
	}
}
