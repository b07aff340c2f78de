package core

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MemoryStore keeps locks in this process's memory, with the semantics of
// the Redis scripts: the same holds, TTLs, fencing tokens and unlock
// notifications, without a server. Clients made from one store contend with
// each other as Clients of one Redis server would; nothing crosses the
// process. A MemoryStore is safe for concurrent use.
type MemoryStore struct {
	mu     sync.Mutex
	locks  map[string]*memLock // by lock key
	tokens map[string]int64    // fencing token counters by token key
	subs   map[string]map[*memoryBackend]int
	ledger map[string]*memLedger            // by ledger key
	hists  map[string]*memHistory           // ledgers' histories, by history key
	queues map[string]*memQueue             // fair locks' queues, by queue key
	events map[string]map[*handler]struct{} // Subscribe, by channel
	sems   map[string]memSem                // semaphores' permits, by permits key
	rw     map[string]*memRW                // read-write locks, by lock key
	groups map[string]map[string]time.Time  // groups' members and their deadlines (Heartbeat), by key
	freeze map[string]*memFreezes           // the fleet's freezes (AddFreeze), by key
	reps   map[string]map[string]memReplica // replicas' reports (ReportReplica), by key

	backfill map[string]*memBackfills // jobs' backfills (Ledger.AddBackfill), by key; made at first use

	released map[string]time.Time // release marks (release.lua), by key, until they expire
}

type memLock struct {
	owner   string
	holds   int
	token   int64
	expires time.Time // on the monotonic clock
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		locks:  make(map[string]*memLock),
		tokens: make(map[string]int64),
		subs:   make(map[string]map[*memoryBackend]int),
		ledger: make(map[string]*memLedger),
		hists:  make(map[string]*memHistory),
		queues: make(map[string]*memQueue),
		events: make(map[string]map[*handler]struct{}),
		sems:   make(map[string]memSem),
		rw:     make(map[string]*memRW),
		groups: make(map[string]map[string]time.Time),
		freeze: make(map[string]*memFreezes),
		reps:   make(map[string]map[string]memReplica),

		released: make(map[string]time.Time),
	}
}

// markReleased records, for releasedTTL, that owner released its lease of
// k, as the release scripts' mark does, so that a repeat of the release
// answers released. s.mu is held.
func (s *MemoryStore) markReleased(k *keys, owner string, now time.Time) {
	if len(s.released) >= 1024 {
		for key, until := range s.released {
			if !now.Before(until) {
				delete(s.released, key)
			}
		}
	}
	s.released[k.released(owner)] = now.Add(releasedTTL)
}

// wasReleased reports whether owner's release mark of k is live. s.mu is
// held.
func (s *MemoryStore) wasReleased(k *keys, owner string, now time.Time) bool {
	until, ok := s.released[k.released(owner)]
	return ok && now.Before(until)
}

// NewMemory returns a Client on a new MemoryStore of its own: locks that
// exclude goroutines of this process only, with every other promise of the
// Redis backend (reentrancy, watchdog, fixed leases, loss detection, fencing
// tokens, telemetry). It returns ErrInvalid for bad options.
func NewMemory(opts ...Option) (*Client, error) {
	return NewMemoryStore().NewClient(opts...)
}

// NewClient returns a Client on the store. It returns ErrInvalid for bad
// options.
func (s *MemoryStore) NewClient(opts ...Option) (*Client, error) {
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.ack != nil {
		return nil, fmt.Errorf("lock: WithReplicaAck and WithAOFAck need Redis replicas; the memory backend has none: %w", ErrInvalid)
	}
	c := newClient(o)
	c.setBackend(&memoryBackend{s: s, wake: c.wake, wakeFair: c.wakeFair, heard: c.heard})
	return c, nil
}

// live returns the lock at key, dropping it if its TTL has passed. s.mu is
// held.
func (s *MemoryStore) live(key string, now time.Time) *memLock {
	l := s.locks[key]
	if l != nil && !now.Before(l.expires) {
		delete(s.locks, key)
		return nil
	}
	return l
}

// take gives the free lock k to owner for lease, with a new fencing token
// (acquire.lua; see nextToken). s.mu is held.
func (s *MemoryStore) take(k *keys, owner string, lease time.Duration, now time.Time) int64 {
	token := s.nextToken(k, now)
	s.locks[k.lock] = &memLock{owner: owner, holds: 1, token: token, expires: now.Add(lease)}
	return token
}

// subscribers are the Clients to tell that k was unlocked, less except
// (the releasing Client wakes its own waiters). s.mu is held; the wake-ups
// run after it is released, by the caller.
func (s *MemoryStore) subscribers(k *keys, except *memoryBackend) []*memoryBackend {
	var out []*memoryBackend
	for b := range s.subs[k.channel] {
		if b != except {
			out = append(out, b)
		}
	}
	return out
}

type memoryBackend struct {
	s        *MemoryStore
	wake     func(channel string)
	wakeFair func(owner string)
	heard    func(channel string, ev TickEvent, ledger string) // a finish of another Client's
}

func (b *memoryBackend) acquire(ctx context.Context, k *keys, owner string, lease time.Duration, holds int) (acquireReply, error) {
	if err := ctx.Err(); err != nil {
		return acquireReply{}, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	l := s.live(k.lock, now)
	if l == nil {
		if holds != 0 {
			return acquireReply{status: acqGone}, nil
		}
		return acquireReply{status: acqAcquired, value: s.take(k, owner, lease, now)}, nil
	}
	if l.owner != owner {
		if holds != 0 {
			return acquireReply{status: acqGone}, nil
		}
		return acquireReply{status: acqHeld, value: max(l.expires.Sub(now).Milliseconds(), 1)}, nil
	}
	switch l.holds {
	case holds:
		l.holds++
	case holds + 1: // as the script: a repeat of a call that was applied
		if holds == 0 {
			// A repeat of the call that took the lock (a retry after a
			// lost reply): the lease starts again now.
			l.expires = now.Add(lease)
		}
	default:
		return acquireReply{status: acqMismatch, value: int64(l.holds)}, nil
	}
	return acquireReply{status: acqAcquired, value: l.token}, nil
}

// renewAll renews each lease in turn, by its kind.
func (b *memoryBackend) renewAll(ctx context.Context, rs []renewing) {
	for i := range rs {
		r := &rs[i]
		ctx := withSent(ctx, &r.sent)
		switch kd := r.kind.(type) {
		case mutexKind, fairKind:
			r.ok, r.err = b.renew(ctx, r.k, r.owner, r.lease)
		case rwKind:
			r.ok, r.err = b.rwRenew(ctx, r.k, r.owner, kd.write, r.lease)
		case semKind:
			r.ok, r.err = b.semRenew(ctx, r.k, r.owner, r.lease)
		default:
			r.ok, r.err = r.kind.renew(ctx, r.k, r.owner, r.lease)
		}
	}
}

func (b *memoryBackend) renew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	l := s.live(k.lock, now)
	if l == nil || l.owner != owner {
		return false, nil
	}
	l.expires = now.Add(lease)
	return true, nil
}

func (b *memoryBackend) release(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	now := time.Now()
	l := s.live(k.lock, now)
	if l == nil || l.owner != owner {
		done := s.wasReleased(k, owner, now)
		s.mu.Unlock()
		if done {
			return relReleased, nil
		}
		return relNotHeld, nil
	}
	if n, last := dropHolds(&l.holds, holds, drop); !last {
		s.mu.Unlock()
		return n, nil
	}
	delete(s.locks, k.lock)
	s.markReleased(k, owner, now)
	s.unlockAndWake(k, b)
	return relReleased, nil
}

// dropHolds applies release.lua's compare-and-set to a lease's hold count
// cur: the caller's lease has holds, and drops drop of them. It returns the
// reply, and whether that was the last hold (then the caller deletes the
// lease, and the reply is relReleased).
func dropHolds(cur *int, holds, drop int) (reply int64, last bool) {
	switch {
	case *cur == holds-drop: // as the script: a repeat of a call that was applied
		return relDropped, false
	case *cur != holds:
		return relMismatch, false
	case *cur > drop:
		*cur -= drop
		return relDropped, false
	}
	return relReleased, true
}

// unlockAndWake releases s.mu, then tells the Clients subscribed to k's
// channel, less except, that k was unlocked. s.mu is held.
func (s *MemoryStore) unlockAndWake(k *keys, except *memoryBackend) {
	subs := s.subscribers(k, except)
	s.mu.Unlock()
	for _, sub := range subs {
		sub.wake(k.channel)
	}
}

func (b *memoryBackend) forceUnlock(ctx context.Context, k *keys) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	if s.live(k.lock, time.Now()) == nil {
		s.mu.Unlock()
		return 0, nil
	}
	delete(s.locks, k.lock)
	s.unlockAndWake(k, nil)
	return 1, nil
}

// subscribe is in place at once: a release after it will wake us.
func (b *memoryBackend) subscribe(k *keys) <-chan struct{} {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.subs[k.channel]
	if m == nil {
		m = make(map[*memoryBackend]int)
		s.subs[k.channel] = m
	}
	m[b]++
	ready := make(chan struct{})
	close(ready)
	return ready
}

func (b *memoryBackend) unsubscribe(k *keys) {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.subs[k.channel]
	if m[b]--; m[b] <= 0 {
		delete(m, b)
	}
	if len(m) == 0 {
		delete(s.subs, k.channel)
	}
}

// subscribeIfReady subscribes: a memory subscription is in place at once.
func (b *memoryBackend) subscribeIfReady(k *keys) <-chan struct{} { return b.subscribe(k) }

// subscribed is nil: a memory subscription is in place at once anyway.
func (b *memoryBackend) subscribed(*keys) <-chan struct{} { return nil }

func (b *memoryBackend) close() error {
	b.dropHandlers()
	return nil
}

// transient: nothing between a MemoryStore and its Clients can fail and
// come back.
func (b *memoryBackend) transient(error) bool { return false }

// storeID names the MemoryStore.
func (b *memoryBackend) storeID() string { return fmt.Sprintf("memory %p", b.s) }
