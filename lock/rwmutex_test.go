package lock_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// rwLocked asserts that a TryLock of l fails with ErrLocked.
func rwLocked(t *testing.T, ctx context.Context, l lock.Locker, what string) {
	t.Helper()
	lease, err := l.TryLock(ctx)
	if !errors.Is(err, lock.ErrLocked) {
		if lease != nil {
			_ = lease.Unlock(ctx)
		}
		t.Fatalf("%s: TryLock: %v, want ErrLocked", what, err)
	}
}

// rwFree asserts that a TryLock of l succeeds, and releases it.
func rwFree(t *testing.T, ctx context.Context, l lock.Locker, what string) {
	t.Helper()
	lease, err := l.TryLock(ctx)
	if err != nil {
		t.Fatalf("%s: TryLock: %v, want the lock", what, err)
	}
	locktest.MustUnlock(t, lease)
}

// rwStillWaiting asserts that locktest.Go's Lock has not returned.
func rwStillWaiting(t *testing.T, ch <-chan locktest.Got, what string) {
	t.Helper()
	select {
	case g := <-ch:
		t.Fatalf("%s: Lock returned (%v) while it should wait", what, g.Err)
	default:
	}
}

func waitLeaseDone(t *testing.T, l *lock.Lease, within time.Duration, what string) {
	t.Helper()
	select {
	case <-l.Done():
	case <-time.After(within):
		t.Fatalf("%s: Done not closed within %v", what, within)
	}
}

func TestRWMutexReadersShare(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		ctx := testkit.Context(t)
		clients := []*lock.Client{s.NewClient(t), s.NewClient(t), s.NewClient(t)}
		const readers = 6
		var leases []*lock.Lease
		var last int64
		for i := range readers {
			// Two readers per Client, each its own owner.
			l := locktest.MustLock(t, ctx, clients[i%3].RWMutex("share").RLocker(), lock.WithWait(time.Second))
			if l.Token() <= last {
				t.Fatalf("reader %d: token %d after %d", i, l.Token(), last)
			}
			last = l.Token()
			leases = append(leases, l)
		}
		for i, l := range leases {
			if l.Err() != nil {
				t.Fatalf("reader %d lost its lease: %v", i, l.Err())
			}
		}
		w := s.NewClient(t).RWMutex("share")
		rwLocked(t, ctx, w, "write lock while 6 readers hold")
		if _, err := w.Lock(ctx, lock.WithWait(100*time.Millisecond)); !errors.Is(err, lock.ErrLocked) {
			t.Fatalf("write Lock(WithWait) while readers hold: %v, want ErrLocked", err)
		}
		for _, l := range leases[:readers-1] {
			locktest.MustUnlock(t, l)
		}
		rwLocked(t, ctx, w, "write lock while one reader holds")
		locktest.MustUnlock(t, leases[readers-1])

		wl := locktest.MustLock(t, ctx, w, lock.WithWait(time.Second))
		if wl.Token() <= last {
			t.Fatalf("writer token %d after %d", wl.Token(), last)
		}
		for _, c := range clients {
			rwLocked(t, ctx, c.RWMutex("share").RLocker(), "read lock while a writer holds")
			rwLocked(t, ctx, c.RWMutex("share"), "write lock while a writer holds")
		}
		locktest.MustUnlock(t, wl)
		rwFree(t, ctx, clients[0].RWMutex("share").RLocker(), "read lock after the writer")
	})
}

// Readers and writers on three Clients: no reader holds while a writer
// does, no two writers hold at once, and readers do share.
func TestRWMutexExclusion(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		ctx := testkit.Context(t)
		clients := []*lock.Client{s.NewClient(t), s.NewClient(t), s.NewClient(t)}
		var readers, writers, maxReaders, violations, reads, writes atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rw := clients[g%3].RWMutex("excl")
				write := g%4 == 0
				l := rw.RLocker()
				if write {
					l = rw.Locker()
				}
				for range 15 {
					lease, err := l.Lock(ctx)
					if err != nil {
						errs <- err
						return
					}
					if write {
						writes.Add(1)
						if writers.Add(1) != 1 || readers.Load() != 0 {
							violations.Add(1)
						}
						time.Sleep(500 * time.Microsecond) // work under the lock
						writers.Add(-1)
					} else {
						reads.Add(1)
						n := readers.Add(1)
						if writers.Load() != 0 {
							violations.Add(1)
						}
						for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
						}
						time.Sleep(2 * time.Millisecond)
						readers.Add(-1)
					}
					if err := lease.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if violations.Load() != 0 {
			t.Fatalf("%d holds broke exclusion (%d reads, %d writes)", violations.Load(), reads.Load(), writes.Load())
		}
		if maxReaders.Load() < 2 {
			t.Fatalf("at most %d reader held at once: readers do not share", maxReaders.Load())
		}
		t.Logf("%d reads, %d writes, up to %d readers at once", reads.Load(), writes.Load(), maxReaders.Load())
	})
}

// A writer is not starved by a stream of overlapping readers: it gets the
// lock within a few reader hold times, and readers that come after it wait.
func TestRWMutexWriterNotStarved(t *testing.T) {
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		const (
			name      = "starve"
			hold      = 40 * time.Millisecond
			goroutine = 6
		)
		ctx := testkit.Context(t)
		// The readers stop when rctx ends, should the writer keep the lock.
		rctx, cancel := context.WithCancel(ctx)
		rc := []*lock.Client{s.NewClient(t), s.NewClient(t)}
		wc := s.NewClient(t)

		type read struct{ called, got time.Time }
		var (
			mu     sync.Mutex
			log    []read
			inside atomic.Int64
			wg     sync.WaitGroup
		)
		stop := make(chan struct{})
		errs := make(chan error, goroutine)
		for g := range goroutine {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rl := rc[g%2].RWMutex(name).RLocker()
				time.Sleep(time.Duration(g) * hold / goroutine) // staggered, so that a reader always holds
				for {
					select {
					case <-stop:
						return
					default:
					}
					called := time.Now()
					lease, err := rl.Lock(rctx)
					if err != nil {
						errs <- err
						return
					}
					got := time.Now()
					inside.Add(1)
					mu.Lock()
					log = append(log, read{called, got})
					mu.Unlock()
					time.Sleep(hold) // work under the read lock
					inside.Add(-1)
					if err := lease.Unlock(context.WithoutCancel(ctx)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		defer func() {
			close(stop)
			cancel()
			wg.Wait()
		}()

		// The stream is continuous: a TryLock of the write lock (which
		// leaves no mark) never finds a gap.
		w := wc.RWMutex(name)
		deadline := time.Now().Add(10 * time.Second)
		for inside.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatal("no reader took the lock")
			}
			time.Sleep(time.Millisecond)
		}
		for i := range 20 {
			rwLocked(t, ctx, w, "write TryLock #"+strconv.Itoa(i)+" amid the readers")
			time.Sleep(hold / 4)
		}

		start := time.Now()
		got := locktest.Go(ctx, w)
		locktest.WaitForWaiter(t, wc, name)
		queued := time.Now() // the writer's mark is in place
		g := locktest.Await(t, got, 10*time.Second)
		if n := inside.Load(); n != 0 {
			t.Fatalf("the writer got the lock while %d readers hold it", n)
		}
		waited := g.At.Sub(start)
		if bound := 4 * hold; waited > bound {
			t.Fatalf("the writer waited %v amid the readers, want at most %v", waited, bound)
		}
		mu.Lock()
		after := 0
		for _, r := range log {
			if r.called.After(queued) && r.got.Before(g.At) {
				after++
			}
		}
		n := len(log)
		mu.Unlock()
		if after != 0 {
			t.Fatalf("%d readers that came after the waiting writer got the lock before it", after)
		}
		time.Sleep(hold) // work under the write lock
		if n := inside.Load(); n != 0 {
			t.Fatalf("%d readers came in while the writer holds the lock", n)
		}
		locktest.MustUnlock(t, g.Lease)
		// The readers go on.
		for {
			mu.Lock()
			more := len(log) > n
			mu.Unlock()
			if more {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no reader took the lock after the writer")
			}
			time.Sleep(time.Millisecond)
		}
		t.Logf("the writer waited %v; %d reads before it", waited, n)
		select {
		case err := <-errs:
			t.Fatal(err)
		default:
		}
	})
}

// One reader stops renewing (a fixed lease stands for a crashed process):
// its lease ends on its own, while the other reader's, renewed by its
// watchdog, stays valid and alone holds the lock.
func TestRWMutexReaderLeaseExpiresAlone(t *testing.T) {
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		const leaseTime = 300 * time.Millisecond
		ctx := testkit.Context(t)
		crashed := s.NewClient(t)
		alive := s.NewClient(t, lock.WithLeaseTime(leaseTime))
		wc := s.NewClient(t)

		a := locktest.MustLock(t, ctx, crashed.RWMutex("alone").RLocker(), lock.WithLease(leaseTime))
		taken := time.Now()
		b := locktest.MustLock(t, ctx, alive.RWMutex("alone").RLocker())
		got := locktest.Go(ctx, wc.RWMutex("alone"))
		locktest.WaitForWaiter(t, wc, "alone")

		waitLeaseDone(t, a, 2*leaseTime, "the crashed reader")
		// Past the end of a's lease in the store, and b's first lease time.
		<-time.After(time.Until(taken.Add(leaseTime + leaseTime/2)))
		if err := b.Err(); err != nil {
			t.Fatalf("the live reader lost its lease with the crashed one: %v", err)
		}
		rwStillWaiting(t, got, "writer while the live reader holds")

		// a never unlocked: once b does, the writer gets the lock at once.
		unlocked := time.Now()
		locktest.MustUnlock(t, b)
		g := locktest.Await(t, got, 5*time.Second)
		if d := g.At.Sub(unlocked); d > 200*time.Millisecond {
			t.Fatalf("writer acquired %v after the last live reader left", d)
		}
		locktest.MustUnlock(t, g.Lease)
	})
}

// A reader's process dies (its redis client is closed, so its watchdog's
// renewals fail): the writer gets the lock within about one lease after
// the dead reader's last renewal.
func TestRWMutexCrashedReaderRedis(t *testing.T) {
	const leaseTime = 300 * time.Millisecond
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	rdb := srv.Client()
	crashed, err := lock.New(rdb, lock.WithLeaseTime(leaseTime))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crashed.Close() })
	alive := locktest.NewClient(t, srv, lock.WithLeaseTime(leaseTime))
	wc := locktest.NewClient(t, srv)

	a := locktest.MustLock(t, ctx, crashed.RWMutex("crash").RLocker())
	b := locktest.MustLock(t, ctx, alive.RWMutex("crash").RLocker())
	got := locktest.Go(ctx, wc.RWMutex("crash"))
	locktest.WaitForWaiter(t, wc, "crash")
	// Let a's watchdog renew at least once, then kill its connection.
	<-time.After(leaseTime / 2)
	died := time.Now()
	if err := rdb.Close(); err != nil {
		t.Fatal(err)
	}
	locktest.MustUnlock(t, b) // the live reader leaves: only the dead one holds the lock
	g := locktest.Await(t, got, 5*time.Second)
	// a's last renewal was at most lease/3 before it died.
	if d := g.At.Sub(died); d < leaseTime/2 || d > leaseTime+200*time.Millisecond {
		t.Fatalf("writer acquired %v after the reader died, want within its lease (%v)", d, leaseTime)
	}
	waitLeaseDone(t, a, time.Second, "the dead reader")
	if !errors.Is(a.Err(), lock.ErrLockLost) {
		t.Fatalf("dead reader's Err = %v, want ErrLockLost", a.Err())
	}
	locktest.MustUnlock(t, g.Lease)
}

func TestRWMutexReentry(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		ctx := testkit.Context(t)
		c1, c2 := s.NewClient(t), s.NewClient(t)
		rw, other := c1.RWMutex("re"), c2.RWMutex("re")

		t.Run("read", func(t *testing.T) {
			r := locktest.MustLock(t, ctx, rw.RLocker())
			if again := locktest.MustLock(t, r.Context(), rw.RLocker()); again != r {
				t.Fatal("read re-entry returned another lease")
			}
			// A new read lease on an unrelated ctx is another owner.
			r2 := locktest.MustLock(t, ctx, rw.RLocker())
			if r2 == r || r2.Token() <= r.Token() {
				t.Fatalf("second reader: same lease or token %d <= %d", r2.Token(), r.Token())
			}
			locktest.MustUnlock(t, r2)
			locktest.MustUnlock(t, r)
			rwLocked(t, ctx, other, "write lock with one read hold left")
			locktest.MustUnlock(t, r)
			rwFree(t, ctx, other, "write lock after the last read hold")
		})

		t.Run("write", func(t *testing.T) {
			w := locktest.MustLock(t, ctx, rw)
			inner := locktest.MustLock(t, w.Context(), rw.Locker())
			if inner != w || inner.Token() != w.Token() {
				t.Fatal("write re-entry returned another lease or token")
			}
			rwLocked(t, ctx, rw, "write lock of another owner on the same Client")
			locktest.MustUnlock(t, w)
			rwLocked(t, ctx, other.RLocker(), "read lock with one write hold left")
			locktest.MustUnlock(t, w)
			rwFree(t, ctx, other.RLocker(), "read lock after the last write hold")
		})

		t.Run("read while a writer waits", func(t *testing.T) {
			r := locktest.MustLock(t, ctx, rw.RLocker())
			got := locktest.Go(ctx, other)
			locktest.WaitForWaiter(t, c2, "re")
			// A reader that holds re-enters; a new one waits for the writer.
			if again := locktest.MustLock(t, r.Context(), rw.RLocker(), lock.WithWait(0)); again != r {
				t.Fatal("read re-entry returned another lease")
			}
			rwLocked(t, ctx, rw.RLocker(), "new reader while a writer waits")
			locktest.MustUnlock(t, r)
			rwStillWaiting(t, got, "writer while a read hold is left")
			locktest.MustUnlock(t, r)
			g := locktest.Await(t, got, 5*time.Second)
			locktest.MustUnlock(t, g.Lease)
		})
	})
}

// The writer may take the read lock, and keep it after the write lock:
// a downgrade.
func TestRWMutexDowngrade(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		ctx := testkit.Context(t)
		c1, c2 := s.NewClient(t), s.NewClient(t)
		rw, other := c1.RWMutex("down"), c2.RWMutex("down")

		w := locktest.MustLock(t, ctx, rw)
		// Even while another writer waits: the write lock's holder goes first.
		got := locktest.Go(ctx, other)
		locktest.WaitForWaiter(t, c2, "down")
		r := locktest.MustLock(t, context.WithoutCancel(w.Context()), rw.RLocker(), lock.WithWait(0))
		if r == w || r.Token() <= w.Token() {
			t.Fatalf("read lease of the writer: same lease, or token %d <= %d", r.Token(), w.Token())
		}
		if again := locktest.MustLock(t, r.Context(), rw.RLocker()); again != r {
			t.Fatal("re-entry of the downgraded read lease returned another lease")
		}
		locktest.MustUnlock(t, r)
		// The write lock is still the writer's: its ctx re-enters it.
		if again := locktest.MustLock(t, r.Context(), rw); again != w {
			t.Fatal("write Lock on a ctx of both leases did not re-enter the write lease")
		}
		locktest.MustUnlock(t, w)
		rwLocked(t, ctx, c2.RWMutex("down").RLocker(), "another reader while the writer holds")

		locktest.MustUnlock(t, w) // the downgrade: the read lease keeps the lock
		if err := r.Err(); err != nil {
			t.Fatalf("read lease ended with the write lease: %v", err)
		}
		select {
		case <-r.Done():
			t.Fatal("read lease's Done closed with the write lease")
		default:
		}
		if r.Context().Err() != nil {
			t.Fatalf("read lease's Context ended: %v", context.Cause(r.Context()))
		}
		rwStillWaiting(t, got, "writer while the downgraded reader holds")
		// The new writer has its mark in: new readers wait for it.
		rwLocked(t, ctx, c2.RWMutex("down").RLocker(), "new reader while a writer waits")
		// A write Lock on the reader's ctx is now an upgrade.
		if _, err := rw.Lock(r.Context()); !errors.Is(err, lock.ErrUpgrade) {
			t.Fatalf("write Lock after the downgrade: %v, want ErrUpgrade", err)
		}
		locktest.MustUnlock(t, r)
		g := locktest.Await(t, got, 5*time.Second)
		locktest.MustUnlock(t, g.Lease)

		// Without a waiting writer, a downgraded reader shares with others.
		w = locktest.MustLock(t, ctx, rw)
		r = locktest.MustLock(t, w.Context(), rw.RLocker())
		locktest.MustUnlock(t, w)
		if r.Err() != nil {
			t.Fatalf("read lease ended with the write lease: %v", r.Err())
		}
		rwFree(t, ctx, c2.RWMutex("down").RLocker(), "another reader after the downgrade")
		rwLocked(t, ctx, other, "writer while the downgraded reader holds")
		locktest.MustUnlock(t, r)
		rwFree(t, ctx, other, "writer after the last reader")
	})
}

// A reader that asks for the write lock gets ErrUpgrade at once, and
// nothing is sent.
func TestRWMutexUpgradeRefused(t *testing.T) {
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		ctx := testkit.Context(t)
		c := s.NewClient(t)
		rw := c.RWMutex("up")
		r := locktest.MustLock(t, ctx, rw.RLocker())
		before := 0
		if s.Server != nil {
			before = commandCalls(t, s.Server)
		}
		start := time.Now()
		for _, call := range []struct {
			name string
			fn   func() (*lock.Lease, error)
		}{
			{"Lock", func() (*lock.Lease, error) { return rw.Lock(r.Context()) }},
			{"TryLock", func() (*lock.Lease, error) { return rw.TryLock(r.Context()) }},
			{"Locker().Lock", func() (*lock.Lease, error) { return c.RWMutex("up").Locker().Lock(r.Context()) }},
		} {
			l, err := call.fn()
			if l != nil || !errors.Is(err, lock.ErrUpgrade) || !strings.Contains(err.Error(), `"up"`) {
				t.Fatalf("%s on a read lease's ctx: %v, %v; want ErrUpgrade naming the lock", call.name, l, err)
			}
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Fatalf("ErrUpgrade came after %v, want at once", d)
		}
		if s.Server != nil {
			if n := commandCalls(t, s.Server) - before; n != 0 {
				t.Fatalf("%d commands sent for refused upgrades", n)
			}
		}
		// Another Client's read lease, or another lock's, is not this one.
		other := s.NewClient(t)
		w := locktest.MustLock(t, r.Context(), c.RWMutex("up2"))
		locktest.MustUnlock(t, w)
		if _, err := other.RWMutex("up").Lock(r.Context(), lock.WithWait(50*time.Millisecond)); !errors.Is(err, lock.ErrLocked) {
			t.Fatalf("write Lock of another Client on the reader's ctx: %v, want ErrLocked", err)
		}
		locktest.MustUnlock(t, r)
	})
}

// A writer whose wait ends without the lock takes its mark away, and the
// readers it held back come in at once.
func TestRWMutexWriterGivesUp(t *testing.T) {
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		ctx := testkit.Context(t)
		c1, c2, c3 := s.NewClient(t), s.NewClient(t), s.NewClient(t)
		r := locktest.MustLock(t, ctx, c1.RWMutex("giveup").RLocker())
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		got := locktest.Go(wctx, c2.RWMutex("giveup"))
		locktest.WaitForWaiter(t, c2, "giveup")
		rwLocked(t, ctx, c3.RWMutex("giveup").RLocker(), "new reader while a writer waits")
		held := locktest.Go(ctx, c3.RWMutex("giveup").RLocker())
		locktest.WaitForWaiter(t, c3, "giveup")

		gaveUp := time.Now()
		cancel()
		select {
		case g := <-got:
			if !errors.Is(g.Err, context.Canceled) {
				t.Fatalf("writer's Lock: %v, want Canceled", g.Err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("writer's Lock did not return")
		}
		// Well within the default waiter TTL (3s) the mark would lapse in.
		g := locktest.Await(t, held, 5*time.Second)
		if d := g.At.Sub(gaveUp); d > 500*time.Millisecond {
			t.Fatalf("held-back reader came in %v after the writer gave up", d)
		}
		locktest.MustUnlock(t, g.Lease)

		// The same with WithWait.
		if _, err := c2.RWMutex("giveup").Lock(ctx, lock.WithWait(50*time.Millisecond)); !errors.Is(err, lock.ErrLocked) {
			t.Fatalf("writer's Lock(WithWait): %v, want ErrLocked", err)
		}
		rwFree(t, ctx, c3.RWMutex("giveup").RLocker(), "new reader after the writer gave up")
		locktest.MustUnlock(t, r)
	})
}

// A waiting writer that dies leaves a mark that lapses within the waiter
// TTL: then readers come in again.
func TestRWMutexDeadWriterMarkLapses(t *testing.T) {
	const waiterTTL = 300 * time.Millisecond
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	c1, c3 := locktest.NewClient(t, srv), locktest.NewClient(t, srv)
	rdb := srv.Client()
	dead, err := lock.New(rdb, lock.WithWaiterTTL(waiterTTL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dead.Close() })

	r := locktest.MustLock(t, ctx, c1.RWMutex("mark").RLocker())
	got := locktest.Go(ctx, dead.RWMutex("mark"))
	locktest.WaitForWaiter(t, dead, "mark")
	died := time.Now()
	if err := rdb.Close(); err != nil {
		t.Fatal(err)
	}
	rwLocked(t, ctx, c3.RWMutex("mark").RLocker(), "new reader right after the writer died")
	// The dead writer's Lock fails at its next attempt; its mark stays.
	select {
	case g := <-got:
		if g.Err == nil {
			t.Fatal("Lock on a closed redis client succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the dead writer's Lock did not return")
	}
	g := locktest.Await(t, locktest.Go(ctx, c3.RWMutex("mark").RLocker()), 5*time.Second)
	if d := g.At.Sub(died); d > waiterTTL+200*time.Millisecond {
		t.Fatalf("reader came in %v after the writer died, want within the waiter TTL %v", d, waiterTTL)
	}
	locktest.MustUnlock(t, g.Lease)
	locktest.MustUnlock(t, r)
}

func TestRWMutexForceUnlock(t *testing.T) {
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		const leaseTime = 300 * time.Millisecond
		ctx := testkit.Context(t)
		c1 := s.NewClient(t, lock.WithLeaseTime(leaseTime))
		c2 := s.NewClient(t, lock.WithLeaseTime(leaseTime))
		r1 := locktest.MustLock(t, ctx, c1.RWMutex("force").RLocker())
		r2 := locktest.MustLock(t, ctx, c1.RWMutex("force").RLocker())
		got := locktest.Go(ctx, c2.RWMutex("force"))
		locktest.WaitForWaiter(t, c2, "force")

		forced := time.Now()
		if ok, err := c2.ForceUnlock(ctx, "force"); err != nil || !ok {
			t.Fatalf("ForceUnlock: %v, %v", ok, err)
		}
		g := locktest.Await(t, got, 5*time.Second)
		if d := g.At.Sub(forced); d > 500*time.Millisecond {
			t.Fatalf("waiting writer acquired %v after ForceUnlock", d)
		}
		for i, r := range []*lock.Lease{r1, r2} {
			waitLeaseDone(t, r, leaseTime/3+500*time.Millisecond, "reader "+strconv.Itoa(i))
			if !errors.Is(r.Err(), lock.ErrLockLost) || !errors.Is(context.Cause(r.Context()), lock.ErrLockLost) {
				t.Fatalf("reader %d: Err %v, want ErrLockLost", i, r.Err())
			}
			if err := r.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Unlock of a forced reader: %v, want ErrNotHeld", err)
			}
		}
		if g.Lease.Err() != nil {
			t.Fatalf("the new writer's lease ended: %v", g.Lease.Err())
		}

		// The writer is forced out too, and a waiting reader comes in.
		w, err := c1.RWMutex("force").Lock(ctx, lock.WithWait(0))
		if !errors.Is(err, lock.ErrLocked) {
			t.Fatalf("second writer: %v, %v", w, err)
		}
		rgot := locktest.Go(ctx, c1.RWMutex("force").RLocker())
		locktest.WaitForWaiter(t, c1, "force")
		if ok, err := c1.ForceUnlock(ctx, "force"); err != nil || !ok {
			t.Fatalf("ForceUnlock of the writer: %v, %v", ok, err)
		}
		rg := locktest.Await(t, rgot, 5*time.Second)
		waitLeaseDone(t, g.Lease, leaseTime/3+500*time.Millisecond, "forced writer")
		if !errors.Is(g.Lease.Err(), lock.ErrLockLost) {
			t.Fatalf("forced writer's Err: %v, want ErrLockLost", g.Lease.Err())
		}
		locktest.MustUnlock(t, rg.Lease)
		if ok, err := c1.ForceUnlock(ctx, "force"); err != nil || ok {
			t.Fatalf("ForceUnlock of a free lock: %v, %v; want false", ok, err)
		}
	})
}

func TestRWMutexBadKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv)
	ctx := testkit.Context(t)
	cases := []struct {
		name, lock, key string
		setup           []any
		check           []any
		want            any
	}{
		{"string at the lock", "str", "lockcron:{str}:rw", []any{"SET", "lockcron:{str}:rw", "precious"}, []any{"GET", "lockcron:{str}:rw"}, "precious"},
		{"hash without TTL", "nottl", "lockcron:{nottl}:rw", []any{"HSET", "lockcron:{nottl}:rw", "writer", "x"}, []any{"HGET", "lockcron:{nottl}:rw", "writer"}, "x"},
		{"string at the readers", "rd", "lockcron:{rd}:rw:readers", []any{"SET", "lockcron:{rd}:rw:readers", "r"}, []any{"GET", "lockcron:{rd}:rw:readers"}, "r"},
		{"string at the writers' marks", "wr", "lockcron:{wr}:rw:writers", []any{"SET", "lockcron:{wr}:rw:writers", "w"}, []any{"GET", "lockcron:{wr}:rw:writers"}, "w"},
		{"list at the token", "tok", "lockcron:{tok}:token", []any{"RPUSH", "lockcron:{tok}:token", "t"}, []any{"LINDEX", "lockcron:{tok}:token", "0"}, "t"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.Do(tc.setup...)
			rw := c.RWMutex(tc.lock)
			for _, call := range []struct {
				how string
				fn  func() error
			}{
				{"Lock", func() error { _, err := rw.Lock(ctx); return err }},
				{"TryLock", func() error { _, err := rw.TryLock(ctx); return err }},
				{"RLock", func() error { _, err := rw.RLocker().Lock(ctx); return err }},
				{"RTryLock", func() error { _, err := rw.RLocker().TryLock(ctx); return err }},
			} {
				err := call.fn()
				if !errors.Is(err, lock.ErrBadKey) {
					t.Fatalf("%s: err = %v, want ErrBadKey", call.how, err)
				}
				if !strings.Contains(err.Error(), strconv.Quote(tc.key)) {
					t.Fatalf("%s: error %q does not name the key %q", call.how, err, tc.key)
				}
			}
			if tc.lock != "tok" && tc.lock != "nottl" {
				if _, err := c.ForceUnlock(ctx, tc.lock); !errors.Is(err, lock.ErrBadKey) {
					t.Fatalf("ForceUnlock: %v, want ErrBadKey", err)
				}
			}
			if got := srv.Do(tc.check...); got != tc.want {
				t.Fatalf("key changed: %v, want %v", got, tc.want)
			}
		})
	}
}

// The keys of a read-write lock share the name's hash tag, and the lock's
// TTL reaches the longest lease held.
func TestRWMutexKeysAndTTL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv, lock.WithKeyPrefix("app"))
	ctx := testkit.Context(t)
	rw := c.RWMutex("report")
	short := locktest.MustLock(t, ctx, rw.RLocker(), lock.WithLease(2*time.Second))
	long := locktest.MustLock(t, ctx, rw.RLocker(), lock.WithLease(20*time.Second))
	if got := srv.Do("HGET", "app:{report}:rw", long.Owner()); got != "1" {
		t.Fatalf("holds of %s = %v, want 1", long.Owner(), got)
	}
	if got := srv.Do("HGET", "app:{report}:rw", long.Owner()+":token"); got != strconv.FormatInt(long.Token(), 10) {
		t.Fatalf("token of %s = %v, want %d", long.Owner(), got, long.Token())
	}
	if got := srv.Do("GET", "app:{report}:token"); got != strconv.FormatInt(long.Token(), 10) {
		t.Fatalf("token key %v, want %d", got, long.Token())
	}
	if n := srv.Do("ZCARD", "app:{report}:rw:readers").(int64); n != 2 {
		t.Fatalf("%d readers' deadlines, want 2", n)
	}
	for _, key := range []string{"app:{report}:rw", "app:{report}:rw:readers"} {
		if ttl := srv.Do("PTTL", key).(int64); ttl < 19_000 || ttl > 20_000 {
			t.Fatalf("PTTL of %s = %d, want the longest lease (20s)", key, ttl)
		}
	}
	locktest.MustUnlock(t, long)
	if ttl := srv.Do("PTTL", "app:{report}:rw").(int64); ttl <= 0 || ttl > 2_000 {
		t.Fatalf("PTTL after the long lease left = %d, want the short one's", ttl)
	}
	locktest.MustUnlock(t, short)
	if n := srv.Do("EXISTS", "app:{report}:rw", "app:{report}:rw:readers", "app:{report}:rw:writers").(int64); n != 0 {
		t.Fatalf("%d keys left after the last lease", n)
	}
}

func TestRWMutexInvalidName(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		c := s.NewClient(t)
		ctx := testkit.Context(t)
		for _, name := range []string{"", "a{b", "a}b"} {
			rw := c.RWMutex(name)
			if rw.Name() != name {
				t.Fatalf("Name() = %q, want %q", rw.Name(), name)
			}
			for _, l := range []lock.Locker{rw, rw.Locker(), rw.RLocker()} {
				if _, err := l.Lock(ctx); !errors.Is(err, lock.ErrInvalid) {
					t.Fatalf("Lock of %q: %v, want ErrInvalid", name, err)
				}
				if _, err := l.TryLock(ctx); !errors.Is(err, lock.ErrInvalid) {
					t.Fatalf("TryLock of %q: %v, want ErrInvalid", name, err)
				}
			}
		}
	})
}

// rwScript is one of the read-write lock's scripts as the Client sends it:
// lib.lua, rwlib.lua, then the script.
func rwScript(t *testing.T, name string) *redis.Script {
	t.Helper()
	return redis.NewScript(locktest.ScriptSource(t, "lib.lua", "rwlib.lua", name))
}

// go-redis may send a script again after a reply was lost: each run of the
// scripts twice leaves Redis as one run would have. And a reader's entry
// goes at its deadline while another reader's stays.
func TestRWScriptsRetry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := testkit.Context(t)
	acquire, renew, release := rwScript(t, "rwacquire.lua"), rwScript(t, "rwrenew.lua"), rwScript(t, "rwrelease.lua")
	const (
		hash, readers, writers = "p:{s}:rw", "p:{s}:rw:readers", "p:{s}:rw:writers"
		token, channel         = "p:{s}:token", "p:{s}:rw:channel"
	)
	twice := func(what string, run func() (any, error)) any {
		t.Helper()
		first, err := run()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		before := srv.Do("HGETALL", hash)
		again, err := run()
		if err != nil {
			t.Fatalf("%s again: %v", what, err)
		}
		// A wait's sleep runs with the clock: compare its status.
		if a, ok := first.([]int64); ok && len(a) == 2 && a[0] == 0 {
			if b := again.([]int64); b[0] != 0 {
				t.Fatalf("%s: %v, then %v", what, first, again)
			}
		} else if !reflect.DeepEqual(first, again) {
			t.Fatalf("%s: %v, then %v", what, first, again)
		}
		// A repeat may start the lease's time again (the writer's
		// deadline), and must change nothing else.
		if after := srv.Do("HGETALL", hash); !reflect.DeepEqual(withoutDeadline(before), withoutDeadline(after)) {
			t.Fatalf("%s again changed the lock: %v, then %v", what, before, after)
		}
		return first
	}
	acq := func(mode, owner string, lease, holds, mark int, writer string) func() (any, error) {
		return func() (any, error) {
			return acquire.Run(ctx, rdb, []string{hash, readers, writers, token},
				mode, owner, lease, holds, 86_400_000, mark, 1000, writer).Int64Slice()
		}
	}
	rel := func(mode, owner string, holds, drop int) func() (any, error) {
		return func() (any, error) {
			return release.Run(ctx, rdb, []string{hash, readers, writers, channel, hash + ":released:" + owner},
				mode, owner, holds, drop, owner, 30_000).Int64Slice()
		}
	}
	ren := func(mode, owner string, lease int) func() (any, error) {
		return func() (any, error) {
			return renew.Run(ctx, rdb, []string{hash, readers, writers}, mode, owner, lease).Int64()
		}
	}
	field := func(f string) any { return srv.Do("HGET", hash, f) }

	r1 := twice("new reader", acq("r", "c:1", 60_000, 0, 0, "")).([]int64)
	if r1[0] != 1 {
		t.Fatalf("new reader: %v", r1)
	}
	twice("re-entry of the reader", acq("r", "c:1", 60_000, 1, 0, ""))
	if got := field("c:1"); got != "2" {
		t.Fatalf("reader's holds %v, want 2", got)
	}
	if got := twice("reader's renewal", ren("r", "c:1", 60_000)); got != int64(1) {
		t.Fatalf("renewal: %v", got)
	}
	if got := twice("writer waiting", acq("w", "c:2", 60_000, 0, 3000, "")).([]int64); got[0] != 0 || got[1] < 1 || got[1] > 1000 {
		t.Fatalf("waiting writer: %v, want {0, sleep within 1000}", got)
	}
	if srv.Do("ZSCORE", writers, "c:2") == nil {
		t.Fatal("no mark of the waiting writer")
	}
	if got := twice("drop a read hold", rel("r", "c:1", 2, 1)).([]int64); !reflect.DeepEqual(got, []int64{2, 0}) {
		t.Fatalf("drop a read hold: %v", got)
	}
	// The last release publishes; its repeat answers released, and
	// neither touches the lock nor publishes again.
	if got, _ := rel("r", "c:1", 1, 1)(); !reflect.DeepEqual(got, []int64{1, 1}) {
		t.Fatalf("last read release: %v", got)
	}
	before := srv.Do("HGETALL", hash)
	if got, _ := rel("r", "c:1", 1, 1)(); !reflect.DeepEqual(got, []int64{1, 0}) {
		t.Fatalf("repeated last read release: %v, want {1, 0}", got)
	}
	if after := srv.Do("HGETALL", hash); !reflect.DeepEqual(before, after) {
		t.Fatalf("the repeated release changed the lock: %v, then %v", before, after)
	}
	w := twice("writer", acq("w", "c:2", 60_000, 0, 3000, "")).([]int64)
	if w[0] != 1 || w[1] <= r1[1] {
		t.Fatalf("writer: %v after reader token %d", w, r1[1])
	}
	if srv.Do("EXISTS", writers) != int64(0) {
		t.Fatal("the writer's mark is left after it acquired")
	}
	down := twice("the writer's reader", acq("r", "c:3", 60_000, 0, 0, "c:2")).([]int64)
	if down[0] != 1 || down[1] <= w[1] {
		t.Fatalf("the writer's reader: %v after writer token %d", down, w[1])
	}
	if got := twice("another reader", acq("r", "c:4", 60_000, 0, 0, "")).([]int64); got[0] != 0 {
		t.Fatalf("another reader while the writer holds: %v", got)
	}
	if got, _ := rel("w", "c:2", 1, 1)(); !reflect.DeepEqual(got, []int64{1, 1}) {
		t.Fatalf("write release: %v", got)
	}

	// A reader with a short lease goes at its deadline; the other stays.
	if got, _ := acq("r", "c:5", 50, 0, 0, "")(); got.([]int64)[0] != 1 {
		t.Fatalf("short reader: %v", got)
	}
	<-time.After(100 * time.Millisecond) // past its deadline, by the server's clock too
	if got, _ := ren("r", "c:5", 50)(); got != int64(0) {
		t.Fatalf("renewal of an expired reader: %v", got)
	}
	if field("c:5") != nil || srv.Do("ZSCORE", readers, "c:5") != nil {
		t.Fatal("the expired reader is left in the lock")
	}
	if got, _ := ren("r", "c:3", 60_000)(); got != int64(1) {
		t.Fatalf("renewal of the other reader: %v", got)
	}
	if got, _ := rel("r", "c:3", 1, 1)(); !reflect.DeepEqual(got, []int64{1, 1}) {
		t.Fatalf("last release: %v", got)
	}
	if n := srv.Do("EXISTS", hash, readers, writers).(int64); n != 0 {
		t.Fatalf("%d keys left", n)
	}
}

// The writer's downgrade does not queue behind its own Client's readers,
// which wait for that writer.
func TestRWMutexDowngradeAheadOfOwnReaders(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, s locktest.Store) {
		ctx := testkit.Context(t)
		c := s.NewClient(t)
		rw := c.RWMutex("ahead")
		w := locktest.MustLock(t, ctx, rw)
		got := locktest.Go(ctx, rw.RLocker())
		locktest.WaitForWaiter(t, c, "ahead")
		r, err := rw.RLocker().Lock(w.Context(), lock.WithWait(time.Second))
		if err != nil {
			t.Fatalf("the writer's read Lock behind its own Client's waiting reader: %v", err)
		}
		rwStillWaiting(t, got, "reader while the writer holds")
		locktest.MustUnlock(t, w)
		g := locktest.Await(t, got, 5*time.Second) // the readers share
		locktest.MustUnlock(t, g.Lease)
		locktest.MustUnlock(t, r)
	})
}

// withoutDeadline is an HGETALL reply without its deadline field.
func withoutDeadline(v any) any {
	m, ok := v.(map[any]any)
	if !ok {
		return v
	}
	out := make(map[any]any, len(m))
	for k, x := range m {
		if k != "deadline" {
			out[k] = x
		}
	}
	return out
}
