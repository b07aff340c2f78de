package lock_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRedisConformance(t *testing.T) {
	locktest.Run(t, func(t *testing.T) locktest.Backend {
		srv := redistest.Start(t)
		return locktest.Backend{NewClient: func(t *testing.T, opts ...lock.Option) *lock.Client {
			c, err := lock.New(srv.Client(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}}
	})
}

func TestMemoryConformance(t *testing.T) {
	locktest.Run(t, func(t *testing.T) locktest.Backend {
		store := lock.NewMemoryStore()
		return locktest.Backend{NewClient: func(t *testing.T, opts ...lock.Option) *lock.Client {
			c, err := store.NewClient(opts...)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}}
	})
}
