package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// rwLeaveTimeout bounds the call that takes a waiting writer's mark away
// when its wait ends without the lock.
const rwLeaveTimeout = time.Second

// rwBackend is what RWMutex needs from a backend. Its replies follow the
// scripts rw*.lua.
type rwBackend interface {
	// rwAcquire runs rwacquire.lua: a new lease (holds 0) or a re-entry of
	// owner's lease of the write (write) or read lock. A waiting writer
	// leaves a mark that lasts mark (none if 0) and sleeps at most
	// maxSleep; writer is the owner id of the caller's write lease, which
	// may take the read lock too.
	rwAcquire(ctx context.Context, k *keys, owner string, write bool, lease time.Duration, holds int, writer string, mark, maxSleep time.Duration) (acquireReply, error)
	// rwRenew runs rwrenew.lua: false when owner no longer holds its lease.
	rwRenew(ctx context.Context, k *keys, owner string, write bool, lease time.Duration) (bool, error)
	// rwRelease runs rwrelease.lua: the status as release's, and whether
	// it published (a waiter may come in). Like release, it does not wake
	// this Client's own waiters.
	rwRelease(ctx context.Context, k *keys, owner string, write bool, holds, drop int) (int64, bool, error)
	// rwLeave runs rwleave.lua: it takes a waiting writer's mark away, and
	// reports whether it published (readers may come in). It does not
	// wake this Client's own waiters.
	rwLeave(ctx context.Context, k *keys, owner string) (bool, error)
	// rwForceUnlock deletes the read-write lock of k whoever holds it and
	// wakes its waiters: 1 if there was one, 0 if not, acqWrongType if a
	// key holds another type.
	rwForceUnlock(ctx context.Context, k *keys) (int64, error)
}

// acqRWKeyType: the readers' deadlines or the writers' marks of a
// read-write lock are of another type; the reply's value is the key's
// index in KEYS (2 or 3).
const acqRWKeyType = -7

// rwKeys are the keys of the read-write lock named name. Its read and
// write leases have ids of their own (rwReadKeys, rwWriteKeys): each
// re-enters only its own mode, and waits in its own queue of the Client.
func rwKeys(prefix, name string) *keys {
	b := base(prefix, name) + ":rw"
	return &keys{
		name: name, id: b, lock: b, token: base(prefix, name) + ":token", channel: b + ":channel",
		readers: b + ":readers", writerWaiting: b + ":writers",
	}
}

func rwReadKeys(prefix, name string) *keys {
	k := rwKeys(prefix, name)
	k.id += " read"
	return k
}

func rwWriteKeys(prefix, name string) *keys {
	k := rwKeys(prefix, name)
	k.id += " write"
	return k
}

// RWMutex is a read-write lock, in the manner of Redisson's
// RReadWriteLock: many readers (RLocker) or one writer (Locker, or the
// RWMutex itself) hold it at a time. It is a lock of its own, apart from
// the Mutex of the same name. An RWMutex is safe for concurrent use.
//
// Each read Lock of a new owner is a Lease of its own, with its own
// fencing token, holds and watchdog, so that one reader that dies stops
// holding the lock at the end of its own lease while the others keep
// theirs. Both modes are reentrant through the context, as Mutex: a Lock
// on a context that descends from a lease's Context, of the same mode, the
// same RWMutex and the same Client, adds a hold to that lease.
//
// Writers come first: a writer that waits leaves a mark that makes new
// readers wait (readers that hold may still re-enter) until it has taken
// and released the lock, or given up; the mark lapses within
// WithWaiterTTL if its process dies. The holder of the write lock may also
// take the read lock (downgrade), but a holder of a read lock cannot take
// the write lock: Lock returns ErrUpgrade instead of waiting for ever.
//
// As with Mutex, a lease's Context ends when the ctx given to Lock ends,
// but the lock stays held and renewed until Unlock; ForceUnlock of the
// name ends every lease of it (ErrLockLost, at the lease's next renewal)
// and wakes its waiters.
type RWMutex struct {
	c      *Client
	k      *keys // rwKeys
	rk, wk *keys // the read and the write leases' keys
	err    error // a bad name: every call returns it
}

// RWMutex returns the read-write lock with the given name. A bad name
// (empty, or with { or }) gives an RWMutex whose every call returns an
// error wrapping ErrInvalid and sends nothing. See RWMutex for what the
// lock promises, and the package docs ("Read-write locks") for its keys.
func (c *Client) RWMutex(name string) *RWMutex {
	p := c.opt.prefix
	err := validName(name)
	return &RWMutex{c: c, k: rwKeys(p, name), rk: rwReadKeys(p, name), wk: rwWriteKeys(p, name), err: err}
}

// Name is the lock's name, as given to the Client.
func (rw *RWMutex) Name() string { return rw.k.name }

// Lock takes the write lock: it waits until no one else holds the lock,
// ctx ends (the ctx's error, wrapped), WithWait passes (ErrLocked), or the
// Client is closed (ErrClosed). While it waits, new readers wait too. If
// ctx descends from a write lease of this lock from the same Client, it
// adds a hold to that lease and returns it. If ctx carries a read lease of
// this lock from the same Client (and no write lease), it returns
// ErrUpgrade at once and sends nothing: the reader would wait for itself.
// Errors wrap ErrBadKey when a key of the lock holds something else, and
// ErrInvalid for a bad name or option.
func (rw *RWMutex) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return rw.lockWrite(ctx, false, opts)
}

// TryLock makes one attempt at the write lock: ErrLocked if anyone else
// holds the lock, read or write. It leaves no mark, so it never holds
// readers back. Otherwise it behaves as Lock.
func (rw *RWMutex) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return rw.lockWrite(ctx, true, opts)
}

// Locker returns the write lock: the RWMutex itself.
func (rw *RWMutex) Locker() Locker { return rw }

// RLocker returns the read lock. Its Lock waits while another owner holds
// the write lock or a writer waits, until ctx ends (the ctx's error,
// wrapped), WithWait passes (ErrLocked), or the Client is closed
// (ErrClosed); its TryLock makes one attempt (ErrLocked). If ctx descends
// from a read lease of this lock from the same Client, Lock adds a hold to
// that lease, even while a writer waits. If ctx carries the write lease of
// this lock from the same Client, Lock takes a new read lease at once,
// which may outlive the write lease (a downgrade: Unlock the write lease,
// and the read lease keeps the lock, shared with other readers). The read
// lease's Context ends with the ctx given to Lock, so pass
// context.WithoutCancel(writeLease.Context()) to work on under it after
// the write lease is released. A goroutine that holds a read lease must
// re-enter it (Lock on its Context) rather than take a new one: a new read
// lease waits behind a waiting writer, which waits for the first lease.
// The Locker is safe for concurrent use.
func (rw *RWMutex) RLocker() Locker {
	if rw.err != nil {
		return invalidLocker{name: rw.k.name, err: rw.err}
	}
	return rLocker{rw}
}

// rLocker is the read lock of an RWMutex.
type rLocker struct{ rw *RWMutex }

func (r rLocker) Name() string { return r.rw.k.name }

func (r rLocker) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return r.rw.lockRead(ctx, false, opts)
}

func (r rLocker) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return r.rw.lockRead(ctx, true, opts)
}

func (rw *RWMutex) lockRead(ctx context.Context, try bool, opts []AcquireOption) (*Lease, error) {
	c := rw.c
	attempt := func(ctx context.Context, at attemptArgs) (*Lease, time.Duration, error) {
		writer := ""
		if w, ok := ctx.Value(leaseKey{c, rw.wk.id}).(*Lease); ok {
			writer = w.owner
		}
		l, sleep, _, err := rw.attempt(ctx, rw.rk, false, at.owner, at.lease, at.fixed, writer, false)
		return l, sleep, err
	}
	a := acquisition{k: rw.rk, kind: rwKind{c: c}, shared: true, attempt: attempt}
	if w, ok := ctx.Value(leaseKey{c, rw.wk.id}).(*Lease); ok && !try && w.Err() == nil {
		// The writer's read lock is granted at once: it must not queue
		// behind this Client's readers, which wait for that very writer.
		// Should the write lease be lost meanwhile, wait as any reader.
		if l, err := c.acquire(ctx, a, true, opts); !errors.Is(err, ErrLocked) && !lostReply(err) {
			return l, err
		}
	}
	return c.acquire(ctx, a, try, opts)
}

func (rw *RWMutex) lockWrite(ctx context.Context, try bool, opts []AcquireOption) (*Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	c := rw.c
	if w, ok := ctx.Value(leaseKey{c, rw.wk.id}).(*Lease); !ok || w.Err() != nil {
		if _, ok := ctx.Value(leaseKey{c, rw.rk.id}).(*Lease); ok {
			return nil, fmt.Errorf("lock %q: %w", rw.k.name, ErrUpgrade)
		}
	}
	// A writer that waits marks the lock; one attempt (TryLock, WithWait(0))
	// leaves no mark.
	mark := !try
	if o, err := buildAcquireOptions(rw.k.name, opts); err == nil && o.hasWait && o.wait == 0 {
		mark = false
	}
	// The attempts run on this goroutine, before acquire returns.
	var (
		owner  string
		marked bool
	)
	attempt := func(ctx context.Context, at attemptArgs) (*Lease, time.Duration, error) {
		l, sleep, m, err := rw.attempt(ctx, rw.wk, true, at.owner, at.lease, at.fixed, "", mark)
		owner, marked = at.owner, marked || m
		return l, sleep, err
	}
	l, err := c.acquire(ctx, acquisition{k: rw.wk, kind: rwKind{c: c, write: true}, attempt: attempt}, try, opts)
	if err != nil && marked {
		rw.leave(owner)
	}
	return l, err
}

// attempt tries once for a new lease of owner: a lease, or how long to
// sleep at most before the next try, or an error; and whether the attempt
// may have left a writer's mark (it asked for one and did not acquire).
func (rw *RWMutex) attempt(ctx context.Context, k *keys, write bool, owner string, lease time.Duration, fixed bool, writer string, mark bool) (*Lease, time.Duration, bool, error) {
	c := rw.c
	kd := rwKind{c: c, write: write}
	var markTTL time.Duration
	if mark {
		markTTL = c.opt.waiterTTL
	}
	var sent time.Time
	r, err := c.be.rwAcquire(withSent(ctx, &sent), k, owner, write, lease, 0, writer, markTTL, rwMaxSleep(c.opt.waiterTTL))
	if err != nil {
		return nil, 0, mark, c.transient(fmt.Errorf("lock %q: acquire: %w", k.name, err))
	}
	switch r.status {
	case acqAcquired:
		var fx time.Duration
		if fixed {
			fx = lease
		}
		l, err := c.newLease(ctx, kd, k, owner, r.value, lease, fx, sent)
		return l, 0, false, err
	case acqHeld:
		return nil, time.Duration(r.value) * time.Millisecond, mark, nil
	}
	return nil, 0, false, rwBadReply(k, r)
}

// rwMaxSleep is how long a waiting writer sleeps at most: it renews its
// mark at each attempt, three times per waiter TTL.
func rwMaxSleep(waiterTTL time.Duration) time.Duration {
	return max(waiterTTL/3, time.Millisecond)
}

// rwBadReply is the error for a reply of rwacquire.lua that is not a lease.
func rwBadReply(k *keys, r acquireReply) error {
	if r.status == acqRWKeyType {
		key := k.readers
		if r.value == 3 {
			key = k.writerWaiting
		}
		return fmt.Errorf("lock %q: key %q holds another type, not a part of a read-write lock: %w", k.name, key, ErrBadKey)
	}
	return badReply(k, r)
}

// leave takes owner's mark away, on a context of its own: the caller's may
// have ended. If that lets readers in, this Client's own try again.
func (rw *RWMutex) leave(owner string) {
	c := rw.c
	ctx, cancel := context.WithTimeout(context.Background(), rwLeaveTimeout)
	defer cancel()
	woke, err := c.be.rwLeave(ctx, rw.wk, owner)
	switch {
	case err != nil:
		c.log.Warn("taking a waiting writer's mark away failed; it lapses within the waiter TTL",
			"lock", rw.k.name, "owner", owner, "error", err)
	case woke:
		c.wake(rw.k.channel)
	}
}

// rwKind is the kind of a read or a write lease of an RWMutex.
type rwKind struct {
	c     *Client
	write bool
}

func (r rwKind) reenter(ctx context.Context, k *keys, owner string, lease time.Duration, holds int) (acquireReply, error) {
	rep, err := r.c.be.rwAcquire(ctx, k, owner, r.write, lease, holds, "", 0, rwMaxSleep(r.c.opt.waiterTTL))
	if err == nil && rep.status == acqRWKeyType {
		return rep, rwBadReply(k, rep)
	}
	return rep, err
}

func (r rwKind) renew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error) {
	return r.c.be.rwRenew(ctx, k, owner, r.write, lease)
}

// release drops holds; when that lets a waiter in (or may have), this
// Client's own waiters try again at once: the backend does not echo this
// Client's messages back to it.
func (r rwKind) release(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error) {
	n, published, err := r.c.be.rwRelease(ctx, k, owner, r.write, holds, drop)
	if err != nil || published {
		r.c.wake(k.channel)
	}
	return n, err
}
