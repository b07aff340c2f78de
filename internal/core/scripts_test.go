package core

import (
	"context"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
)

// go-redis may send a script again after a reply was lost. Every script
// must then leave Redis as one run would have, on both backends.
func TestScriptsAreIdempotent(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	backends := map[string]backend{
		"redis":  newRedisBackend(srv.Client(), func(string) {}, func(string) {}, nil, "me:", nil),
		"memory": &memoryBackend{s: NewMemoryStore(), wake: func(string) {}},
	}
	for name, be := range backends {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			k := newKeys("lockcron", "idem")
			const owner, lease = "me:1", time.Minute

			first, err := be.acquire(ctx, k, owner, lease, 0)
			if err != nil || first.status != acqAcquired {
				t.Fatalf("acquire: %+v, %v", first, err)
			}
			again, err := be.acquire(ctx, k, owner, lease, 0) // a retried new-lease acquire
			if err != nil || again != first {
				t.Fatalf("retried acquire: %+v, %v; want %+v", again, err, first)
			}
			for range 2 { // re-entry from 1 to 2 holds, and its retry
				r, err := be.acquire(ctx, k, owner, lease, 1)
				if err != nil || r.status != acqAcquired || r.value != first.value {
					t.Fatalf("re-entry: %+v, %v", r, err)
				}
			}
			for range 2 { // release from 2 to 1 hold, and its retry
				n, err := be.release(ctx, k, owner, 2, 1)
				if err != nil || n != relDropped {
					t.Fatalf("release of one hold: %d, %v", n, err)
				}
			}
			// Still held with one hold: a release naming 1 frees it.
			if n, err := be.release(ctx, k, owner, 1, 1); err != nil || n != relReleased {
				t.Fatalf("last release: %d, %v", n, err)
			}
			// Its repeat (a retry after a lost reply) answers released
			// again, and changes nothing.
			if n, err := be.release(ctx, k, owner, 1, 1); err != nil || n != relReleased {
				t.Fatalf("repeat of the last release: %d, %v", n, err)
			}
			if r, _ := be.acquire(ctx, k, "next:1", lease, 0); r.status != acqAcquired {
				t.Fatalf("the lock after the repeated release: %+v", r)
			}
			if n, _ := be.release(ctx, k, owner, 1, 1); n != relReleased {
				t.Fatalf("repeat of the last release, with the lock held by another: %d", n)
			}
			if r, _ := be.acquire(ctx, k, "next:1", lease, 1); r.status != acqAcquired {
				t.Fatalf("the other owner's lease after a repeated release: %+v", r)
			}
			if n, _ := be.release(ctx, k, "next:1", 2, 2); n != relReleased {
				t.Fatalf("the other owner's release: %d", n)
			}
			// A release by an owner that never released is not held.
			if n, err := be.release(ctx, k, "never:1", 1, 1); err != nil || n != relNotHeld {
				t.Fatalf("release by an owner that holds nothing: %d, %v", n, err)
			}
			// Another owner's lease is never touched.
			if r, _ := be.acquire(ctx, k, "other:1", lease, 0); r.status != acqAcquired {
				t.Fatalf("other owner: %+v", r)
			}
			if n, _ := be.release(ctx, k, "stranger:1", 1, 1); n != relNotHeld {
				t.Fatalf("release by a non-owner: %d", n)
			}
			if r, _ := be.acquire(ctx, k, "other:1", lease, 1); r.status != acqAcquired {
				t.Fatalf("other owner's lease after releases by others: %+v", r)
			}
			if ok, _ := be.renew(ctx, k, owner, lease); ok {
				t.Fatal("renew by a non-owner succeeded")
			}
			if r, _ := be.acquire(ctx, k, owner, lease, 1); r.status != acqGone {
				t.Fatalf("re-entry of a lease that is gone: %+v", r)
			}
		})
	}
}
