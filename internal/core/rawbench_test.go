//go:build unix

package core

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
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
	defer reportCPU(b)()
	for b.Loop() {
		if _, err := be.acquire(ctx, k, "o:1", 30*time.Second, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := be.release(ctx, k, "o:1", 1, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// reportCPU starts counting this process's CPU time (user and system, every
// thread: the client, go-redis, the garbage collector; not redis-server's)
// and returns what reports it per operation as cpu-ns/op: a figure that a
// busy machine inflates much less than the time per operation, which
// includes the waits for redis-server and for a core.
func reportCPU(b *testing.B) func() {
	start := cpuTime(b)
	return func() { b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op") }
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
	defer reportCPU(b)()
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
	defer reportCPU(b)()
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

// BenchmarkLockUnlock64 is BenchmarkLockUnlock from 64 goroutines on one
// Client, each on a name of its own (the peer bench's scenario 2).
func BenchmarkLockUnlock64(b *testing.B) {
	srv := redistest.Start(b)
	c, err := New(srv.Client())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(max(64/runtime.GOMAXPROCS(0), 1))
	defer reportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		mu := c.Mutex("bench:" + strconv.FormatInt(n.Add(1), 10))
		for pb.Next() {
			l, err := mu.Lock(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
