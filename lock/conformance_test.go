package lock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lockcron/lockcron/internal/locktest"
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

// TestConformance runs the conformance suite on every backend, for every
// exclusive kind, each subtest on a fresh store. It runs alone: the suite
// times wake-ups and watchdog renewals.
func TestConformance(t *testing.T) {
	for _, be := range locktest.Backends {
		for _, k := range kinds {
			t.Run(be+"/"+k.name, func(t *testing.T) {
				locktest.Run(t, func(t *testing.T) locktest.Backend {
					return locktest.Backend{Kind: k.kind, NewClient: locktest.NewStore(t, be).NewClient}
				})
			})
		}
	}
}
