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
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	c, err := lock.New(rdb, lock.WithClientID("replica-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	ctx := context.Background()
	lease, err := c.Mutex("billing").Lock(ctx, lock.WithWait(10*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Unlock(context.WithoutCancel(ctx))
	// The work gets the lease's context: it ends if the lock is lost.
	_ = lease.Context()
}

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
