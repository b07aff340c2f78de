package lock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// Multi takes all of its parts or none: when one is held elsewhere, the
// ones it took are given back.
func TestMultiAllOrNothing(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			cs := locktest.NewStore(t, be).NewClients(t, 2)
			a, b := cs[0], cs[1]
			ctx := testkit.Context(t)
			other, err := b.Mutex("y").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			m := lock.Multi(a.Mutex("x"), a.Mutex("y"), a.FairMutex("z"))
			if _, err := m.TryLock(ctx); !errors.Is(err, lock.ErrLocked) {
				t.Fatalf("TryLock with y held: %v, want ErrLocked", err)
			}
			if _, err := m.Lock(ctx, lock.WithWait(100*time.Millisecond)); !errors.Is(err, lock.ErrLocked) {
				t.Fatalf("Lock with y held: %v, want ErrLocked", err)
			}
			for _, name := range []string{"x", "z"} {
				l, err := b.Mutex(name).TryLock(ctx)
				if err != nil {
					t.Fatalf("%s after the failed Multi: %v; it was not given back", name, err)
				}
				_ = l.Unlock(ctx)
			}
			if err := other.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			l, err := m.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Parts()) != 3 || l.Token() != l.Parts()[0].Token() {
				t.Fatalf("Multi lease: %d parts, token %d", len(l.Parts()), l.Token())
			}
			for _, name := range []string{"x", "y", "z"} {
				if _, err := b.Mutex(name).TryLock(ctx); !errors.Is(err, lock.ErrLocked) {
					t.Fatalf("%s while the Multi holds: %v, want ErrLocked", name, err)
				}
			}
			// Re-entry adds a hold to every part.
			l2, err := m.Lock(l.Context())
			if err != nil || l2 != l {
				t.Fatalf("re-entry: %v, same lease %v", err, l2 == l)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Mutex("x").TryLock(ctx); !errors.Is(err, lock.ErrLocked) {
				t.Fatal("x free after the inner Unlock")
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if l.Err() == nil {
				t.Fatal("Err nil after the last Unlock")
			}
			for _, name := range []string{"x", "y", "z"} {
				x, err := b.Mutex(name).TryLock(ctx)
				if err != nil {
					t.Fatalf("%s after Unlock: %v", name, err)
				}
				_ = x.Unlock(ctx)
			}
		})
	}
}

// Two Multi locks over the same names, given in opposite orders, on
// different Clients, never deadlock, and never hold at once.
func TestMultiOppositeOrders(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			cs := locktest.NewStore(t, be).NewClients(t, 2)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ms := []lock.Locker{
				lock.Multi(cs[0].Mutex("p"), cs[0].Mutex("q"), cs[0].Mutex("r")),
				lock.Multi(cs[1].Mutex("r"), cs[1].Mutex("q"), cs[1].Mutex("p")),
			}
			var inside, overlaps atomic.Int32
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Go(func() {
					for range 25 {
						l, err := ms[g%2].Lock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						if inside.Add(1) > 1 {
							overlaps.Add(1)
						}
						inside.Add(-1)
						if err := l.Unlock(ctx); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			if ctx.Err() != nil {
				t.Fatal("the Multi locks deadlocked")
			}
			if overlaps.Load() != 0 {
				t.Fatalf("%d overlaps", overlaps.Load())
			}
		})
	}
}

// A Multi lease is lost as soon as one part is, and its Unlock still gives
// back the other parts.
func TestMultiPartLost(t *testing.T) {
	srv1, srv2 := redistest.Start(t), redistest.Start(t)
	c1 := locktest.NewClient(t, srv1, lock.WithLeaseTime(300*time.Millisecond))
	c2 := locktest.NewClient(t, srv2, lock.WithLeaseTime(300*time.Millisecond))
	ctx := testkit.Context(t)
	l, err := lock.Multi(c1.Mutex("a"), c2.Mutex("b")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.ForceUnlock(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the Multi lease did not end after a part was lost")
	}
	if !errors.Is(l.Err(), lock.ErrLockLost) || !errors.Is(context.Cause(l.Context()), lock.ErrLockLost) {
		t.Fatalf("Err %v, cause %v: want ErrLockLost", l.Err(), context.Cause(l.Context()))
	}
	if err := l.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Unlock of a lost Multi: %v, want ErrNotHeld", err)
	}
	other := locktest.NewClient(t, srv1)
	x, err := other.Mutex("a").TryLock(ctx)
	if err != nil {
		t.Fatalf("part a after the lost Multi's Unlock: %v", err)
	}
	_ = x.Unlock(ctx)
}

func TestCompositeInvalid(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := testkit.Context(t)
	for name, l := range map[string]lock.Locker{
		"Multi()":            lock.Multi(),
		"Multi(nil)":         lock.Multi(c.Mutex("a"), nil),
		"RedLock(2 servers)": lock.RedLock(c.Mutex("a"), c.Mutex("b")),
	} {
		if _, err := l.Lock(ctx); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// redlockServers starts n independent servers with a Client each, and
// returns the servers and the parts of a RedLock named name.
func redlockServers(t *testing.T, n int, name string, opts ...lock.Option) ([]*redistest.Server, []lock.Locker) {
	srvs := make([]*redistest.Server, n)
	parts := make([]lock.Locker, n)
	for i := range srvs {
		srvs[i] = redistest.Start(t)
		parts[i] = locktest.NewClient(t, srvs[i], opts...).Mutex(name)
	}
	return srvs, parts
}

// RedLock acquires with one of three servers down, and refuses with two
// down, giving back what it took.
func TestRedLockMajority(t *testing.T) {
	t.Parallel()
	srvs, parts := redlockServers(t, 3, "red")
	ctx := testkit.Context(t)
	rl := lock.RedLock(parts...)

	l, err := rl.Lock(ctx, lock.WithWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	otherParts := make([]lock.Locker, 3)
	for i, s := range srvs {
		otherParts[i] = locktest.NewClient(t, s).Mutex("red")
	}
	if _, err := lock.RedLock(otherParts...).TryLock(ctx); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("a second RedLock owner: %v, want ErrLocked", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	srvs[0].Kill()
	l, err = rl.Lock(ctx, lock.WithWait(2*time.Second))
	if err != nil {
		t.Fatalf("RedLock with one of three servers down: %v", err)
	}
	if len(l.Parts()) != 2 {
		t.Fatalf("%d parts held, want 2", len(l.Parts()))
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	srvs[1].Kill()
	if _, err := rl.Lock(ctx, lock.WithWait(300*time.Millisecond)); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("RedLock with two of three servers down: %v, want ErrLocked", err)
	}
	if n := srvs[2].Do("EXISTS", "lockcron:{red}").(int64); n != 0 {
		t.Fatal("the refused RedLock left its lock on the live server")
	}
}

// A RedLock lease survives the loss of a minority of its parts and ends
// when a majority is lost.
func TestRedLockLoss(t *testing.T) {
	srvs, parts := redlockServers(t, 3, "loss", lock.WithLeaseTime(300*time.Millisecond))
	ctx := testkit.Context(t)
	l, err := lock.RedLock(parts...).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srvs[0].Do("DEL", "lockcron:{loss}")
	deadline := time.Now().Add(time.Second)
	for l.Parts()[0].Err() == nil {
		if time.Now().After(deadline) {
			t.Fatal("part 0 did not learn of its loss")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Err(); err != nil {
		t.Fatalf("RedLock lost with a majority still held: %v", err)
	}
	srvs[1].Do("DEL", "lockcron:{loss}")
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("RedLock not lost after a majority of its parts")
	}
	if !errors.Is(l.Err(), lock.ErrLockLost) {
		t.Fatalf("Err %v, want ErrLockLost", l.Err())
	}
	_ = l.Unlock(ctx)
	if n := srvs[2].Do("EXISTS", "lockcron:{loss}").(int64); n != 0 {
		t.Fatal("the lost RedLock's Unlock left its part on the third server")
	}
}

// With WithLease, a RedLock lease ends when its validity does: before the
// shortest lease could expire on any server.
func TestRedLockValidity(t *testing.T) {
	_, parts := redlockServers(t, 3, "valid")
	ctx := testkit.Context(t)
	start := time.Now()
	l, err := lock.RedLock(parts...).Lock(ctx, lock.WithLease(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("the fixed RedLock lease did not end")
	}
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Fatalf("the RedLock lease ended %v after Lock began, past its 300ms lease", d)
	}
	if !errors.Is(l.Err(), lock.ErrLockLost) {
		t.Fatalf("Err %v, want ErrLockLost", l.Err())
	}
}

// A Multi lease is re-entered only through the same locks of the same
// Clients; its clean Unlock ends it as released, not lost.
func TestMultiReentryAndRelease(t *testing.T) {
	t.Parallel()
	store := lock.NewMemoryStore()
	c1, _ := store.NewClient()
	c2, _ := store.NewClient()
	defer c1.Close()
	defer c2.Close()
	ctx := testkit.Context(t)
	l, err := lock.Multi(c1.Mutex("a"), c1.Mutex("b")).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Multi(c2.Mutex("a"), c2.Mutex("b")).TryLock(l.Context()); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("another Client's Multi under the lease's context: %v, want ErrLocked", err)
	}
	again, err := lock.Multi(c1.Mutex("b"), c1.Mutex("a")).Lock(l.Context())
	if err != nil || again != l {
		t.Fatalf("re-entry of the same locks in another order: %v, same lease %v", err, again == l)
	}
	_ = l.Unlock(ctx)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), lock.ErrReleased) || errors.Is(l.Err(), lock.ErrLockLost) {
		t.Fatalf("Err after a clean Unlock: %v, want ErrReleased and not ErrLockLost", l.Err())
	}
	if cause := context.Cause(l.Context()); errors.Is(cause, lock.ErrLockLost) {
		t.Fatalf("cause after a clean Unlock: %v", cause)
	}
}

// counting is a Locker of a program's own (a decorator around one of
// ours), as a Multi part: Multi takes it like any other.
type counting struct {
	lock.Locker
	locks *atomic.Int64
}

func (c counting) Lock(ctx context.Context, opts ...lock.AcquireOption) (*lock.Lease, error) {
	c.locks.Add(1)
	return c.Locker.Lock(ctx, opts...)
}

// A Multi over a Locker that is not this package's takes it through that
// Locker's own Lock, holds it, and releases it with the rest.
func TestMultiOfForeignLocker(t *testing.T) {
	t.Parallel()
	c := locktest.Made(t, lock.NewMemory, nil)
	ctx := testkit.Context(t)
	var n atomic.Int64
	m := lock.Multi(counting{c.Mutex("a"), &n}, c.Mutex("b"))
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Load() != 1 || len(l.Parts()) != 2 {
		t.Fatalf("foreign part locked %d times, %d parts; want 1 and 2", n.Load(), len(l.Parts()))
	}
	if _, err := c.Mutex("a").TryLock(ctx); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("the foreign part's lock while the Multi holds it: %v, want ErrLocked", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	free, err := c.Mutex("a").TryLock(ctx)
	if err != nil {
		t.Fatalf("the foreign part's lock after Unlock: %v", err)
	}
	_ = free.Unlock(ctx)
}
