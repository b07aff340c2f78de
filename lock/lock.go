package lock

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/internal/core"
)

// This package is the lock family's face: its types hold the engine's
// (internal/core: the acquisition path, leases and watchdogs, the two
// backends and their scripts), which the fleet package shares.

// Sentinel errors. Match them with errors.Is: the errors returned carry the
// lock's name and, where there is one, the key at fault.
var (
	// ErrLocked: the lock is held by another owner and the wait (TryLock,
	// or WithWait) is over.
	ErrLocked = core.ErrLocked
	// ErrNotHeld: Unlock of a lease that no longer holds the lock.
	ErrNotHeld = core.ErrNotHeld
	// ErrLockLost: the lease ended without Unlock: another owner or nobody
	// holds the lock now, its fixed lease time passed, or no renewal
	// succeeded in time.
	ErrLockLost = core.ErrLockLost
	// ErrReleased: the lease ended by Unlock or Client.Close.
	ErrReleased = core.ErrReleased
	// ErrClosed: the Client is closed.
	ErrClosed = core.ErrClosed
	// ErrInvalid: a bad argument or option; nothing was sent to Redis.
	ErrInvalid = core.ErrInvalid
	// ErrBadKey: a key where the lock lives holds something that is not a
	// lock (another type, or a hash without a TTL). The key is left as it is.
	ErrBadKey = core.ErrBadKey
	// ErrUpgrade: the write lock of an RWMutex was asked for on a context
	// that holds its read lock; waiting would deadlock. Nothing was sent.
	ErrUpgrade = core.ErrUpgrade
	// ErrNoAck: an acquisition was not acknowledged by enough replicas in
	// time (WithReplicaAck, WithAOFAck); it was undone.
	ErrNoAck = core.ErrNoAck
)

// Client hands out locks kept in one backend. Create it with New (Redis) or
// NewMemory (this process only), and Close it to release every lease it
// still holds. A Client is safe for concurrent use; one per process is the
// usual shape, shared by all its goroutines (and by the scheduler built on
// it).
type Client struct {
	// engine hands the Client's engine to the packages of this module
	// built on it (fleet.New); as an embedded field of an unexported name,
	// its one method is no part of this package's documented API.
	engine
	c *core.Client
}

type engine = core.Ref

func wrapClient(c *core.Client, err error) (*Client, error) {
	if err != nil {
		return nil, err
	}
	return &Client{engine: core.Ref{C: c}, c: c}, nil
}

// New returns a Client that keeps locks in Redis. rdb may be a standalone,
// Sentinel (failover) or Cluster client; the Client does not close it.
//
// Give rdb ContextTimeoutEnabled: true so that a ctx deadline also bounds a
// command to a server that has stopped answering; without it go-redis waits
// for its ReadTimeout. Renewal deadlines are kept either way.
//
// New sends nothing to Redis. It returns ErrInvalid for bad options.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	return wrapClient(core.New(rdb, opts...))
}

// NewMemory returns a Client on a new MemoryStore of its own: locks that
// exclude goroutines of this process only, with every other promise of the
// Redis backend (reentrancy, watchdog, fixed leases, loss detection, fencing
// tokens, telemetry). It returns ErrInvalid for bad options.
func NewMemory(opts ...Option) (*Client, error) {
	return wrapClient(core.NewMemory(opts...))
}

// MemoryStore keeps locks in this process's memory, with the semantics of
// the Redis scripts: the same holds, TTLs, fencing tokens and unlock
// notifications, without a server. Clients made from one store contend with
// each other as Clients of one Redis server would; nothing crosses the
// process. A MemoryStore is safe for concurrent use.
type MemoryStore struct{ s *core.MemoryStore }

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{core.NewMemoryStore()} }

// NewClient returns a Client on the store. It returns ErrInvalid for bad
// options.
func (s *MemoryStore) NewClient(opts ...Option) (*Client, error) {
	return wrapClient(s.s.NewClient(opts...))
}

// ID is the Client's id, as set by WithClientID.
func (c *Client) ID() string { return c.c.ID() }

// Waiting is how many goroutines of this Client wait in Lock for a lock
// with the given name now, of any kind. A waiter for a fair lock counts
// once it has its place in the lock's queue.
func (c *Client) Waiting(name string) int { return c.c.Waiting(name) }

// Mutex returns the reentrant lock with the given name, in the manner of
// Redisson's RLock. A bad name (empty, or with { or }) gives a Locker whose
// every call returns ErrInvalid and sends nothing.
func (c *Client) Mutex(name string) Locker { return locker{c.c.Mutex(name)} }

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
func (c *Client) FairMutex(name string) Locker { return locker{c.c.FairMutex(name)} }

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
	return locker{c.c.Semaphore(name, permits)}
}

// RWMutex returns the read-write lock with the given name. A bad name
// (empty, or with { or }) gives an RWMutex whose every call returns an
// error wrapping ErrInvalid and sends nothing. See RWMutex for what the
// lock promises, and the package docs ("Read-write locks") for its keys.
func (c *Client) RWMutex(name string) *RWMutex { return &RWMutex{c.c.RWMutex(name)} }

// ForceUnlock deletes the lock with the given name whoever holds it, of
// every kind (Mutex and FairMutex, RWMutex, Semaphore), and wakes its
// waiters; the holder learns it lost the lock at its next renewal.
// It reports whether there was a lock. It is for operators (Redisson's
// forceUnlock); it returns ErrBadKey if the key is not a lock, and leaves
// such a key as it is.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	return c.c.ForceUnlock(ctx, name)
}

// Ping checks that the store answers: a PING to Redis (on a Cluster, to
// every node), nothing for the memory backend. ctx bounds it. It returns
// ErrClosed after Close. It is safe for concurrent use.
func (c *Client) Ping(ctx context.Context) error { return c.c.Ping(ctx) }

// Close releases every lease the Client still holds (each lease's context
// is cancelled with ErrReleased and ErrClosed), makes waiting Lock calls
// return ErrClosed, stops every watchdog and closes the Pub/Sub connection.
// It returns once all of that is done, or the first error from releasing.
// It does not close the redis client given to New. A second Close returns
// nil.
func (c *Client) Close() error { return c.c.Close() }

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

// locker is a Locker of the engine's.
type locker struct{ l core.Locker }

func (x locker) Name() string { return x.l.Name() }

func (x locker) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return wrapLease(x.l.Lock(ctx, opts...))
}

func (x locker) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return wrapLease(x.l.TryLock(ctx, opts...))
}

// foreign is a Locker that is not this package's, as a part of a Multi.
type foreign struct{ l Locker }

func (x foreign) Name() string { return x.l.Name() }

func (x foreign) Lock(ctx context.Context, opts ...core.AcquireOption) (*core.Lease, error) {
	return unwrapLease(x.l.Lock(ctx, opts...))
}

func (x foreign) TryLock(ctx context.Context, opts ...core.AcquireOption) (*core.Lease, error) {
	return unwrapLease(x.l.TryLock(ctx, opts...))
}

func unwrapLease(l *Lease, err error) (*core.Lease, error) {
	if l == nil {
		return nil, err
	}
	return l.l, err
}

func engineLockers(lockers []Locker) []core.Locker {
	out := make([]core.Locker, len(lockers))
	for i, l := range lockers {
		switch l := l.(type) {
		case nil:
		case locker:
			out[i] = l.l
		default:
			out[i] = foreign{l}
		}
	}
	return out
}

// Multi returns a Locker that holds every one of lockers at once, or none,
// in the manner of Redisson's RedissonMultiLock. The lockers may be of any
// kind, on any Clients and stores.
//
// Lock takes the parts one by one in an order that every process computes
// the same way (by lock name, then kind, then store), so two Multi locks
// over the same locks, given in different orders, never deadlock. If a part
// cannot be had (its wait or the ctx ends, or an error), Lock releases the
// parts it took and returns that error. WithWait bounds the whole Lock;
// WithLease applies to each part. TryLock tries each part once.
//
// The Lease it returns holds the parts' leases (Lease.Parts). Its Token is
// the first locker's; its Context ends, and Done closes with ErrLockLost,
// as soon as any part is lost. Unlock releases every part. Lock on a
// context of a Multi lease over the same lockers adds a hold to each part.
// No lockers, or a nil one, gives a Locker whose every call returns
// ErrInvalid. It is safe for concurrent use.
func Multi(lockers ...Locker) Locker { return locker{core.Multi(engineLockers(lockers)...)} }

// RedLock returns a Locker that runs the Redlock algorithm over lockers of
// one name on independent Redis servers (three or more, one Client each):
// it holds the lock when it holds a majority of them.
//
// Lock tries every server at once, each attempt bounded by a short timeout
// (redlockTry, 200ms). It succeeds when a majority acquired and time is
// left of the shortest lease after the time spent and an allowance for
// clock drift (1% of the lease plus 2ms); else it releases what it took on
// every server, pauses for a random 10–50ms, and tries again, until
// WithWait passes (ErrLocked) or ctx ends. TryLock makes one such round.
//
// The Lease holds the parts it acquired (Lease.Parts), each renewed by its
// own watchdog unless WithLease is given. It is lost when fewer than a
// majority of its parts still hold, or, with WithLease, when the validity
// computed at acquisition runs out. Its Token is the largest of its parts':
// tokens of independent servers are comparable only as far as their clocks
// agree, so RedLock gives no strict fencing. See the README's "How safe is
// it?" for when to use it, and why Redisson deprecated it.
//
// Fewer than three lockers, or a nil one, gives a Locker whose every call
// returns ErrInvalid. It is safe for concurrent use.
func RedLock(lockers ...Locker) Locker { return locker{core.RedLock(engineLockers(lockers)...)} }

// A Lease is one owner's hold on a lock. While it holds the lock, a lease
// taken without WithLease is renewed in the background every lease/3 (the
// watchdog), counted from when the last successful request was sent, until
// Unlock, Client.Close, or the lock is lost.
//
// Lock loss is never silent: when a renewal finds the lock gone or another
// owner's, or when no renewal has succeeded by the local deadline (the last
// successful renewal's send time plus 9/10 of the lease, on the monotonic
// clock), Done is closed and Context is cancelled with cause ErrLockLost —
// before the lease could have expired in Redis. A fixed lease (WithLease)
// ends the same way at 9/10 of its time.
//
// A Lease is safe for concurrent use.
type Lease struct{ l *core.Lease }

// wrapLease returns the Lease of l: the same *Lease for every hold of one
// lease, so that a re-entry returns the lease it entered.
func wrapLease(l *core.Lease, err error) (*Lease, error) {
	if l == nil {
		return nil, err
	}
	return l.Front(func() any { return &Lease{l} }).(*Lease), err
}

// Name is the lock's name.
func (l *Lease) Name() string { return l.l.Name() }

// Owner is the owner id under which the lease holds the lock in Redis.
func (l *Lease) Owner() string { return l.l.Owner() }

// Token is the fencing token: the same for every hold of this lease, and
// strictly greater than the token of every earlier lease of this lock name,
// even across a restart of Redis that lost its data (it derives from the
// server's clock). Pass it along with writes so that a store can refuse a
// late writer whose lease has ended.
func (l *Lease) Token() int64 { return l.l.Token() }

// Context returns a context that ends when the ctx given to Lock ends, when
// the lock is lost (cause ErrLockLost), or when the lease is released (cause
// ErrReleased). Pass it to the work done under the lock, and to Lock calls
// that should re-enter this lease.
func (l *Lease) Context() context.Context { return l.l.Context() }

// Done is closed when the lease no longer holds the lock: released or lost.
// It does not close when the ctx given to Lock ends; the lock stays held
// until Unlock.
func (l *Lease) Done() <-chan struct{} { return l.l.Done() }

// Err is nil while the lease holds the lock; then an error that wraps
// ErrLockLost or ErrReleased. It checks the local deadline itself, so it
// never says nil past it even when the deadline's timer fires late.
func (l *Lease) Err() error { return l.l.Err() }

// Unlock drops one hold; the last one stops the watchdog (before anything
// is sent), deletes the lock and wakes its waiters. Call it on a context
// that is still live, such as context.WithoutCancel(ctx) with a timeout, so
// that a lease whose work was cancelled still frees the lock. ctx bounds
// the call. If the last hold's Unlock fails (ctx or network), the lease
// ends all the same and the lock expires in Redis within one lease time;
// a failed Unlock of an inner hold changes nothing. Unlock of a lease that
// no longer holds the lock returns an error wrapping ErrNotHeld (and
// ErrLockLost or ErrReleased) and touches no other owner's lock.
func (l *Lease) Unlock(ctx context.Context) error { return l.l.Unlock(ctx) }

// Parts returns the leases a Multi or RedLock lease is made of (for
// RedLock, those of the servers it acquired), or nil for any other lease.
// Watch the composite lease's Context rather than the parts': a RedLock
// part's own Context ends with the attempt that took it.
func (l *Lease) Parts() []*Lease {
	parts := l.l.Parts()
	if parts == nil {
		return nil
	}
	out := make([]*Lease, len(parts))
	for i, p := range parts {
		out[i], _ = wrapLease(p, nil)
	}
	return out
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
type RWMutex struct{ rw *core.RWMutex }

// Name is the lock's name, as given to the Client.
func (rw *RWMutex) Name() string { return rw.rw.Name() }

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
	return wrapLease(rw.rw.Lock(ctx, opts...))
}

// TryLock makes one attempt at the write lock: ErrLocked if anyone else
// holds the lock, read or write. It leaves no mark, so it never holds
// readers back. Otherwise it behaves as Lock.
func (rw *RWMutex) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return wrapLease(rw.rw.TryLock(ctx, opts...))
}

// Locker returns the write lock: Lock and TryLock of the RWMutex.
func (rw *RWMutex) Locker() Locker { return locker{rw.rw.Locker()} }

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
func (rw *RWMutex) RLocker() Locker { return locker{rw.rw.RLocker()} }

// LockInfo is one lock as Client.Locks finds it in the store: a snapshot,
// taken for operators (`scheduler locks`), that may be out of date as soon
// as it is returned.
type LockInfo struct {
	// Name is the lock's name; for a lock of its own beside the lock named
	// lock (fleet.WithOwnLock: the scheduler's job that runs on every
	// replica has one per replica), lock/own, as its ledger names it.
	Name string
	// Kind is "mutex" (a Mutex or a FairMutex, which share their lock),
	// "rwmutex" or "semaphore".
	Kind string
	// Holders are those who hold the lock now, in the order write, read,
	// permit, then by owner id: one for a Mutex or a write lock, several
	// for read locks and permits. Empty while the lock is only waited for.
	Holders []Holder
	// TTL is how long the lock lasts in the store unless renewed: its
	// longest lease's (a Mutex's key's). 0 if the lock is not held.
	TTL time.Duration
	// Token is the fencing token of the current or last lease of a lock of
	// this name, of any kind (prefix:{name}:token); 0 if there is none.
	Token int64
	// Waiters are the waiters queued in the store: the places in a fair
	// lock's queue, and the marks of an RWMutex's waiting writers. Other
	// waiters wait in their own process, where the store does not see
	// them (Client.Waiting counts them there).
	Waiters int
	// Err, if not nil, wraps ErrBadKey and names each key of the lock that
	// holds something that is not part of a lock of this kind (another
	// type, or no TTL), its fencing token key included; the fields above
	// say what could be read. The memory backend never sets it.
	Err error
}

// Holder is one holder of a lock, as Client.Locks finds it.
type Holder struct {
	// Owner is the owner id of the lease (Lease.Owner): the holding
	// Client's id, an instance id and a sequence number.
	Owner string
	// Holds is how many times the lease is held (re-entries count).
	Holds int
	// Mode is "write" for the write lock of an RWMutex, "read" for a read
	// lock, "permit" for a Semaphore's permit, and "" for a Mutex.
	Mode string
	// Token is the lease's fencing token where the kind keeps one per
	// lease (RWMutex, Semaphore); else 0, and LockInfo.Token is the
	// Mutex's.
	Token int64
	// TTL is how long the lease lasts unless renewed: its own deadline for
	// RWMutex and Semaphore leases, the lock's TTL for a Mutex.
	TTL time.Duration
}

// Locks lists every lock kept under the Client's key prefix (WithKeyPrefix)
// that is held, or waited for in the store (a fair lock's queue, an
// RWMutex's waiting writers), sorted by name, then kind: who holds it, with
// what holds, TTLs and fencing tokens, and how many wait; the locks of
// their own beside a lock (fleet.WithOwnLock) too, as mutexes named
// lock/own. A fencing token left alone by leases that ended is not
// listed, nor are other keys under the prefix (ledgers among them). It is
// for operators: it reads the store and changes nothing there.
//
// On Redis it walks the keyspace with SCAN (never KEYS), on every primary
// of a Cluster, and reads each lock name with one script that only reads
// (its keys share a slot), sent in pipelines: each lock is read at one
// instant, but a busy store changes between two locks, and a lock taken or
// released during the walk may or may not be listed. A key of the
// wrong type does not fail the listing: its lock is listed with Err set
// (wrapping ErrBadKey).
//
// It returns ctx's error (wrapped) if ctx ends first, an error wrapping
// ErrClosed after Close, or the store's error. It is safe for concurrent
// use.
func (c *Client) Locks(ctx context.Context) ([]LockInfo, error) {
	in, err := c.c.Locks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]LockInfo, len(in))
	for i, li := range in {
		out[i] = LockInfo{Name: li.Name, Kind: li.Kind, TTL: li.TTL, Token: li.Token, Waiters: li.Waiters, Err: li.Err}
		for _, h := range li.Holders {
			out[i].Holders = append(out[i].Holders, Holder(h))
		}
	}
	return out, nil
}
