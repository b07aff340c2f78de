package core

import (
	"context"
	"fmt"
	"time"
)

// semBackend is what Semaphore needs from a backend. Its replies follow
// scripts/sem*.lua.
type semBackend interface {
	// semAcquire runs semacquire.lua: a new permit of permits for owner
	// (holds 0), or a hold added to owner's permit, which has holds now.
	semAcquire(ctx context.Context, k *keys, owner string, lease time.Duration, holds, permits int) (acquireReply, error)
	// semRenew runs semrenew.lua: false when owner no longer holds a
	// permit.
	semRenew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error)
	// semRelease runs semrelease.lua, which replies as release.lua. The
	// message it publishes (the owner id) wakes the waiters of every other
	// Client; the releasing Client wakes its own (semKind.release).
	semRelease(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error)
	// semForceUnlock deletes every permit of the semaphore of k and wakes
	// its waiters: 1 if there was one, 0 if not, acqWrongType if k.lock
	// holds another type; an error wrapping ErrBadKey and naming the key if
	// another of the semaphore's keys does.
	semForceUnlock(ctx context.Context, k *keys) (int64, error)
}

// semKeys are the keys of the semaphore named name.
func semKeys(prefix, name string) *keys {
	b := base(prefix, name)
	return &keys{name: name, id: b + ":sem", lock: b + ":sem", token: b + ":token", channel: b + ":sem:channel", holds: b + ":sem:holds"}
}

// semTokens is the key of the hash of a semaphore's permits' fencing
// tokens, by owner id.
func semTokens(k *keys) string { return k.lock + ":tokens" }

// semKey names the key that a script's reply {-2, i} or {-3, i} is about:
// KEYS[i] of semacquire.lua.
func semKey(k *keys, i int64) string {
	switch i {
	case 2:
		return k.holds
	case 3:
		return semTokens(k)
	}
	return k.lock
}

// Semaphore returns the counting semaphore with the given name: at most
// permits owners hold it at once, across every Client and process, in the
// manner of Redisson's RPermitExpirableSemaphore. It limits, for example,
// how many runs of one job go at once across a fleet.
//
// Each Lock or TryLock of a new owner takes one permit and returns it as a
// Lease of its own: its own owner id, its own fencing token (strictly
// greater than every earlier token of the name, whatever the kind of lock),
// and its own renewals: the watchdog renews the permit every lease/3 until
// Unlock.
// A permit that is not renewed (its holder crashed, or lost Redis) comes
// back by itself one lease after its last renewal; its holder learns of it
// first (Done closes, ErrLockLost), as for every kind of lock. WithLease
// takes a permit for a fixed time, without a watchdog. Lock waits for a
// permit until ctx ends (the ctx's error, wrapped) or WithWait passes
// (ErrLocked); TryLock returns ErrLocked at once when every permit is
// taken. Lock on a context that descends from a permit's Lease (same
// Client, same name) adds a hold to that permit instead of taking another;
// the last Unlock gives the permit back and wakes the waiters.
//
// The number of permits is not stored: each acquisition checks the count it
// is given against the permits taken, so every Client must use the same
// count for a name. permits < 1, or a bad name, gives a Locker whose every
// call returns an error wrapping ErrInvalid and sends nothing. A key of the
// semaphore that holds another type gives ErrBadKey naming the key. The
// Locker is safe for concurrent use.
func (c *Client) Semaphore(name string, permits int) Locker {
	if err := validName(name); err != nil {
		return invalidLocker{name: name, err: err}
	}
	if permits < 1 {
		return invalidLocker{name: name, err: fmt.Errorf("lock %q: Semaphore with %d permits: a semaphore needs at least one permit: %w", name, permits, ErrInvalid)}
	}
	return &semaphore{c: c, k: semKeys(c.opt.prefix, name), permits: permits}
}

// semaphore is the counting semaphore: Redisson's RPermitExpirableSemaphore.
type semaphore struct {
	c       *Client
	k       *keys
	permits int
}

func (s *semaphore) Name() string { return s.k.name }

func (s *semaphore) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return s.c.acquire(ctx, acquisition{k: s.k, kind: semKind{s.c}, shared: true, attempt: s.attempt}, false, opts)
}

func (s *semaphore) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return s.c.acquire(ctx, acquisition{k: s.k, kind: semKind{s.c}, shared: true, attempt: s.attempt}, true, opts)
}

// attempt tries once for a new permit. It returns a lease, or how long
// until the earliest permit's deadline, or an error.
func (s *semaphore) attempt(ctx context.Context, at attemptArgs) (*Lease, time.Duration, error) {
	c, k := s.c, s.k
	var sent time.Time
	r, err := c.be.semAcquire(withSent(ctx, &sent), k, at.owner, at.lease, 0, s.permits)
	if err != nil {
		return nil, 0, c.transient(fmt.Errorf("lock %q: acquire: %w", k.name, err))
	}
	switch r.status {
	case acqAcquired:
		var f time.Duration
		if at.fixed {
			f = at.lease
		}
		l, err := c.newLease(ctx, semKind{c}, k, at.owner, r.value, at.lease, f, sent)
		return l, 0, err
	case acqHeld:
		return nil, time.Duration(r.value) * time.Millisecond, nil
	}
	return nil, 0, semBadReply(k, r)
}

// semBadReply is the error for a semacquire.lua reply that is not a lease.
func semBadReply(k *keys, r acquireReply) error {
	switch r.status {
	case acqWrongType:
		return fmt.Errorf("lock %q: key %q holds another type, not part of a semaphore: %w", k.name, semKey(k, r.value), ErrBadKey)
	case acqNoTTL:
		return fmt.Errorf("lock %q: key %q has no TTL, not part of one of our semaphores: %w", k.name, semKey(k, r.value), ErrBadKey)
	}
	return badReply(k, r)
}

// semKind is the kind of a semaphore's permit: semacquire, semrenew and
// semrelease.lua.
type semKind struct{ c *Client }

func (s semKind) reenter(ctx context.Context, k *keys, owner string, lease time.Duration, holds int) (acquireReply, error) {
	r, err := s.c.be.semAcquire(ctx, k, owner, lease, holds, 1)
	if err == nil && (r.status == acqWrongType || r.status == acqNoTTL) {
		// The Lease names the key only for replies about k.lock.
		return r, semBadReply(k, r)
	}
	return r, err
}

func (s semKind) renew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error) {
	return s.c.be.semRenew(ctx, k, owner, lease)
}

// release drops holds of a permit. When it gives the permit back (or may
// have), it wakes this Client's own waiters: the backend does not echo a
// Client's own messages back to it.
func (s semKind) release(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error) {
	n, err := s.c.be.semRelease(ctx, k, owner, holds, drop)
	if err != nil || n == relReleased {
		s.c.wake(k.channel)
	}
	return n, err
}
