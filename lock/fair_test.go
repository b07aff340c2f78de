package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// Twenty waiters on four Clients enter the queue in a known order and
// acquire in exactly that order.
func TestFairOrder(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			clients := locktest.NewStore(t, be).NewClients(t, 4)
			ctx := testkit.Context(t)
			holder, err := clients[0].FairMutex("fifo").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var order []int
			var wg sync.WaitGroup
			errs := make(chan error, 20)
			for i := range 20 {
				c := clients[i%4]
				before := c.Waiting("fifo")
				wg.Add(1)
				go func() {
					defer wg.Done()
					l, err := c.FairMutex("fifo").Lock(ctx)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					order = append(order, i)
					mu.Unlock()
					if err := l.Unlock(ctx); err != nil {
						errs <- err
					}
				}()
				locktest.WaitQueued(t, c, "fifo", before+1)
			}
			if err := holder.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for i, got := range order {
				if got != i {
					t.Fatalf("acquisition order %v, want 0..19", order)
				}
			}
		})
	}
}

// A waiter that leaves the queue (its ctx ends, its Client is closed) does
// not delay the one behind it: the unlock reaches the next at once.
func TestFairWaiterLeaves(t *testing.T) {
	for _, be := range locktest.Backends {
		for _, how := range []string{"ctx", "close"} {
			t.Run(be+"/"+how, func(t *testing.T) {
				// A long TTL: only leaving, not expiry, can let the next go.
				clients := locktest.NewStore(t, be).NewClients(t, 3, lock.WithWaiterTTL(time.Minute))
				holderC, gone, next := clients[0], clients[1], clients[2]
				ctx := testkit.Context(t)
				holder, err := holderC.FairMutex("leave").Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				gctx, cancel := context.WithCancel(ctx)
				defer cancel()
				goneErr := make(chan error, 1)
				go func() {
					_, err := gone.FairMutex("leave").Lock(gctx)
					goneErr <- err
				}()
				locktest.WaitQueued(t, gone, "leave", 1)
				got := locktest.LockAsync(ctx, next.FairMutex("leave"))
				locktest.WaitQueued(t, next, "leave", 1)

				if how == "ctx" {
					cancel()
				} else {
					_ = gone.Close()
				}
				err = <-goneErr
				if how == "ctx" && !errors.Is(err, context.Canceled) || how == "close" && !errors.Is(err, lock.ErrClosed) {
					t.Fatalf("the leaving waiter's Lock: %v", err)
				}
				unlocked := time.Now()
				if err := holder.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				if d := locktest.AwaitAcquired(t, got, 10*time.Second).Sub(unlocked); d > 200*time.Millisecond {
					t.Fatalf("the next waiter acquired %v after the unlock, want a few ms", d)
				}
			})
		}
	}
}

// A waiter whose process dies (here: its connection to Redis is gone, so it
// neither renews its place nor leaves) delays the next by at most the
// waiter TTL.
func TestFairDeadWaiterExpires(t *testing.T) {
	const ttl = 600 * time.Millisecond
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	holderC := locktest.NewClient(t, srv, lock.WithWaiterTTL(ttl))
	next := locktest.NewClient(t, srv, lock.WithWaiterTTL(ttl))
	deadRdb := redis.NewClient(srv.Options())
	dead, err := lock.New(deadRdb, lock.WithWaiterTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()

	holder, err := holderC.FairMutex("dead").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	deadErr := make(chan error, 1)
	go func() {
		_, err := dead.FairMutex("dead").Lock(ctx)
		deadErr <- err
	}()
	locktest.WaitQueued(t, dead, "dead", 1)
	got := locktest.LockAsync(ctx, next.FairMutex("dead"))
	locktest.WaitQueued(t, next, "dead", 1)

	_ = deadRdb.Close() // the dead waiter's renewals and its leave fail
	cut := time.Now()
	if err := <-deadErr; err == nil {
		t.Fatal("the dead waiter acquired")
	}
	if n := srv.Do("LLEN", "lockcron:{dead}:queue").(int64); n != 2 {
		t.Fatalf("queue length %d after the dead waiter's connection closed, want 2 (its place stays until it expires)", n)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// The dead waiter renewed its place at the latest at cut.
	if d := locktest.AwaitAcquired(t, got, 10*time.Second).Sub(cut); d > ttl+300*time.Millisecond {
		t.Fatalf("the next waiter acquired %v after the dead one's last renewal, want at most the waiter TTL %v", d, ttl)
	}
}

// An unlock wakes the head of the queue alone: with ten waiters on four
// Clients, handing the lock on costs a few scripts, not one per waiter.
func TestFairUnlockWakesOne(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	clients := make([]*lock.Client, 4)
	for i := range clients {
		clients[i] = locktest.NewClient(t, srv, lock.WithWaiterTTL(time.Minute)) // no renewals meanwhile
	}
	holder, err := clients[0].FairMutex("one").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lock.Lease, 10)
	for i := range 10 {
		c := clients[i%4]
		before := c.Waiting("one")
		go func() {
			l, err := c.FairMutex("one").Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		locktest.WaitQueued(t, c, "one", before+1)
	}
	before := scriptCalls(t, srv)
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	// Let any wrongly woken waiter show up in the counts.
	time.Sleep(100 * time.Millisecond)
	if n := scriptCalls(t, srv) - before; n > 3 {
		t.Fatalf("%d scripts ran to hand the lock on, want the release and the head's attempt (at most 3)", n)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for range 9 {
		if err := (<-got).Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// scriptCalls is how many EVALSHA and EVAL the server has run.
func scriptCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info := srv.Do("INFO", "commandstats").(string)
	total := 0
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if name != "cmdstat_evalsha" && name != "cmdstat_eval" || !ok {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// After Redis restarts with no data, the waiters find the lock free and the
// queue empty, take their places again, and every one acquires.
func TestFairRestartEmpty(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const ttl = 300 * time.Millisecond
	clients := make([]*lock.Client, 3)
	for i := range clients {
		clients[i] = locktest.NewClient(t, srv, lock.WithWaiterTTL(ttl), lock.WithLeaseTime(time.Second))
	}
	holder, err := clients[0].FairMutex("restart").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := range 6 {
		c := clients[i%3]
		before := c.Waiting("restart")
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.FairMutex("restart").Lock(ctx)
			if err == nil {
				err = l.Unlock(ctx)
			}
			if err != nil {
				errs <- err
			}
		}()
		locktest.WaitQueued(t, c, "restart", before+1)
	}
	srv.Restart()
	select {
	case <-holder.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the holder did not learn that the restart lost its lock")
	}
	if !errors.Is(holder.Err(), lock.ErrLockLost) {
		t.Fatalf("holder: %v, want ErrLockLost", holder.Err())
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("waiters stuck after the restart")
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TryLock never takes a place in the queue.
func TestFairTryLockDoesNotQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	a, b := locktest.NewClient(t, srv), locktest.NewClient(t, srv)
	l, err := a.FairMutex("try").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if _, err := b.FairMutex("try").TryLock(ctx); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("TryLock: %v, want ErrLocked", err)
	}
	if n := srv.Do("EXISTS", "lockcron:{try}:queue").(int64); n != 0 {
		t.Fatal("TryLock left a place in the queue")
	}
}

// A queue key of another type is reported, named, and left as it is.
func TestFairBadQueueKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	a, b := locktest.NewClient(t, srv), locktest.NewClient(t, srv)
	l, err := a.FairMutex("bad").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	srv.Do("SET", "lockcron:{bad}:queue", "x")
	_, err = b.FairMutex("bad").Lock(ctx, lock.WithWait(time.Second))
	if !errors.Is(err, lock.ErrBadKey) || !strings.Contains(err.Error(), "lockcron:{bad}:queue") {
		t.Fatalf("Lock with a string queue key: %v, want ErrBadKey naming the key", err)
	}
	if got := srv.Do("GET", "lockcron:{bad}:queue"); got != "x" {
		t.Fatalf("queue key overwritten: %v", got)
	}
}
