package lock_test

import (
	"context"
	"testing"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

// The quick loop for tuning; bench/ has the comparison with peers.
func BenchmarkLockUnlock(b *testing.B) {
	srv := redistest.Start(b)
	c, err := lock.New(srv.Client())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	mu := c.Mutex("bench")
	for b.Loop() {
		l, err := mu.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTwoPings(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client()
	ctx := context.Background()
	for b.Loop() {
		rdb.Ping(ctx)
		rdb.Ping(ctx)
	}
}
