package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Locker is what every kind of lock offers. Implementations are safe for
// concurrent use.
type Locker interface {
	// Name is the lock's name, as given to the Client.
	Name() string
	// Lock waits until the lock is held, ctx ends (the ctx's error,
	// wrapped), or WithWait passes (ErrLocked). If ctx descends from a
	// lease of this lock from the same Client, it adds a hold to that lease
	// and returns it.
	Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error)
	// TryLock makes one attempt: ErrLocked if another owner holds the lock.
	TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error)
}

// mutex is the reentrant lock: Redisson's RLock.
type mutex struct {
	c *Client
	k *keys
}

func newMutex(c *Client, name string) *mutex {
	return &mutex{c: c, k: newKeys(c.opt.prefix, name)}
}

func (m *mutex) Name() string { return m.k.name }

func (m *mutex) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.acquire(ctx, false, opts)
}

func (m *mutex) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.acquire(ctx, true, opts)
}

func (m *mutex) acquire(ctx context.Context, try bool, opts []AcquireOption) (*Lease, error) {
	o, err := buildAcquireOptions(m.k.name, opts)
	if err != nil {
		return nil, err
	}
	if err := ctxErr(ctx, m.k.name); err != nil {
		return nil, err
	}
	if m.c.isClosed() {
		return nil, fmt.Errorf("lock %q: %w", m.k.name, ErrClosed)
	}
	if l, ok := ctx.Value(leaseKey{m.c, m.k.name}).(*Lease); ok {
		return l.reenter(ctx)
	}
	if o.hasWait && o.wait == 0 {
		try = true
	}

	c := m.c
	start := time.Now()
	w := c.tel.startWait(ctx, m.k.name)
	owner := c.newOwner()
	lease := c.opt.leaseTime
	if o.hasLease {
		lease = o.lease
	}

	// Try at once unless goroutines of this Client already wait for the
	// lock; then queue behind them. If the lock's channel was subscribed
	// before this attempt (it lingers after the last wait), the wait needs
	// no second attempt at subscribing: an unlock after the attempt either
	// wakes the queue, or, if it lands before this goroutine joins it, is
	// counted by the watch, and the goroutine tries again at once.
	attempt := func() (*Lease, time.Duration, error) { return m.attempt(ctx, owner, lease, o.hasLease) }
	sleep := time.Duration(0)
	var lg lingering
	if try || !c.hasWaiters(m.k.name) {
		if !try {
			lg = c.watchLingering(m.k)
		}
		l, pttl, err := attempt()
		if l != nil || err != nil {
			c.endWatch(m.k.name, lg)
			return m.finish(w, start, l, err)
		}
		if try {
			return m.finish(w, start, nil, fmt.Errorf("lock %q: %w", m.k.name, ErrLocked))
		}
		sleep = pttl
	}
	l, err := m.wait(ctx, o, lease, sleep, lg, start, attempt)
	return m.finish(w, start, l, err)
}

func (m *mutex) finish(w waitSpan, start time.Time, l *Lease, err error) (*Lease, error) {
	m.c.tel.endWait(w, m.k.name, time.Since(start), l, err)
	if l != nil && m.c.log.IsDebug() {
		m.c.log.Debug("lock acquired", "lock", m.k.name, "owner", l.owner, "token", l.token, "wait", time.Since(start))
	}
	return l, err
}

func (c *Client) hasWaiters(name string) bool { return c.Waiting(name) > 0 }

// attempt tries once. It returns a lease, or the holder's remaining TTL, or
// an error.
func (m *mutex) attempt(ctx context.Context, owner string, lease time.Duration, fixed bool) (*Lease, time.Duration, error) {
	sent := time.Now()
	r, err := m.c.be.acquire(ctx, m.k, owner, lease, 0)
	if err != nil {
		// The script may have run although the reply was lost.
		m.c.cleanup(m.k, owner, lease)
		return nil, 0, fmt.Errorf("lock %q: acquire: %w", m.k.name, err)
	}
	switch r.status {
	case acqAcquired:
		var f time.Duration
		if fixed {
			f = lease
		}
		l, err := m.c.newLease(ctx, m.k, owner, r.value, lease, f, sent)
		return l, 0, err
	case acqHeld:
		return nil, time.Duration(r.value) * time.Millisecond, nil
	}
	return nil, 0, m.badReply(r)
}

func (m *mutex) badReply(r acquireReply) error {
	switch r.status {
	case acqWrongType:
		return fmt.Errorf("lock %q: key %q holds another type, not a lock hash: %w", m.k.name, m.k.lock, ErrBadKey)
	case acqNoTTL:
		return fmt.Errorf("lock %q: key %q is a hash without a TTL, not one of our locks: %w", m.k.name, m.k.lock, ErrBadKey)
	case acqTokenType:
		return fmt.Errorf("lock %q: key %q holds another type, not a fencing token: %w", m.k.name, m.k.token, ErrBadKey)
	}
	return fmt.Errorf("lock %q: unexpected reply %d/%d from acquire", m.k.name, r.status, r.value)
}

// testHookBeforeQueue, if set by a test, runs after a failed first attempt
// and before the goroutine joins the queue.
var testHookBeforeQueue func(name string)

// wait queues behind this Client's other waiters for the lock, then, as the
// head, tries again whenever the lock's channel says it was unlocked, the
// subscription is (re)established, or the holder's TTL runs out. attempt
// returns a lease, or the holder's remaining TTL to wait for, or an error
// that ends the wait.
func (m *mutex) wait(ctx context.Context, o acquireOptions, lease, sleep time.Duration, lg lingering, start time.Time, attempt func() (*Lease, time.Duration, error)) (*Lease, error) {
	c := m.c
	if testHookBeforeQueue != nil {
		testHookBeforeQueue(m.k.name)
	}
	w, q, err := c.enqueue(m.k, lg)
	if err != nil {
		return nil, fmt.Errorf("lock %q: %w", m.k.name, err)
	}
	acquired := false
	defer func() { c.dequeue(q, w, acquired, lease) }()

	var deadline <-chan time.Time
	if o.hasWait {
		t := time.NewTimer(o.wait - time.Since(start))
		defer t.Stop()
		deadline = t.C
	}
	// Until its turn the waiter only watches turn; as the head it tries
	// again at each wake-up. A head that never attempted and inherits the
	// turn from one that acquired sleeps for the lock's TTL or until an
	// unlock.
	var (
		turn   = w.turn
		ready  <-chan struct{}
		wake   <-chan struct{}
		timerC <-chan time.Time
		now    bool
	)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		if !now {
			select {
			case <-turn:
				turn, wake, now = nil, w.wake, w.attemptNow
				if ready = c.takeReady(q); ready == lg.ready {
					ready = nil // confirmed before our first attempt
				}
				if sleep == 0 {
					sleep = w.sleep
				}
				if sleep <= 0 {
					sleep = lease
				}
				timer.Reset(sleep)
				timerC = timer.C
				continue
			case <-ready:
				ready = nil
				c.sawReady(q)
			case <-wake:
			case <-timerC:
			case <-ctx.Done():
				return nil, ctxErr(ctx, m.k.name)
			case <-deadline:
				return nil, fmt.Errorf("lock %q: not acquired within %v: %w", m.k.name, o.wait, ErrLocked)
			case <-c.done:
				return nil, fmt.Errorf("lock %q: %w", m.k.name, ErrClosed)
			}
		}
		now = false
		l, pttl, err := attempt()
		if err != nil {
			return nil, err
		}
		if l != nil {
			acquired = true
			return l, nil
		}
		if pttl <= 0 {
			pttl = time.Millisecond
		}
		timer.Reset(pttl)
	}
}

// ctxErr is nil while ctx is live, else its error wrapped with the lock's
// name, and with its cause when that says more.
func ctxErr(ctx context.Context, name string) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
		return fmt.Errorf("lock %q: %w (%w)", name, err, cause)
	}
	return fmt.Errorf("lock %q: %w", name, err)
}
