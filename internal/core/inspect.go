package core

import (
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"time"
)

// inspectBackend is what Client.Locks needs from a backend.
type inspectBackend interface {
	// locks lists the locks kept under prefix that are held, or waited
	// for in the store, or whose keys hold something that is not a lock
	// (LockInfo.Err). The order is the caller's to set.
	locks(ctx context.Context, prefix string) ([]LockInfo, error)
}

// LockInfo is one lock as Client.Locks finds it in the store: a snapshot,
// taken for operators (`scheduler locks`), that may be out of date as soon
// as it is returned.
type LockInfo struct {
	// Name is the lock's name; for a lock of its own beside the lock named
	// lock (a ledger's WithOwnLock: the scheduler's job that runs on every
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

// The values of LockInfo.Kind and Holder.Mode.
const (
	kindMutex     = "mutex"
	kindRWMutex   = "rwmutex"
	kindSemaphore = "semaphore"

	modeWrite  = "write"
	modeRead   = "read"
	modePermit = "permit"
)

// Locks lists every lock kept under the Client's key prefix (WithKeyPrefix)
// that is held, or waited for in the store (a fair lock's queue, an
// RWMutex's waiting writers), sorted by name, then kind: who holds it, with
// what holds, TTLs and fencing tokens, and how many wait; the own locks
// beside a lock (WithOwnLock) too, as mutexes named lock/own. Ledgers are not
// locks and are not listed (their lock is, while held), nor is a fencing
// token left alone by leases that ended. It is for operators: it reads the
// store and changes nothing there.
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
	if c.isClosed() {
		return nil, fmt.Errorf("lock: Locks: %w", ErrClosed)
	}
	out, err := c.be.locks(ctx, c.opt.prefix)
	if err != nil {
		return nil, fmt.Errorf("lock: Locks: %w", err)
	}
	for i := range out {
		slices.SortFunc(out[i].Holders, compareInspectHolders)
	}
	slices.SortFunc(out, func(a, b LockInfo) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Kind, b.Kind))
	})
	return out, nil
}

func compareInspectHolders(a, b Holder) int {
	rank := func(mode string) int {
		switch mode {
		case modeWrite:
			return 0
		case modeRead:
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(rank(a.Mode), rank(b.Mode)), strings.Compare(a.Owner, b.Owner))
}

// splitLockKey splits a key kept under prefix, prefix:{name}suffix, into the
// lock's name and the suffix.
func splitLockKey(prefix, key string) (name, suffix string, ok bool) {
	rest, ok := strings.CutPrefix(key, prefix+":{")
	if !ok {
		return "", "", false
	}
	name, suffix, ok = strings.Cut(rest, "}")
	if !ok || name == "" {
		return "", "", false
	}
	return name, suffix, true
}

// inspectName is a lock that Locks lists: the lock named lock, or, with
// own, the lock of its own beside it (WithOwnLock), listed as lock/own,
// the name its ledger gives it.
type inspectName struct{ lock, own string }

func (n inspectName) String() string {
	if n.own == "" {
		return n.lock
	}
	return n.lock + "/" + n.own
}

func compareInspectNames(a, b inspectName) int {
	return cmp.Or(strings.Compare(a.lock, b.lock), strings.Compare(a.own, b.own))
}

// mutexKeys are the keys of n's Mutex.
func (n inspectName) mutexKeys(prefix string) *keys {
	if n.own == "" {
		return newKeys(prefix, n.lock)
	}
	return keysAt(n.String(), base(prefix, n.lock)+ownInfix+n.own)
}

// ownInfix comes between a lock's keys' start and the own's id in the keys
// of a lock of its own (ownMutex).
const ownInfix = ":own:"

// lockKeyName returns the lock that key, kept under prefix, makes worth
// reading (a key of lockSuffixes; an own lock's key, queue or timeout),
// and the key's suffix after that lock's start.
func lockKeyName(prefix, key string) (n inspectName, suffix string, ok bool) {
	name, suffix, ok := splitLockKey(prefix, key)
	if !ok {
		return n, "", false
	}
	own, isOwn := strings.CutPrefix(suffix, ownInfix)
	if !isOwn {
		return inspectName{lock: name}, suffix, lockSuffixes[suffix]
	}
	// prefix:{name}:own:<own>, and its :queue and :timeout; not its token,
	// its channel, nor its ledgers (:ledger:<id>...).
	suffix = ""
	for _, s := range []string{":queue", ":timeout"} {
		if o, ok := strings.CutSuffix(own, s); ok {
			own, suffix = o, s
			break
		}
	}
	if own == "" || strings.Contains(own, ":ledger:") || strings.HasSuffix(own, ":token") || strings.HasSuffix(own, ":channel") {
		return n, "", false
	}
	return inspectName{lock: name, own: own}, suffix, true
}

// lockSuffixes are the suffixes (after prefix:{name}) of the keys that make
// a lock worth reading: the token alone does not, and ledgers are not locks.
var lockSuffixes = map[string]bool{
	"": true, ":queue": true, ":timeout": true,
	":rw": true, ":rw:readers": true, ":rw:writers": true,
	":sem": true, ":sem:holds": true, ":sem:tokens": true,
}
