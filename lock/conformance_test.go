package lock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

func TestMain(m *testing.M) {
	// go-redis redials a node that refused a connection in a goroutine of
	// its own, which sees the client closed only after its next second of
	// sleep (the Cluster failover tests kill nodes).
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// kinds are the exclusive kinds of lock: each keeps every promise of the
// conformance suite.
var kinds = []struct {
	name string
	kind func(c *lock.Client, name string) lock.Locker
}{
	{"Mutex", func(c *lock.Client, name string) lock.Locker { return c.Mutex(name) }},
	{"FairMutex", func(c *lock.Client, name string) lock.Locker { return c.FairMutex(name) }},
	{"RWMutex", func(c *lock.Client, name string) lock.Locker { return c.RWMutex(name).Locker() }},
	{"Semaphore1", func(c *lock.Client, name string) lock.Locker { return c.Semaphore(name, 1) }},
}

func TestRedisConformance(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			locktest.Run(t, func(t *testing.T) locktest.Backend {
				srv := redistest.Start(t)
				return locktest.Backend{Kind: k.kind, NewClient: func(t *testing.T, opts ...lock.Option) *lock.Client {
					c, err := lock.New(srv.Client(), opts...)
					if err != nil {
						t.Fatal(err)
					}
					return c
				}}
			})
		})
	}
}

func TestMemoryConformance(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			locktest.Run(t, func(t *testing.T) locktest.Backend {
				store := lock.NewMemoryStore()
				return locktest.Backend{Kind: k.kind, NewClient: func(t *testing.T, opts ...lock.Option) *lock.Client {
					c, err := store.NewClient(opts...)
					if err != nil {
						t.Fatal(err)
					}
					return c
				}}
			})
		})
	}
}
