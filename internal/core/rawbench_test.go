package core

import (
	"context"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
)

// BenchmarkRawScripts is Lock+Unlock without the Client: the scripts'
// round trips alone, to tell the Client's own cost from the server's.
func BenchmarkRawScripts(b *testing.B) {
	srv := redistest.Start(b)
	be := newRedisBackend(srv.Client(), func(string) {}, func(string) {}, nil, "x:", nil)
	ctx := context.Background()
	k := newKeys("lockcron", "raw")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := be.acquire(ctx, k, "o:1", 30*time.Second, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := be.release(ctx, k, "o:1", 1, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLockUnlock is an uncontended Lock+Unlock through the Client, on
// a real redis-server, with the default options (watchdog lease, the global
// OpenTelemetry providers, which are no-ops here). Its allocations per
// operation, less BenchmarkRawScripts', are the Client's own; unlike its
// time, they do not depend on the machine's load.
func BenchmarkLockUnlock(b *testing.B) {
	srv := redistest.Start(b)
	c, err := New(srv.Client())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	mu := c.Mutex("bench")
	b.ReportAllocs()
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

// BenchmarkTryLockUnlock is BenchmarkLockUnlock with TryLock.
func BenchmarkTryLockUnlock(b *testing.B) {
	srv := redistest.Start(b)
	c, err := New(srv.Client())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	mu := c.Mutex("bench")
	b.ReportAllocs()
	for b.Loop() {
		l, err := mu.TryLock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
