package core

import (
	"context"
	"fmt"
	"time"
)

// Locker is what every kind of lock offers. Implementations are safe for
// concurrent use.
type Locker interface {
	// Name is the lock's name, as given to the Client.
	Name() string
	// Lock waits until the lock is held, ctx ends (the ctx's error,
	// wrapped), or WithWait passes (ErrLocked). It rides out failures to
	// reach the store meanwhile. If ctx descends from a lease of this lock
	// from the same Client, it adds a hold to that lease and returns it.
	Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error)
	// TryLock makes one attempt: ErrLocked if another owner holds the lock,
	// or the failure to reach the store.
	TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error)
}

// mutex is the reentrant lock: Redisson's RLock.
type mutex struct {
	c *Client
	k *keys
	// acq is the acquisition of Lock and TryLock, made once: a method
	// value made on each call would cost an allocation.
	acq acquisition
}

func newMutex(c *Client, name string) *mutex { return mutexAt(c, newKeys(c.opt.prefix, name)) }

// mutexAt is the reentrant lock with the keys k.
func mutexAt(c *Client, k *keys) *mutex {
	m := &mutex{c: c, k: k}
	m.acq = acquisition{k: m.k, kind: mutexKind{c}, attempt: m.attempt, leaseKey: leaseKey{c, m.k.id}}
	return m
}

func (m *mutex) Name() string { return m.k.name }

func (m *mutex) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.c.acquire(ctx, m.acq, false, opts)
}

func (m *mutex) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.c.acquire(ctx, m.acq, true, opts)
}

func (c *Client) hasWaiters(k *keys) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queueOf(k)
	return q != nil && len(q.waiters) > 0
}

// attempt tries once. It returns a lease, or the holder's remaining TTL, or
// an error.
func (m *mutex) attempt(ctx context.Context, at attemptArgs) (*Lease, time.Duration, error) {
	var sent time.Time
	r, err := m.c.be.acquire(withSent(ctx, &sent), m.k, at.owner, at.lease, 0)
	if err != nil {
		return nil, 0, m.c.transient(fmt.Errorf("lock %q: acquire: %w", m.k.name, err))
	}
	switch r.status {
	case acqAcquired:
		var f time.Duration
		if at.fixed {
			f = at.lease
		}
		l, err := m.c.newLease(ctx, mutexKind{m.c}, m.k, at.owner, r.value, at.lease, f, sent)
		return l, 0, err
	case acqHeld:
		return nil, time.Duration(r.value) * time.Millisecond, nil
	}
	return nil, 0, badReply(m.k, r)
}
