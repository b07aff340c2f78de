package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A Lease is one owner's hold on a lock. While it holds the lock, a lease
// taken without WithLease is renewed in the background every lease/3 (the
// watchdog: its Client's renewer, which renews the Client's leases
// together), counted from when the last successful request was sent, and
// again before the deadline if a renewal is late, until Unlock,
// Client.Close, or the lock is lost.
//
// Lock loss is never silent: when a renewal finds the lock gone or another
// owner's, or when no renewal has succeeded by the local deadline (the last
// successful renewal's send time plus 9/10 of the lease, on the monotonic
// clock), Done is closed and Context is cancelled with cause ErrLockLost —
// before the lease could have expired in Redis. A fixed lease (WithLease)
// ends the same way at 9/10 of its time.
//
// A Lease is safe for concurrent use.
type Lease struct {
	c     *Client
	kind  kind
	k     *keys
	owner string
	token int64
	lease time.Duration // the TTL set in Redis
	fixed time.Duration // WithLease's time; 0 under the watchdog

	ctx    context.Context
	cancel context.CancelCauseFunc
	done   chan struct{}
	hold   holdSpan
	start  time.Time

	// holdMu serialises changes to holds, which go through Redis.
	holdMu sync.Mutex
	holds  int

	// mu guards the state below; never held across I/O.
	mu        sync.Mutex
	err       error // nil while held
	releasing bool  // the last hold's release is under way: its reply, not the deadline, ends the lease
	deadline  time.Time
	timer     *time.Timer // fires at deadline: the lease is lost; under the watchdog, set when the lease joins the renewer

	rtt time.Duration // the acquisition's round trip: the renewer's first measure of the network

	// The renewer's state of this lease; under c.renew.mu.
	ren     renewState
	lastOK  time.Time // when the latest successful acquisition or renewal was sent
	retryAt time.Time // a renewal failed: the next is due then
	flying  int       // batches in flight that hold this lease

	groups []*Lease // composite leases (Multi, RedLock) holding this one as a part; under mu

	frontOnce sync.Once
	front     any    // the value of a public package that stands for this lease (Front)
	group     *group // set if this lease is a composite one
}

func (c *Client) newLease(ctx context.Context, kd kind, k *keys, owner string, token int64, lease, fixed time.Duration, sent time.Time) (*Lease, error) {
	l := &Lease{
		c: c, kind: kd, k: k, owner: owner, token: token, lease: lease, fixed: fixed,
		done:  make(chan struct{}),
		holds: 1,
		start: time.Now(),
	}
	l.ctx, l.cancel = context.WithCancelCause(context.WithValue(ctx, leaseKey{c, k.id}, l))
	l.hold = c.tel.startHold(ctx, l)
	l.rtt = time.Since(sent)
	if fixed == 0 && time.Until(sent.Add(safeTime(lease))) < lease/3 {
		// The acquisition took long (a slow network, a new connection's
		// handshake): little of the lease is sure to be left, maybe none.
		// Renew at once, before the lease is handed out, so that its
		// deadline counts from a fresh send. The renewal checks the owner:
		// if the key expired meanwhile, it fails and the lease is lost.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lease/2)
		var again time.Time
		if ok, err := kd.renew(withSent(rctx, &again), k, owner, lease); ok && err == nil {
			sent, l.rtt = again, time.Since(again)
		}
		cancel()
	}
	l.mu.Lock() // a short lease's timer may fire before the assignment
	l.deadline = sent.Add(safeTime(lease))
	if fixed > 0 {
		l.timer = time.AfterFunc(time.Until(l.deadline), l.expire)
	} // else startTimer sets it
	l.mu.Unlock()
	// Complete before it is published: from here Close may end it.
	if !c.track(l) {
		l.end(fmt.Errorf("%w: %w", ErrReleased, ErrClosed), outcomeReleased)
		c.cleanup(kd, k, owner, lease)
		return nil, fmt.Errorf("lock %q: %w", k.name, ErrClosed)
	}
	if fixed == 0 {
		// It joins the Client's renewer lease/6 after sent: about half-way
		// to its first renewal. A lease released before then (most are)
		// has no goroutine and no timer of its own. If the Client closed
		// meanwhile, Close releases it.
		c.renew.add(l, sent)
	}
	return l, nil
}

// startTimer sets the deadline's timer, when the lease joins the renewer:
// the deadline (9/10 of the lease) cannot pass before, and Err checks it
// itself.
func (l *Lease) startTimer() {
	l.mu.Lock()
	if l.err == nil && l.timer == nil {
		l.timer = time.AfterFunc(time.Until(l.deadline), l.expire)
	}
	l.mu.Unlock()
}

// safeTime is how long after sending a successful acquire or renewal the
// lease is still surely held: 9/10 of it, leaving a margin for the rate
// difference between our clock and the server's.
func safeTime(lease time.Duration) time.Duration { return lease - lease/10 }

// Front returns the value that stands for l in a public package (a
// *lock.Lease), made by mk on the first call: every hold of one lease is
// the same value there.
func (l *Lease) Front(mk func() any) any {
	l.frontOnce.Do(func() { l.front = mk() })
	return l.front
}

// Name is the lock's name.
func (l *Lease) Name() string { return l.k.name }

// Owner is the owner id under which the lease holds the lock in Redis.
func (l *Lease) Owner() string { return l.owner }

// Token is the fencing token: the same for every hold of this lease, and
// strictly greater than the token of every earlier lease of this lock name,
// even across a restart of Redis that lost its data (it derives from the
// server's clock). Pass it along with writes so that a store can refuse a
// late writer whose lease has ended.
func (l *Lease) Token() int64 { return l.token }

// Context returns a context that ends when the ctx given to Lock ends, when
// the lock is lost (cause ErrLockLost), or when the lease is released (cause
// ErrReleased). Pass it to the work done under the lock, and to Lock calls
// that should re-enter this lease.
func (l *Lease) Context() context.Context { return l.ctx }

// Done is closed when the lease no longer holds the lock: released or lost.
// It does not close when the ctx given to Lock ends; the lock stays held
// until Unlock.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err is nil while the lease holds the lock; then an error that wraps
// ErrLockLost or ErrReleased. It checks the local deadline itself, so it
// never says nil past it even when the deadline's timer fires late.
func (l *Lease) Err() error {
	if l.group != nil {
		return l.groupErr()
	}
	l.mu.Lock()
	err, past := l.err, l.err == nil && !l.releasing && !time.Now().Before(l.deadline)
	l.mu.Unlock()
	if past {
		l.expire()
		return l.Err()
	}
	return err
}

// Unlock drops one hold; the last one stops the watchdog (before anything
// is sent), deletes the lock and wakes its waiters. Call it on a context
// that is still live, such as context.WithoutCancel(ctx) with a timeout, so
// that a lease whose work was cancelled still frees the lock. ctx bounds
// the call. If the last hold's Unlock fails (ctx or network), the lease
// ends all the same and the lock expires in Redis within one lease time;
// a failed Unlock of an inner hold changes nothing. Unlock of a lease that
// no longer holds the lock returns an error wrapping ErrNotHeld (and
// ErrLockLost or ErrReleased) and touches no other owner's lock.
func (l *Lease) Unlock(ctx context.Context) error {
	if l.group != nil {
		return l.groupUnlock(ctx)
	}
	l.holdMu.Lock()
	defer l.holdMu.Unlock()
	if err := l.Err(); err != nil {
		l.freeIfLost(ctx, err)
		return fmt.Errorf("lock %q: unlock: %w: %w", l.k.name, ErrNotHeld, err)
	}
	if l.holds > 1 {
		n, err := l.kind.release(ctx, l.k, l.owner, l.holds, 1)
		if err != nil {
			return fmt.Errorf("lock %q: unlock: %w", l.k.name, err)
		}
		if n != relDropped {
			return l.releaseFailed(n)
		}
		l.holds--
		return nil
	}
	return l.releaseLast(ctx, ErrReleased)
}

// freeIfLost frees the lock of a lease that ended with err, if the lease
// was lost by its local deadline and may still hold the lock in Redis.
// holdMu is held.
func (l *Lease) freeIfLost(ctx context.Context, err error) {
	if errors.Is(err, ErrLockLost) && l.holds > 0 {
		l.stopWatchdog()
		_, _ = l.kind.release(ctx, l.k, l.owner, l.holds, l.holds)
		l.holds = 0
	}
}

// releaseAll drops every hold (Client.Close).
func (l *Lease) releaseAll(ctx context.Context, cause error) error {
	l.holdMu.Lock()
	defer l.holdMu.Unlock()
	if l.Err() != nil {
		return nil
	}
	return l.releaseLast(ctx, cause)
}

// releaseLast stops the watchdog, then deletes the lock. holdMu is held.
func (l *Lease) releaseLast(ctx context.Context, cause error) error {
	return l.releaseWith(ctx, cause, func(ctx context.Context, holds int) (int64, error) {
		return l.kind.release(ctx, l.k, l.owner, holds, holds)
	})
}

// releaseWith stops the watchdog, then deletes the lock by rel, which
// replies as release.lua does. holdMu is held. From here the release's
// reply, not the local deadline, ends the lease: on a slow network the
// deadline may pass while the release travels, and a release that finds
// the lock still ours shows it was held until then.
func (l *Lease) releaseWith(ctx context.Context, cause error, rel func(ctx context.Context, holds int) (int64, error)) error {
	l.mu.Lock()
	l.releasing = true
	l.mu.Unlock()
	l.stopWatchdog()
	n, err := rel(ctx, l.holds)
	l.holds = 0
	if err != nil {
		l.end(fmt.Errorf("%w: unlock failed, the lock expires within its lease: %w", cause, err), outcomeReleased)
		return fmt.Errorf("lock %q: unlock: %w", l.k.name, err)
	}
	if n != relReleased {
		return l.releaseFailed(n)
	}
	l.end(cause, outcomeReleased)
	if l.c.log.IsDebug() {
		l.c.log.Debug("lock released", "lock", l.k.name, "owner", l.owner, "token", l.token, "held", time.Since(l.start))
	}
	return nil
}

func (l *Lease) releaseFailed(n int64) error {
	var reason error
	if n == relMismatch {
		reason = fmt.Errorf("%w: hold count in %q differs from this lease's", ErrLockLost, l.k.lock)
	} else {
		reason = fmt.Errorf("%w: %q no longer holds this lease", ErrLockLost, l.k.lock)
	}
	l.lose(reason)
	return fmt.Errorf("lock %q: unlock: %w: %w", l.k.name, ErrNotHeld, reason)
}

// reenter adds a hold to the lease (Lock on a context of this lease).
func (l *Lease) reenter(ctx context.Context) (*Lease, error) {
	l.holdMu.Lock()
	defer l.holdMu.Unlock()
	if err := l.Err(); err != nil {
		return nil, fmt.Errorf("lock %q: re-enter: %w", l.k.name, err)
	}
	r, err := l.kind.reenter(ctx, l.k, l.owner, l.lease, l.holds)
	if err != nil {
		return nil, fmt.Errorf("lock %q: re-enter: %w", l.k.name, err)
	}
	switch r.status {
	case acqAcquired:
		l.holds++
		return l, nil
	case acqGone, acqHeld:
		reason := fmt.Errorf("%w: %q no longer holds this lease", ErrLockLost, l.k.lock)
		l.lose(reason)
		return nil, fmt.Errorf("lock %q: re-enter: %w", l.k.name, reason)
	case acqMismatch:
		reason := fmt.Errorf("%w: hold count in %q differs from this lease's", ErrLockLost, l.k.lock)
		l.lose(reason)
		return nil, fmt.Errorf("lock %q: re-enter: %w", l.k.name, reason)
	}
	return nil, badReply(l.k, r)
}

// maxRenewals is how many batches of renewals in flight may hold one lease
// at once (Client.renew).
const maxRenewals = 3

func (l *Lease) extend(deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil || !deadline.After(l.deadline) {
		return
	}
	l.deadline = deadline
	if l.timer != nil { // else startTimer sets it, from the deadline
		l.timer.Reset(time.Until(deadline))
	}
}

// expire runs at the local deadline, unless a renewal moved it meanwhile.
func (l *Lease) expire() {
	l.mu.Lock()
	d, releasing := l.deadline, l.releasing
	l.mu.Unlock()
	if releasing || time.Now().Before(d) {
		return
	}
	if l.fixed > 0 {
		l.lose(fmt.Errorf("%w: the fixed lease of %v is over", ErrLockLost, l.fixed))
		return
	}
	l.lose(fmt.Errorf("%w: no renewal succeeded within %v", ErrLockLost, safeTime(l.lease)))
}

// lose ends the lease with cause (wrapping ErrLockLost).
func (l *Lease) lose(cause error) { l.end(cause, outcomeLost) }

// end moves the lease out of the held state once: it records cause, stops
// the deadline timer and the watchdog, ends the hold span, cancels the
// context and closes Done.
func (l *Lease) end(cause error, outcome string) {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	l.err = cause
	if l.timer != nil {
		l.timer.Stop()
	}
	l.mu.Unlock()
	l.c.renew.stop(l, false) // whoever ends the lease for good waits for its renewals
	l.c.untrack(l)
	l.c.tel.endHold(l.hold, l, time.Since(l.start), outcome)
	if outcome == outcomeLost {
		l.c.tel.lost(l.k.name)
		l.c.log.Warn("lock lost", "lock", l.k.name, "owner", l.owner, "token", l.token, "error", cause)
	}
	// Telemetry first, so that whoever wakes on Done sees it settled.
	l.cancel(cause)
	close(l.done)
	l.mu.Lock()
	groups := l.groups
	l.groups = nil
	l.mu.Unlock()
	for _, g := range groups {
		g.partEnded(l)
	}
}

// stopWatchdog stops renewals and waits until none is in flight, so that
// nothing renews the lock after the unlock is sent.
func (l *Lease) stopWatchdog() { l.c.renew.stop(l, true) }
