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

// bothBackends runs f on a Redis backend (on a new redis-server) and on a
// memory one.
func bothBackends(t *testing.T, f func(t *testing.T, be backend)) {
	t.Helper()
	srv := redistest.Start(t)
	backends := map[string]backend{
		"redis":  newRedisBackend(srv.Client(), func(string) {}, func(string) {}, nil, "me:", nil),
		"memory": &memoryBackend{s: NewMemoryStore(), wake: func(string) {}, wakeFair: func(string) {}},
	}
	for name, be := range backends {
		t.Run(name, func(t *testing.T) { f(t, be) })
	}
}

// A repeat of the call that took a Mutex (a retry after a lost reply), and
// a re-entry, answer the lease's own token, though every kind of lock of
// the name shares the token counter and a Semaphore of the name took the
// next token meanwhile. (The scripts used to answer the counter's.)
func TestRepeatAnswersTheLeasesToken(t *testing.T) {
	t.Parallel()
	bothBackends(t, func(t *testing.T, be backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		const lease = time.Minute
		for _, tc := range []struct {
			name string
			take func(k *keys, owner string, holds int) (int64, error)
		}{
			{"acquire", func(k *keys, owner string, holds int) (int64, error) {
				r, err := be.acquire(ctx, k, owner, lease, holds)
				if r.status != acqAcquired {
					t.Fatalf("acquire(holds %d): %+v", holds, r)
				}
				return r.value, err
			}},
			{"fairAcquire", func(k *keys, owner string, holds int) (int64, error) {
				if holds > 0 {
					r, err := be.acquire(ctx, k, owner, lease, holds) // a FairMutex re-enters so
					return r.value, err
				}
				r, err := be.fairAcquire(ctx, k, owner, lease, time.Minute, true)
				if r.status != acqAcquired {
					t.Fatalf("fairAcquire: %+v", r)
				}
				return r.value, err
			}},
			{"claim", func(k *keys, owner string, holds int) (int64, error) {
				if holds > 0 {
					r, err := be.acquire(ctx, k, owner, lease, holds)
					return r.value, err
				}
				r, err := be.claim(ctx, k, k.lock+":ledger:j", owner, lease, 7, claimArgs{})
				if r.status != claimAcquired {
					t.Fatalf("claim: %+v", r)
				}
				return r.value, err
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				k := newKeys("lockcron", "tok-"+tc.name)
				first, err := tc.take(k, "me:1", 0)
				if err != nil {
					t.Fatal(err)
				}
				p, err := be.semAcquire(ctx, semKeys("lockcron", k.name), "me:2", lease, 0, 1)
				if err != nil || p.status != acqAcquired || p.value <= first {
					t.Fatalf("semAcquire of the same name: %+v, %v; want a token after %d", p, err, first)
				}
				for _, holds := range []int{0, 1} { // the repeat, then a re-entry
					got, err := tc.take(k, "me:1", holds)
					if err != nil || got != first {
						t.Fatalf("holds %d: token %d, %v; want the lease's %d (the Semaphore's is %d)", holds, got, err, first, p.value)
					}
				}
			})
		}
	})
}

// A fair claim that does not wait takes the free lock whoever queues,
// and leaves its owner's place in the queue wherever it is, not only at
// the head: a place left behind would hold back the waiters after it once
// it reached the head. (claim.lua used to drop it at the head only.)
func TestFairClaimLeavesItsPlace(t *testing.T) {
	t.Parallel()
	bothBackends(t, func(t *testing.T, be backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		const lease, place = time.Minute, time.Minute
		k := newKeys("lockcron", "place")
		if r, _ := be.acquire(ctx, k, "me:h", lease, 0); r.status != acqAcquired {
			t.Fatalf("holder: %+v", r)
		}
		for _, w := range []string{"me:a", "me:b"} { // b's place is second
			if r, err := be.fairAcquire(ctx, k, w, lease, place, true); err != nil || r.status != acqHeld {
				t.Fatalf("%s queues: %+v, %v", w, r, err)
			}
		}
		if n, _ := be.release(ctx, k, "me:h", 1, 1); n != relReleased {
			t.Fatalf("release: %d", n)
		}
		r, err := be.claim(ctx, k, k.lock+":ledger:j", "me:b", lease, 1, claimArgs{fair: true, place: place})
		if err != nil || r.status != claimAcquired {
			t.Fatalf("claim by b: %+v, %v", r, err)
		}
		infos, err := be.locks(ctx, "lockcron")
		if err != nil || len(infos) != 1 || infos[0].Waiters != 1 {
			t.Fatalf("Locks after b took the lock: %+v, %v; want one waiter, a", infos, err)
		}
	})
}

// A force unlock of a semaphore whose permits have all expired answers
// that there was nothing to unlock, though its keys outlive the permits
// after a renewal with a shorter lease; and Locks does not list it.
func TestSemaphoreForceUnlockOfExpiredPermits(t *testing.T) {
	t.Parallel()
	bothBackends(t, func(t *testing.T, be backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		k := semKeys("lockcron", "expired")
		if r, err := be.semAcquire(ctx, k, "me:1", time.Minute, 0, 2); err != nil || r.status != acqAcquired {
			t.Fatalf("semAcquire: %+v, %v", r, err)
		}
		if r, err := be.semAcquire(ctx, k, "me:2", time.Minute, 0, 2); err != nil || r.status != acqAcquired {
			t.Fatalf("semAcquire: %+v, %v", r, err)
		}
		for _, o := range []string{"me:1", "me:2"} {
			if ok, err := be.semRenew(ctx, k, o, time.Millisecond); err != nil || !ok {
				t.Fatalf("semRenew %s: %v, %v", o, ok, err)
			}
		}
		time.Sleep(5 * time.Millisecond) // not a synchronisation: the permits' 1 ms runs out
		infos, err := be.locks(ctx, "lockcron")
		if err != nil || len(infos) != 0 {
			t.Fatalf("Locks: %+v, %v; want none", infos, err)
		}
		if n, err := be.semForceUnlock(ctx, k); err != nil || n != 0 {
			t.Fatalf("semForceUnlock: %d, %v; want 0", n, err)
		}
	})
}
