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
	for b.Loop() {
		if _, err := be.acquire(ctx, k, "o:1", 30*time.Second, 0); err != nil {
			b.Fatal(err)
		}
		if _, err := be.release(ctx, k, "o:1", 1, 1); err != nil {
			b.Fatal(err)
		}
	}
}
