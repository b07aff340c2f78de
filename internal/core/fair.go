package core

import (
	"context"
	"fmt"
	"time"
)

// leaveTimeout bounds the call that takes a waiter out of a fair lock's
// queue when its wait ends.
const leaveTimeout = time.Second

// fairBackend is what the fair lock needs from a backend, besides the
// reentrant lock's acquire (re-entry) and renew.
type fairBackend interface {
	// fairAcquire runs fairacquire.lua.
	fairAcquire(ctx context.Context, k *keys, owner string, lease, place time.Duration, enqueue bool) (fairReply, error)
	// fairRelease runs fairrelease.lua: the status as release's, and the
	// waiter it woke. Like release, it does not wake this Client's waiters.
	fairRelease(ctx context.Context, k *keys, owner string, holds, drop int) (int64, string, error)
	// fairLeave runs fairleave.lua: the waiter it woke, if any.
	fairLeave(ctx context.Context, k *keys, owner string) (string, error)
	// subscribeIfReady is subscribe if k's subscription is in place and
	// confirmed now; else it does nothing and returns nil.
	subscribeIfReady(k *keys) <-chan struct{}
}

type fairReply struct {
	status int64 // 1 acquired, 0 waiting, or acquire.lua's errors
	value  int64 // token, or the longest sleep in ms
	pos    int64 // place in the queue: 0 is the head; -1 not queued
}

// acqQueueType: the queue or the deadlines of a fair lock are of another
// type (fairacquire.lua).
const acqQueueType = -6

// A fairWaiter is a goroutine waiting for a fair lock: the unlock that
// makes it the next owner is addressed to it by owner id.
type fairWaiter struct {
	k      *keys
	wake   chan struct{} // buffer of one
	queued bool          // it has its place in the lock's queue
}

// FairMutex returns the reentrant lock with the given name whose waiters
// acquire it first come, first served, across every Client and process, in
// the manner of Redisson's RFairLock. A bad name gives a Locker whose every
// call returns ErrInvalid and sends nothing.
//
// It shares its lock with Mutex(name): the two exclude each other, and a
// lease of one can be re-entered through the other. Order holds only among
// FairMutex waiters; a Mutex of the same name may take the lock ahead of
// the queue. Use one kind per name.
//
// A waiter keeps its place in the queue (prefix:{name}:queue, with its
// deadline in prefix:{name}:timeout, in Redis time) by renewing it every
// WithWaiterTTL/3. A waiter that dies loses its place within WithWaiterTTL,
// and one whose ctx ends or whose WithWait passes leaves at once, so no
// dead waiter stalls the ones behind it for long. The last Unlock wakes
// only the head of the queue (a message addressed to it). TryLock makes
// one attempt and never queues: it acquires only when the lock is free and
// no one waits.
func (c *Client) FairMutex(name string) Locker {
	if err := validName(name); err != nil {
		return invalidLocker{name: name, err: err}
	}
	return &fairMutex{c: c, k: newKeys(c.opt.prefix, name)}
}

type fairMutex struct {
	c *Client
	k *keys
}

func (f *fairMutex) Name() string { return f.k.name }

func (f *fairMutex) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return f.c.acquire(ctx, f.acquisition(), false, opts)
}

func (f *fairMutex) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return f.c.acquire(ctx, f.acquisition(), true, opts)
}

// acquisition: a TryLock's attempt takes no place in the queue; a
// waiter's takes one and keeps it.
func (f *fairMutex) acquisition() acquisition {
	return acquisition{k: f.k, kind: fairKind{f.c}, fair: true, attempt: f.attempt}
}

// fairKind: re-entry and renewal as the reentrant lock; the last release
// wakes the head of the queue.
type fairKind struct{ c *Client }

func (f fairKind) reenter(ctx context.Context, k *keys, owner string, lease time.Duration, holds int) (acquireReply, error) {
	return f.c.be.acquire(ctx, k, owner, lease, holds)
}

func (f fairKind) renew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error) {
	return f.c.be.renew(ctx, k, owner, lease)
}

func (f fairKind) release(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error) {
	n, head, err := f.c.be.fairRelease(ctx, k, owner, holds, drop)
	if err != nil {
		f.c.wake(k.channel) // it may have released: our own waiters try
	} else if head != "" {
		f.c.wakeFair(head)
	}
	return n, err
}

// A fairQueue is the wait of the fair kinds: a place in the lock's queue in
// the store, which every waiter of every Client keeps by attempting (the
// store answers each in order), so the turn comes at once. The first
// attempt takes the place; the waiter tries again when an unlock is
// addressed to it (by owner id), when its subscription is confirmed or
// re-established, when the holder's TTL or the place ahead of it may have
// run out, and at least every WithWaiterTTL/3 to keep its place (the
// attempt's sleep). A waiter that gives up leaves the queue at once.
type fairQueue struct {
	c     *Client
	k     *keys
	owner string

	fw         *fairWaiter
	subscribed bool
	ready      <-chan struct{}
}

// begin registers the waiter so that unlocks addressed to it reach it. An
// unlock addressed to it reaches it only through a confirmed subscription:
// if there is one now, the first attempt needs no second; else join
// subscribes, and the waiter tries again once it is confirmed.
func (f *fairQueue) begin() (bool, error) {
	fw, err := f.c.addFair(f.k, f.owner)
	if err != nil {
		return false, err
	}
	f.fw = fw
	f.subscribed = f.c.be.subscribeIfReady(f.k) != nil
	return true, nil
}

var closedTurn = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

func (f *fairQueue) join() (<-chan struct{}, error) {
	f.c.setQueued(f.fw)
	if !f.subscribed {
		f.ready, f.subscribed = f.c.be.subscribe(f.k), true
	}
	return closedTurn, nil
}

func (f *fairQueue) onTurn() (wake, ready <-chan struct{}, now bool, sleep time.Duration) {
	return f.fw.wake, f.ready, false, 0
}

func (f *fairQueue) sawReady() {}

// end leaves the queue unless the waiter acquired (the script took it out
// then); the place of a first attempt that failed to reach the store may
// have been taken too.
func (f *fairQueue) end(acquired bool) {
	if !acquired {
		f.c.leaveFair(f.k, f.owner)
	}
	f.c.removeFair(f.owner)
	if f.subscribed {
		f.c.be.unsubscribe(f.k)
	}
}

// leaveFair takes owner's place out of k's queue, on a context of its own:
// the caller's may have ended.
func (c *Client) leaveFair(k *keys, owner string) {
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	head, err := c.be.fairLeave(ctx, k, owner)
	switch {
	case err != nil:
		c.log.Warn("leaving a fair lock's queue failed; the place expires within the waiter TTL",
			"lock", k.name, "owner", owner, "error", err)
	case head != "":
		c.wakeFair(head)
	}
}

// attempt tries once: a lease, or how long to sleep at most before the
// next try, or an error.
func (f *fairMutex) attempt(ctx context.Context, at attemptArgs) (*Lease, time.Duration, error) {
	c, k := f.c, f.k
	owner, lease := at.owner, at.lease
	var sent time.Time
	r, err := c.be.fairAcquire(withSent(ctx, &sent), k, owner, lease, c.opt.waiterTTL, at.queue)
	if err != nil {
		return nil, 0, c.transient(fmt.Errorf("lock %q: acquire: %w", k.name, err))
	}
	switch r.status {
	case acqAcquired:
		var fx time.Duration
		if at.fixed {
			fx = lease
		}
		l, err := c.newLease(ctx, fairKind{c}, k, owner, r.value, lease, fx, sent)
		return l, 0, err
	case acqHeld:
		return nil, time.Duration(r.value) * time.Millisecond, nil
	case acqQueueType:
		return nil, 0, fmt.Errorf("lock %q: key %q or %q holds another type, not a fair lock's queue: %w", k.name, k.queue, k.timeout, ErrBadKey)
	}
	return nil, 0, badReply(k, acquireReply{status: r.status, value: r.value})
}

// addFair registers a fair waiter so that unlocks addressed to owner reach
// it.
func (c *Client) addFair(k *keys, owner string) (*fairWaiter, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	w := &fairWaiter{k: k, wake: make(chan struct{}, 1)}
	c.fair[owner] = w
	return w, nil
}

func (c *Client) setQueued(w *fairWaiter) {
	c.mu.Lock()
	w.queued = true
	c.mu.Unlock()
}

func (c *Client) removeFair(owner string) {
	c.mu.Lock()
	delete(c.fair, owner)
	c.mu.Unlock()
}

// wakeFair wakes the fair waiter with the given owner id, if it is one of
// this Client's.
func (c *Client) wakeFair(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.fair[owner]; w != nil {
		poke(w.wake)
	}
}
