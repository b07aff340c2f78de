// Package locktest is the conformance suite that every lock backend must
// pass, in the manner of testing/fstest: the promises of DESIGN.md checked
// against a real store (a redis-server process, or the in-memory store).
package locktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lockcron/lockcron/lock"
)

// Backend makes Clients that share one store, so that they contend as
// separate processes would.
type Backend struct {
	// NewClient returns a new Client on the store. The suite closes it;
	// Store.NewClient, which also closes it when t ends, will do.
	NewClient func(t testing.TB, opts ...lock.Option) *lock.Client
	// Kind returns the kind of lock under test; nil is Client.Mutex. The
	// suite's promises hold for every exclusive kind: Mutex, FairMutex, an
	// RWMutex's write lock, a Semaphore of one permit.
	Kind func(c *lock.Client, name string) lock.Locker
}

// Run runs the suite; newBackend is called once per subtest, for a fresh
// store.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"MutualExclusion", testMutualExclusion},
		{"TryLockHeld", testTryLockHeld},
		{"WaitBounded", testWaitBounded},
		{"CtxEndsWait", testCtxEndsWait},
		{"CtxDoneBeforeLock", testCtxDoneBeforeLock},
		{"Reentry", testReentry},
		{"UnlockTwice", testUnlockTwice},
		{"LossByForceUnlock", testLossByForceUnlock},
		{"WatchdogKeepsLock", testWatchdogKeepsLock},
		{"FixedLeaseEnds", testFixedLeaseEnds},
		{"CtxEndKeepsLock", testCtxEndKeepsLock},
		{"TokensIncrease", testTokensIncrease},
		{"WakeOnUnlock", testWakeOnUnlock},
		{"CloseReleases", testCloseReleases},
		{"InvalidArguments", testInvalidArguments},
		{"ThousandShortWaits", testThousandShortWaits},
		{"HundredShortLeases", testHundredShortLeases},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newBackend(t)) })
	}
}

func (b Backend) lock(c *lock.Client, name string) lock.Locker {
	if b.Kind == nil {
		return c.Mutex(name)
	}
	return b.Kind(c, name)
}

func (b Backend) client(t *testing.T, opts ...lock.Option) *lock.Client {
	t.Helper()
	c := b.NewClient(t, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Ctx is a context that ends after d, or with the test.
func Ctx(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// MustLock locks l or fails the test.
func MustLock(t testing.TB, ctx context.Context, l lock.Locker, opts ...lock.AcquireOption) *lock.Lease {
	t.Helper()
	lease, err := l.Lock(ctx, opts...)
	if err != nil {
		t.Fatalf("Lock(%q): %v", l.Name(), err)
	}
	return lease
}

// MustUnlock unlocks lease, on a context of its own, or fails the test.
func MustUnlock(t testing.TB, lease *lock.Lease) {
	t.Helper()
	if err := lease.Unlock(Ctx(t, 5*time.Second)); err != nil {
		t.Fatalf("Unlock(%q): %v", lease.Name(), err)
	}
}

// expectLocked asserts that another owner cannot take the lock now.
func expectLocked(t *testing.T, l lock.Locker) {
	t.Helper()
	lease, err := l.TryLock(Ctx(t, 5*time.Second))
	if !errors.Is(err, lock.ErrLocked) {
		if lease != nil {
			_ = lease.Unlock(context.Background())
		}
		t.Fatalf("TryLock by another owner: err = %v, want ErrLocked", err)
	}
}

// expectFree asserts that another owner can take the lock now, and frees it.
func expectFree(t *testing.T, l lock.Locker) {
	t.Helper()
	lease, err := l.TryLock(Ctx(t, 5*time.Second))
	if err != nil {
		t.Fatalf("TryLock of a free lock: %v", err)
	}
	MustUnlock(t, lease)
}

func waitDone(t *testing.T, lease *lock.Lease, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case <-lease.Done():
		return time.Since(start)
	case <-time.After(within):
		t.Fatalf("lease %q: Done not closed within %v", lease.Name(), within)
		return 0
	}
}

// Contend runs goroutines that each take and release the lock rounds
// times, goroutine g on lockers[g%len(lockers)], holding it for hold. It
// returns how many holds overlapped another (0 under mutual exclusion) and
// the first error.
func Contend(ctx context.Context, lockers []lock.Locker, goroutines, rounds int, hold time.Duration) (overlaps int64, err error) {
	var inside, overlapped atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu := lockers[g%len(lockers)]
			for range rounds {
				lease, err := mu.Lock(ctx)
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					overlapped.Add(1)
				}
				time.Sleep(hold) // work under the lock
				inside.Add(-1)
				if err := lease.Unlock(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return overlapped.Load(), <-errs
}

func testMutualExclusion(t *testing.T, b Backend) {
	lockers := []lock.Locker{b.lock(b.client(t), "mutex"), b.lock(b.client(t), "mutex")}
	overlaps, err := Contend(Ctx(t, 30*time.Second), lockers, 16, 25, 50*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	if overlaps != 0 {
		t.Fatalf("%d of %d holds overlapped another", overlaps, 16*25)
	}
}

func testTryLockHeld(t *testing.T, b Backend) {
	c1, c2 := b.client(t), b.client(t)
	ctx := Ctx(t, 10*time.Second)
	lease := MustLock(t, ctx, b.lock(c1, "try"))
	expectLocked(t, b.lock(c1, "try")) // another owner on the same Client
	expectLocked(t, b.lock(c2, "try"))
	MustUnlock(t, lease)
	expectFree(t, b.lock(c2, "try"))
}

func testWaitBounded(t *testing.T, b Backend) {
	c1, c2 := b.client(t), b.client(t)
	ctx := Ctx(t, 10*time.Second)
	lease := MustLock(t, ctx, b.lock(c1, "wait"))
	defer MustUnlock(t, lease)
	start := time.Now()
	_, err := b.lock(c2, "wait").Lock(ctx, lock.WithWait(100*time.Millisecond))
	if !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("Lock(WithWait) on a held lock: %v, want ErrLocked", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond || d > 2*time.Second {
		t.Fatalf("Lock(WithWait(100ms)) returned after %v", d)
	}
	if _, err := b.lock(c2, "wait").Lock(ctx, lock.WithWait(0)); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("Lock(WithWait(0)) on a held lock: %v, want ErrLocked", err)
	}
}

func testCtxEndsWait(t *testing.T, b Backend) {
	c := b.client(t)
	lease := MustLock(t, Ctx(t, 10*time.Second), b.lock(c, "ctx"))
	defer MustUnlock(t, lease)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := b.lock(c, "ctx").Lock(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with an expiring ctx: %v, want DeadlineExceeded", err)
	}
	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() {
		waiting(c, "ctx", 5*time.Second)
		cancel2()
	}()
	if _, err := b.lock(c, "ctx").Lock(ctx2); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with a cancelled ctx: %v, want Canceled", err)
	}
}

func testCtxDoneBeforeLock(t *testing.T, b Backend) {
	c := b.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.lock(c, "done").Lock(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock on a done ctx: %v, want Canceled", err)
	}
	expectFree(t, b.lock(c, "done"))
}

func testReentry(t *testing.T, b Backend) {
	c1, c2 := b.client(t), b.client(t)
	ctx := Ctx(t, 10*time.Second)
	mu := b.lock(c1, "reentry")
	outer := MustLock(t, ctx, mu)
	mid := MustLock(t, outer.Context(), mu)
	inner := MustLock(t, mid.Context(), mu)
	if mid != outer || inner != outer {
		t.Fatal("re-entry returned another lease")
	}
	if inner.Token() != outer.Token() {
		t.Fatalf("re-entry token %d, want %d", inner.Token(), outer.Token())
	}
	// Another owner: same Client with an unrelated ctx, and another Client.
	expectLocked(t, b.lock(c1, "reentry"))
	expectLocked(t, b.lock(c2, "reentry"))

	for i := 3; i > 1; i-- {
		MustUnlock(t, outer)
		if outer.Err() != nil {
			t.Fatalf("after an Unlock with %d holds left: Err = %v", i-1, outer.Err())
		}
		expectLocked(t, b.lock(c2, "reentry"))
	}
	MustUnlock(t, outer)
	if !errors.Is(outer.Err(), lock.ErrReleased) {
		t.Fatalf("after the last Unlock: Err = %v, want ErrReleased", outer.Err())
	}
	expectFree(t, b.lock(c2, "reentry"))
	if err := outer.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("a fourth Unlock: %v, want ErrNotHeld", err)
	}
}

func testUnlockTwice(t *testing.T, b Backend) {
	c := b.client(t)
	ctx := Ctx(t, 10*time.Second)
	lease := MustLock(t, ctx, b.lock(c, "twice"))
	MustUnlock(t, lease)
	select {
	case <-lease.Done():
	default:
		t.Fatal("Done not closed after Unlock")
	}
	if !errors.Is(context.Cause(lease.Context()), lock.ErrReleased) {
		t.Fatalf("lease context cause %v, want ErrReleased", context.Cause(lease.Context()))
	}
	// Someone else takes it; the stale lease must not free their lock.
	other := MustLock(t, ctx, b.lock(c, "twice"))
	defer MustUnlock(t, other)
	err := lease.Unlock(ctx)
	if !errors.Is(err, lock.ErrNotHeld) || !errors.Is(err, lock.ErrReleased) {
		t.Fatalf("second Unlock: %v, want ErrNotHeld and ErrReleased", err)
	}
	if other.Err() != nil {
		t.Fatalf("the new owner's lease ended: %v", other.Err())
	}
	expectLocked(t, b.lock(c, "twice"))
}

func testLossByForceUnlock(t *testing.T, b Backend) {
	const leaseTime = 300 * time.Millisecond
	c1 := b.client(t, lock.WithLeaseTime(leaseTime))
	c2 := b.client(t)
	ctx := Ctx(t, 10*time.Second)
	lease := MustLock(t, ctx, b.lock(c1, "lost"))
	if ok, err := c2.ForceUnlock(ctx, "lost"); err != nil || !ok {
		t.Fatalf("ForceUnlock: %v, %v", ok, err)
	}
	// The holder learns at its next renewal: within lease/3, plus a margin.
	waitDone(t, lease, leaseTime/3+500*time.Millisecond)
	if !errors.Is(lease.Err(), lock.ErrLockLost) {
		t.Fatalf("Err after loss: %v, want ErrLockLost", lease.Err())
	}
	if !errors.Is(context.Cause(lease.Context()), lock.ErrLockLost) {
		t.Fatalf("context cause after loss: %v, want ErrLockLost", context.Cause(lease.Context()))
	}
	other := MustLock(t, ctx, b.lock(c2, "lost"))
	defer MustUnlock(t, other)
	if err := lease.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lease: %v, want ErrNotHeld", err)
	}
	if other.Err() != nil {
		t.Fatalf("the new owner's lease ended: %v", other.Err())
	}
	expectLocked(t, b.lock(c1, "lost"))
}

func testWatchdogKeepsLock(t *testing.T, b Backend) {
	const leaseTime = 200 * time.Millisecond
	c := b.client(t, lock.WithLeaseTime(leaseTime))
	ctx := Ctx(t, 10*time.Second)
	lease := MustLock(t, ctx, b.lock(c, "watchdog"))
	select {
	case <-lease.Done():
		t.Fatalf("lease ended while held by the watchdog: %v", lease.Err())
	case <-time.After(3 * leaseTime):
	}
	expectLocked(t, b.lock(b.client(t), "watchdog"))
	MustUnlock(t, lease)
}

func testFixedLeaseEnds(t *testing.T, b Backend) {
	const leaseTime = 200 * time.Millisecond
	c := b.client(t)
	ctx := Ctx(t, 10*time.Second)
	lease := MustLock(t, ctx, b.lock(c, "fixed"), lock.WithLease(leaseTime))
	// The lease's time counts from before Lock returned, so it must be
	// over leaseTime after: Err says so even if the timer that closes
	// Done, or this goroutine, runs late on a loaded machine.
	locked := time.Now()
	<-time.After(time.Until(locked.Add(leaseTime)))
	if err := lease.Err(); err == nil {
		t.Fatalf("fixed lease still held %v after Lock returned, past its %v", time.Since(locked), leaseTime)
	}
	waitDone(t, lease, 2*time.Second)
	if !errors.Is(lease.Err(), lock.ErrLockLost) {
		t.Fatalf("Err after the fixed lease: %v, want ErrLockLost", lease.Err())
	}
	// The store lets it go at its TTL, with no unlock message.
	other := MustLock(t, ctx, b.lock(b.client(t), "fixed"), lock.WithWait(2*time.Second))
	MustUnlock(t, other)
}

func testCtxEndKeepsLock(t *testing.T, b Backend) {
	c := b.client(t)
	ctx, cancel := context.WithCancel(context.Background())
	lease := MustLock(t, ctx, b.lock(c, "ctxend"))
	cancel()
	<-lease.Context().Done()
	select {
	case <-lease.Done():
		t.Fatal("Done closed when the Lock ctx ended")
	default:
	}
	if lease.Err() != nil {
		t.Fatalf("Err = %v after the Lock ctx ended, want nil", lease.Err())
	}
	expectLocked(t, b.lock(b.client(t), "ctxend"))
	MustUnlock(t, lease)
	expectFree(t, b.lock(c, "ctxend"))
}

func testTokensIncrease(t *testing.T, b Backend) {
	clients := []*lock.Client{b.client(t), b.client(t)}
	ctx := Ctx(t, 10*time.Second)
	var last int64
	for i := range 20 {
		lease := MustLock(t, ctx, b.lock(clients[i%2], "tokens"))
		if lease.Token() <= last {
			t.Fatalf("token %d after %d: not increasing", lease.Token(), last)
		}
		last = lease.Token()
		MustUnlock(t, lease)
	}
}

func testWakeOnUnlock(t *testing.T, b Backend) {
	// Default 30s lease: only the unlock message can wake the waiter soon.
	c1, c2 := b.client(t), b.client(t)
	ctx := Ctx(t, 10*time.Second)
	lease := MustLock(t, ctx, b.lock(c1, "wake"))
	got := LockAsync(ctx, b.lock(c2, "wake"))
	WaitForWaiter(t, c2, "wake")
	unlocked := time.Now()
	MustUnlock(t, lease)
	if d := AwaitAcquired(t, got, 5*time.Second).Sub(unlocked); d > 100*time.Millisecond {
		t.Fatalf("waiter acquired %v after the unlock, want a few ms", d)
	}
}

// Got is what Go reports: the lease, or Lock's error, and when Lock
// returned.
type Got struct {
	Lease *lock.Lease
	Err   error
	At    time.Time
}

// Go calls l.Lock(ctx, opts...) in a goroutine and reports on the channel
// it returns; the lease, if any, is the receiver's to unlock. The goroutine
// ends when Lock does; ctx bounds it.
func Go(ctx context.Context, l lock.Locker, opts ...lock.AcquireOption) <-chan Got {
	out := make(chan Got, 1)
	go func() {
		lease, err := l.Lock(ctx, opts...)
		out <- Got{Lease: lease, Err: err, At: time.Now()}
	}()
	return out
}

// Await waits up to within for Go's report, and fails the test on an error
// or a timeout.
func Await(t testing.TB, ch <-chan Got, within time.Duration) Got {
	t.Helper()
	select {
	case g := <-ch:
		if g.Err != nil {
			t.Fatalf("Lock: %v", g.Err)
		}
		return g
	case <-time.After(within):
		t.Fatalf("Lock did not return within %v", within)
		return Got{}
	}
}

// Acquired is what LockAsync reports: when Lock returned, and the error of
// Lock or of the Unlock that followed.
type Acquired struct {
	At  time.Time
	Err error
}

// LockAsync calls mu.Lock(ctx) in a goroutine, unlocks at once, and reports
// on the channel it returns. The goroutine ends when Lock does; ctx bounds
// it.
func LockAsync(ctx context.Context, mu lock.Locker) <-chan Acquired {
	out := make(chan Acquired, 1)
	go func() {
		l, err := mu.Lock(ctx)
		at := time.Now()
		if err == nil {
			err = l.Unlock(ctx)
		}
		out <- Acquired{At: at, Err: err}
	}()
	return out
}

// AwaitAcquired waits up to within for LockAsync's report, fails the test
// on an error or a timeout, and returns when Lock returned.
func AwaitAcquired(t testing.TB, ch <-chan Acquired, within time.Duration) time.Time {
	t.Helper()
	select {
	case a := <-ch:
		if a.Err != nil {
			t.Fatal(a.Err)
		}
		return a.At
	case <-time.After(within):
		t.Fatalf("Lock did not return within %v", within)
		return time.Time{}
	}
}

// WaitForWaiter polls until a goroutine of c waits in Lock for name.
func WaitForWaiter(t testing.TB, c *lock.Client, name string) {
	t.Helper()
	if !waiting(c, name, 5*time.Second) {
		t.Fatalf("no goroutine waits for %q after 5s", name)
	}
}

func waiting(c *lock.Client, name string, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for c.Waiting(name) == 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func testCloseReleases(t *testing.T, b Backend) {
	c1 := b.NewClient(t)
	c2 := b.client(t)
	ctx := Ctx(t, 10*time.Second)
	lease := MustLock(t, ctx, b.lock(c1, "close"))
	MustLock(t, lease.Context(), b.lock(c1, "close")) // a second hold
	got := LockAsync(ctx, b.lock(c2, "close"))
	WaitForWaiter(t, c2, "close")
	closed := time.Now()
	if err := c1.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if d := AwaitAcquired(t, got, 5*time.Second).Sub(closed); d > 200*time.Millisecond {
		t.Fatalf("other client acquired %v after Close", d)
	}
	if err := lease.Err(); !errors.Is(err, lock.ErrReleased) || !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("lease Err after Close: %v, want ErrReleased and ErrClosed", err)
	}
	if _, err := b.lock(c1, "close").Lock(ctx); !errors.Is(err, lock.ErrClosed) {
		t.Fatalf("Lock after Close: %v, want ErrClosed", err)
	}
	if err := c1.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func testInvalidArguments(t *testing.T, b Backend) {
	c := b.client(t)
	ctx := Ctx(t, 10*time.Second)
	cases := []struct {
		name string
		call func() error
	}{
		{"empty name", func() error { _, err := b.lock(c, "").Lock(ctx); return err }},
		{"open brace", func() error { _, err := b.lock(c, "a{b").Lock(ctx); return err }},
		{"close brace", func() error { _, err := b.lock(c, "a}b").TryLock(ctx); return err }},
		{"zero lease", func() error { _, err := b.lock(c, "x").Lock(ctx, lock.WithLease(0)); return err }},
		{"negative lease", func() error { _, err := b.lock(c, "x").Lock(ctx, lock.WithLease(-time.Second)); return err }},
		{"sub-ms lease", func() error { _, err := b.lock(c, "x").Lock(ctx, lock.WithLease(time.Microsecond)); return err }},
		{"negative wait", func() error { _, err := b.lock(c, "x").Lock(ctx, lock.WithWait(-1)); return err }},
		{"force unlock empty", func() error { _, err := c.ForceUnlock(ctx, ""); return err }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func testThousandShortWaits(t *testing.T, b Backend) {
	c := b.client(t)
	ctx := Ctx(t, 60*time.Second)
	mu := b.lock(c, "thousand")
	var ok, locked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1000)
	start := make(chan struct{})
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := mu.Lock(ctx, lock.WithWait(10*time.Millisecond), lock.WithLease(10*time.Second))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, lock.ErrLocked):
				locked.Add(1)
			default:
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("unexpected error: %v", err)
	}
	if ok.Load() != 1 || locked.Load() != 999 {
		t.Fatalf("%d acquired and %d got ErrLocked, want 1 and 999", ok.Load(), locked.Load())
	}
}

func testHundredShortLeases(t *testing.T, b Backend) {
	c := b.client(t)
	ctx := Ctx(t, 60*time.Second)
	mu := b.lock(c, "hundred")
	var ok atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lease, err := mu.Lock(ctx, lock.WithWait(10*time.Second), lock.WithLease(5*time.Millisecond))
			if err != nil {
				errs <- err
				return
			}
			ok.Add(1)
			// The 5ms lease may be over already; either way is fine here.
			if err := lease.Unlock(ctx); err != nil && !errors.Is(err, lock.ErrNotHeld) {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("unexpected error: %v", err)
	}
	if ok.Load() != 100 {
		t.Fatalf("%d of 100 acquired", ok.Load())
	}
}
