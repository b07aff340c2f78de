package lock_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// startReplica makes a second server a replica of primary and waits until
// it is in sync.
func startReplica(t *testing.T, primary *redistest.Server) *redistest.Server {
	t.Helper()
	r := redistest.Start(t)
	host, port, _ := net.SplitHostPort(primary.Addr())
	r.Do("REPLICAOF", host, port)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(r.Do("INFO", "replication").(string), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatal("replica not in sync after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return r
}

// With no replica to acknowledge it, an acquisition fails closed: the error
// wraps ErrNoAck and the lock is given back.
func TestReplicaAckFailsClosed(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	c := locktest.NewClient(t, srv, lock.WithReplicaAck(1, 50*time.Millisecond))
	for name, l := range map[string]lock.Locker{"mutex": c.Mutex("acked"), "fair": c.FairMutex("acked")} {
		_, err := l.Lock(ctx)
		if !errors.Is(err, lock.ErrNoAck) || !strings.Contains(err.Error(), "0 of 1 replicas") {
			t.Fatalf("%s: Lock without replicas: %v, want ErrNoAck", name, err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for srv.Do("EXISTS", "lockcron:{acked}").(int64) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the unacknowledged lock was not undone", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// With a replica, Lock returns once the replica has the lock.
func TestReplicaAckWaitsForReplica(t *testing.T) {
	srv := redistest.Start(t)
	replica := startReplica(t, srv)
	ctx := testkit.Context(t)
	c := locktest.NewClient(t, srv, lock.WithReplicaAck(1, 5*time.Second), lock.WithLeaseTime(time.Second))
	l, err := c.Mutex("acked").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := replica.Do("HGET", "lockcron:{acked}", l.Owner()); got != "1" {
		t.Fatalf("the replica has holds %v for the owner right after Lock, want 1", got)
	}
	// Renewals are acknowledged too: the lease lives past several periods.
	select {
	case <-l.Done():
		t.Fatalf("lease ended: %v", l.Err())
	case <-time.After(time.Second):
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Client's leases of every kind are renewed together, in one pipeline
// that ends with WAIT: each renewal acknowledged, and every lease kept.
func TestReplicaAckRenewsLeasesTogether(t *testing.T) {
	srv := redistest.Start(t)
	startReplica(t, srv)
	ctx := testkit.Context(t)
	c := locktest.NewClient(t, srv, lock.WithReplicaAck(1, 5*time.Second), lock.WithLeaseTime(time.Second))
	var leases []*lock.Lease
	for _, l := range []lock.Locker{c.Mutex("acked-a"), c.Mutex("acked-b"), c.FairMutex("acked-c"), c.RWMutex("acked-d"), c.Semaphore("acked-e", 2)} {
		leases = append(leases, locktest.MustLock(t, ctx, l))
	}
	select {
	case <-leases[0].Done():
	case <-leases[4].Done():
	case <-time.After(3 * time.Second): // nine renewal periods (a lease of 1 s: its slack outlasts a busy machine's delays)
	}
	for _, l := range leases {
		if err := l.Err(); err != nil {
			t.Errorf("lease %q under replica acknowledgement: %v", l.Name(), err)
		}
	}
	for _, l := range leases {
		locktest.MustUnlock(t, l)
	}
}

// WAITAOF on a server that lacks it: a clear error, and nothing held.
func TestAOFAckUnsupported(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	if v := srv.Do("INFO", "server").(string); !strings.Contains(v, "redis_version:7.0") && !strings.Contains(v, "redis_version:6") {
		t.Skip("this server may have WAITAOF")
	}
	c := locktest.NewClient(t, srv, lock.WithAOFAck(0, 1, 50*time.Millisecond))
	_, err := c.Mutex("aof").Lock(testkit.Context(t))
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "WAITAOF needs Redis 7.2") {
		t.Fatalf("Lock with WAITAOF on Redis 7.0: %v, want ErrUnsupported naming WAITAOF", err)
	}
}

func TestAckOptionsInvalid(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for name, opt := range map[string]lock.Option{
		"no replicas":      lock.WithReplicaAck(0, time.Second),
		"zero timeout":     lock.WithReplicaAck(1, 0),
		"aof local 2":      lock.WithAOFAck(2, 0, time.Second),
		"aof nothing":      lock.WithAOFAck(0, 0, time.Second),
		"aof neg replicas": lock.WithAOFAck(1, -1, time.Second),
	} {
		if _, err := lock.New(srv.Client(), opt); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if _, err := lock.NewMemory(lock.WithReplicaAck(1, time.Second)); !errors.Is(err, lock.ErrInvalid) {
		t.Errorf("NewMemory with WithReplicaAck: %v, want ErrInvalid", err)
	}
}
