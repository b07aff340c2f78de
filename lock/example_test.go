package lock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/lock"
)

// A lock in Redis, held while the work runs and released when it returns.
// The README shows billing.
func ExampleNew() {
	billing(context.Background())
}

func billing(ctx context.Context) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	c, err := lock.New(rdb, lock.WithClientID("replica-1")) // in one process: c, err := lock.NewMemory()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close() // releases every lease still held, stops the watchdog

	lease, err := c.Mutex("billing").Lock(ctx, lock.WithWait(10*time.Second))
	if err != nil {
		fmt.Println(err) // errors.Is(err, lock.ErrLocked) when the wait is over
		return
	}
	defer lease.Unlock(context.WithoutCancel(ctx))
	// The work gets the lease's context, which ends if the lock is lost,
	// and its fencing token.
	work(lease.Context(), lease.Token())
}

// work stands for the work done under the lock.
func work(ctx context.Context, token int64) {}

func ExampleNewMemory() {
	c, err := lock.NewMemory()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()

	lease, err := c.Mutex("report").Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Another owner (a context that does not descend from the lease's).
	_, err = c.Mutex("report").TryLock(ctx)
	fmt.Println(errors.Is(err, lock.ErrLocked))

	// Re-entry through the lease's context: same lease, one more hold.
	again, _ := c.Mutex("report").Lock(lease.Context())
	fmt.Println(again == lease, again.Token() == lease.Token())

	_ = lease.Unlock(ctx) // one hold left
	_ = lease.Unlock(ctx) // free
	fmt.Println(errors.Is(lease.Err(), lock.ErrReleased))
	// Output:
	// true
	// true true
	// true
}

// Waiters of a fair lock acquire in the order they came, across every
// Client and process.
func ExampleClient_FairMutex() {
	store := lock.NewMemoryStore()
	a, _ := store.NewClient()
	b, _ := store.NewClient()
	defer a.Close()
	defer b.Close()
	ctx := context.Background()

	held, _ := a.FairMutex("export").Lock(ctx)
	order := make(chan string, 2)
	for i, c := range []*lock.Client{b, a} {
		before := c.Waiting("export")
		go func() {
			l, err := c.FairMutex("export").Lock(ctx)
			if err != nil {
				return
			}
			order <- fmt.Sprint("waiter ", i)
			_ = l.Unlock(ctx)
		}()
		for c.Waiting("export") == before { // until it has its place
			time.Sleep(time.Millisecond)
		}
	}
	_ = held.Unlock(ctx)
	fmt.Println(<-order)
	fmt.Println(<-order)
	// Output:
	// waiter 0
	// waiter 1
}

// Readers share an RWMutex; a reader cannot take the write lock.
func ExampleClient_RWMutex() {
	c, _ := lock.NewMemory()
	defer c.Close()
	ctx := context.Background()
	rw := c.RWMutex("catalog")

	r1, _ := rw.RLocker().Lock(ctx)
	r2, err := rw.RLocker().TryLock(ctx)
	fmt.Println("second reader:", err)
	_, err = rw.Locker().TryLock(ctx)
	fmt.Println("writer while read:", errors.Is(err, lock.ErrLocked))
	_, err = rw.Locker().Lock(r1.Context())
	fmt.Println("upgrade:", errors.Is(err, lock.ErrUpgrade))
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)
	w, err := rw.Locker().TryLock(ctx)
	fmt.Println("writer when free:", err)
	_ = w.Unlock(ctx)
	// Output:
	// second reader: <nil>
	// writer while read: true
	// upgrade: true
	// writer when free: <nil>
}

// A semaphore of two permits: a third holder waits.
func ExampleClient_Semaphore() {
	c, _ := lock.NewMemory()
	defer c.Close()
	ctx := context.Background()
	sem := c.Semaphore("reports", 2)

	p1, _ := sem.Lock(ctx)
	p2, _ := sem.Lock(ctx)
	_, err := sem.TryLock(ctx)
	fmt.Println(errors.Is(err, lock.ErrLocked), p1.Token() < p2.Token())
	_ = p1.Unlock(ctx)
	p3, err := sem.TryLock(ctx)
	fmt.Println(err)
	_ = p2.Unlock(ctx)
	_ = p3.Unlock(ctx)
	// Output:
	// true true
	// <nil>
}

// Multi holds several locks at once, or none.
func ExampleMulti() {
	c, _ := lock.NewMemory()
	defer c.Close()
	ctx := context.Background()

	other, _ := c.Mutex("ledger").Lock(ctx)
	both := lock.Multi(c.Mutex("accounts"), c.Mutex("ledger"))
	_, err := both.TryLock(ctx)
	fmt.Println(errors.Is(err, lock.ErrLocked))
	l, err := c.Mutex("accounts").TryLock(ctx) // given back
	fmt.Println(err)
	_ = l.Unlock(ctx)

	_ = other.Unlock(ctx)
	lease, _ := both.Lock(ctx)
	fmt.Println(len(lease.Parts()))
	_ = lease.Unlock(ctx)
	// Output:
	// true
	// <nil>
	// 2
}

// RedLock over three independent servers: held while a majority holds.
func ExampleRedLock() {
	var parts []lock.Locker
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"} {
		c, err := lock.New(redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
		if err != nil {
			fmt.Println(err)
			return
		}
		defer c.Close()
		parts = append(parts, c.Mutex("payouts"))
	}
	ctx := context.Background()
	lease, err := lock.RedLock(parts...).Lock(ctx, lock.WithWait(5*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Unlock(context.WithoutCancel(ctx))
	_ = lease.Context() // ends when fewer than two servers hold the lock
}
