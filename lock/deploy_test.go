package lock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// watchExclusion polls contender's TryLock until stop closes or it acquires,
// and reports whether it ever acquired while holder still held its lease.
func watchExclusion(ctx context.Context, holder *lock.Lease, contender lock.Locker, stop <-chan struct{}) <-chan error {
	out := make(chan error, 1)
	go func() {
		defer close(out)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			l, err := contender.TryLock(ctx)
			if err != nil {
				continue // held, or the failover is under way
			}
			heldErr := holder.Err()
			_ = l.Unlock(ctx)
			if heldErr == nil {
				out <- fmt.Errorf("a second owner acquired %q while the holder's lease still held", contender.Name())
			}
			return
		}
	}()
	return out
}

// A failover of the primary while a lock is held: the holder either keeps
// its lock (its renewals reach the new primary, which has the lock) or
// learns that it lost it; no one else gets it meanwhile.
func TestSentinelFailoverWhileHeld(t *testing.T) {
	s := redistest.StartSentinel(t)
	ctx := testkit.Context(t)
	holderC, err := lock.New(s.Client(), lock.WithLeaseTime(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer holderC.Close()
	other, err := lock.New(s.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	l, err := holderC.Mutex("failover").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	excl := watchExclusion(ctx, l, other.Mutex("failover"), stop)
	s.Failover()
	// Three renewal periods on the new primary.
	time.Sleep(time.Second)
	close(stop)
	if err := <-excl; err != nil {
		t.Fatal(err)
	}
	if err := l.Err(); err != nil {
		if !errors.Is(err, lock.ErrLockLost) || context.Cause(l.Context()) == nil {
			t.Fatalf("holder ended with %v, want ErrLockLost and its context cancelled", err)
		}
		return
	}
	if got := s.Primary().Do("HGET", "lockcron:{failover}", l.Owner()); got != "1" {
		t.Fatalf("the holder's lease holds, but the new primary has holds %v for it", got)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// With replica acknowledgement, a lagging replica makes acquisitions fail
// closed, and a lock taken before a failover is never granted to a second
// owner while its holder's lease holds: after the failover the new primary
// has no replica, renewals are not acknowledged, and the holder loses its
// lease before the lock can expire and be taken.
func TestSentinelFailoverWithAck(t *testing.T) {
	s := redistest.StartSentinel(t)
	ctx := testkit.Context(t)
	holderC, err := lock.New(s.Client(), lock.WithLeaseTime(time.Second), lock.WithReplicaAck(1, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer holderC.Close()
	other, err := lock.New(s.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	s.Replica().Pause()
	_, err = holderC.Mutex("acked").Lock(ctx)
	s.Replica().Resume()
	if !errors.Is(err, lock.ErrNoAck) {
		t.Fatalf("Lock with the replica paused: %v, want ErrNoAck", err)
	}
	// The resumed replica first works through what it missed; on a loaded
	// machine that can take longer than the ack timeout.
	waitReplicaCaughtUp(t, s.Primary())

	l, err := holderC.Mutex("acked").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	excl := watchExclusion(ctx, l, other.Mutex("acked"), stop)
	s.Failover()
	select {
	case <-l.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder kept a lease that no replica acknowledges")
	}
	if !errors.Is(l.Err(), lock.ErrLockLost) {
		t.Fatalf("holder: %v, want ErrLockLost", l.Err())
	}
	// The lock expires on the new primary within a lease; the watcher then
	// takes it, after the holder knew it lost it.
	deadline := time.After(5 * time.Second)
	select {
	case err := <-excl:
		if err != nil {
			t.Fatal(err)
		}
	case <-deadline:
		close(stop)
		t.Fatal("the lock was not free on the new primary 5s after the holder lost it")
	}
}

// Locks on names over all of a Cluster's slots: every kind's scripts keep
// their keys in one slot (no CROSSSLOT), and the locks spread over the
// three primaries.
func TestClusterLocksAllSlots(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := testkit.Context(t)
	c, err := lock.New(cl.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	perPrimary := map[string]int{}
	for i := range 300 {
		name := fmt.Sprintf("job-%d", i)
		lockers := []lock.Locker{c.Mutex(name), c.FairMutex(name), c.RWMutex(name), c.RWMutex(name).RLocker(), c.Semaphore(name, 2)}
		for _, l := range lockers {
			lease, err := l.Lock(ctx)
			if err != nil {
				t.Fatalf("%s %T: %v", name, l, err)
			}
			if err := lease.Unlock(ctx); err != nil {
				t.Fatalf("%s %T: unlock: %v", name, l, err)
			}
		}
		g, err := fleet.New(c).Ledger(name, "j")
		if err != nil {
			t.Fatal(err)
		}
		claim, err := g.Claim(ctx, 1, false)
		if err != nil {
			t.Fatalf("%s: claim: %v", name, err)
		}
		if err := claim.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
			t.Fatalf("%s: finish: %v", name, err)
		}
		perPrimary[cl.PrimaryForKey("lockcron:{"+name+"}").Addr()]++
	}
	if len(perPrimary) != 3 {
		t.Fatalf("locks on %d primaries, want all 3: %v", len(perPrimary), perPrimary)
	}
}

// On a Cluster, a Client's leases on names over the three primaries are
// renewed together, one pipeline per primary, with replica acknowledgement
// (WAIT on each primary's connection) and without: every lease is kept.
func TestClusterRenewsLeasesTogether(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := testkit.Context(t)
	for _, acked := range []bool{false, true} {
		opts := []lock.Option{lock.WithLeaseTime(time.Second)}
		if acked {
			opts = append(opts, lock.WithReplicaAck(1, 2*time.Second))
		}
		c, err := lock.New(cl.Client(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		var leases []*lock.Lease
		primaries := map[string]bool{}
		for i := range 6 {
			name := fmt.Sprintf("together-%d", i)
			primaries[cl.PrimaryForKey("lockcron:{"+name+"}").Addr()] = true
			for _, l := range []lock.Locker{c.Mutex(name), c.RWMutex(name).RLocker(), c.Semaphore(name, 1)} {
				leases = append(leases, locktest.MustLock(t, ctx, l))
			}
		}
		select {
		case <-leases[0].Done():
		case <-leases[len(leases)-1].Done():
		case <-time.After(3 * time.Second): // nine renewal periods (a lease of 1 s: its slack outlasts a busy machine's delays)
		}
		for _, l := range leases {
			if err := l.Err(); err != nil {
				t.Errorf("acked %t: lease %q on a Cluster: %v", acked, l.Name(), err)
			}
		}
		for _, l := range leases {
			locktest.MustUnlock(t, l)
		}
		if len(primaries) < 2 {
			t.Errorf("the names are on %d primaries: the test proves less than it says", len(primaries))
		}
		_ = c.Close()
	}
}

// A waiter is woken after a Cluster failover: the Pub/Sub connection may
// have been to the failed node; it reconnects, and the unlock after the
// failover still reaches the waiter long before the holder's TTL.
func TestClusterWaiterWokenAfterFailover(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := testkit.Context(t)
	holderC, err := lock.New(cl.Client(), lock.WithLeaseTime(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer holderC.Close()
	waiterC, err := lock.New(cl.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer waiterC.Close()

	for _, kind := range []string{"mutex", "fair"} {
		name := "wake-" + kind
		mk := func(c *lock.Client) lock.Locker {
			if kind == "fair" {
				return c.FairMutex(name)
			}
			return c.Mutex(name)
		}
		l, err := mk(holderC).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		got := make(chan time.Time, 1)
		wg.Go(func() {
			w, err := mk(waiterC).Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- time.Now()
			_ = w.Unlock(ctx)
		})
		locktest.WaitQueued(t, waiterC, name, 1)
		cl.Failover(cl.PrimaryForKey("lockcron:{" + name + "}"))
		// Either the holder still holds (and unlocks now), or the failover
		// lost the lock and the waiter took it.
		unlocked := time.Now()
		if err := l.Unlock(ctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
			t.Fatal(err)
		}
		select {
		case at := <-got:
			if d := at.Sub(unlocked); d > 3*time.Second {
				t.Fatalf("%s: waiter woke %v after the unlock; the holder's TTL is 10s", kind, d)
			}
		case <-time.After(8 * time.Second):
			t.Fatalf("%s: waiter not woken 8s after the unlock that followed a failover", kind)
		}
		wg.Wait()
	}
}

// waitReplicaCaughtUp polls until primary's replica acknowledges all the
// writes so far (WAIT 1), for up to 10 s.
func waitReplicaCaughtUp(t *testing.T, primary *redistest.Server) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for primary.Do("WAIT", 1, 200) != int64(1) {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not acknowledge the primary's writes within 10s of resuming")
		}
	}
}

// With WithReplicaAck on a Cluster, a lock goes to its slot's primary over
// that node's own connection (WAIT must follow the script there), where
// the cluster client follows no MOVED. After a failover, with the old
// primary back as a replica, a client that has not learnt the new slot map
// meets MOVED: the Lock rides it out, has the map reloaded, and takes the
// lock on the new primary, acknowledged by the old one.
func TestClusterAckAfterFailover(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := testkit.Context(t)
	// Not cl.Client(): that one is told of each failover.
	rdb := redis.NewClusterClient(cl.ClusterOptions())
	defer rdb.Close()
	c, err := lock.New(rdb, lock.WithReplicaAck(1, 2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const key = "lockcron:{acked}"
	mu := c.Mutex("acked")
	l, err := mu.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	old := cl.PrimaryForKey(key)
	cl.Failover(old)
	old.Restart() // its nodes.conf survives: it rejoins as the new primary's replica
	waitReplicaCaughtUp(t, cl.PrimaryForKey(key))
	l, err = mu.Lock(ctx, lock.WithWait(15*time.Second))
	if err != nil {
		t.Fatalf("Lock after the failover: %v", err)
	}
	defer func() { _ = l.Unlock(ctx) }()
	if now := cl.PrimaryForKey(key); now == old {
		t.Fatalf("%s still serves the lock's slot after the failover", old.Addr())
	}
	o := old.Options()
	o.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
	replica := redis.NewClient(o)
	defer replica.Close()
	if got, err := replica.HGet(ctx, key, l.Owner()).Result(); got != "1" {
		t.Fatalf("the old primary, now a replica, has holds %q (%v) for the owner right after Lock, want 1", got, err)
	}
}
