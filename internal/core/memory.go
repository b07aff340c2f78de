package core

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
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

	released map[string]time.Time // release marks (release.lua), by key, until they expire
}

// memLedger is a ledger's hash (claim.lua).
type memLedger struct {
	done, seen, running, tries int64
	triggers                   int64
	paused                     bool
	owner, outcome, finished   string
	from                       string           // the owner before owner, when tries > 1
	since                      int64            // ms of the claim of running
	definition, defOwner       string           // recorded by the latest claim that had one, and its owner
	last                       map[string]int64 // at:<outcome>: ms of its last finish
	expires                    time.Time
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

// ledgerAt returns the live ledger at key; with create, a new one if
// there is none, and its lifetime renewed. s.mu is held.
func (s *MemoryStore) ledgerAt(key string, now time.Time, create bool) *memLedger {
	g := s.ledger[key]
	if g != nil && !now.Before(g.expires) {
		delete(s.ledger, key)
		g = nil
	}
	if g == nil && create {
		g = &memLedger{}
		s.ledger[key] = g
	}
	if g != nil && create {
		g.expires = now.Add(LedgerTTL)
	}
	return g
}

func (b *memoryBackend) claim(ctx context.Context, k *keys, ledger, owner string, lease time.Duration, tick int64, ca claimArgs) (claimReply, error) {
	if err := ctx.Err(); err != nil {
		return claimReply{}, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	g := s.ledgerAt(ledger, now, true)
	running := g.running
	if running <= g.done {
		running = 0
	}
	seen := g.seen
	g.seen = max(g.seen, tick)
	var q *memQueue
	if ca.fair {
		q = s.queueAt(k, now, false)
	}
	leave := func() {
		if q != nil && q.remove(owner) && len(q.order) == 0 {
			delete(s.queues, k.queue)
		}
	}
	switch {
	case g.paused:
		leave()
		return claimReply{status: claimPaused}, nil
	case g.done >= tick:
		leave()
		return claimReply{status: claimDone, value: g.done}, nil
	case running > tick:
		leave()
		return claimReply{status: claimDone, value: running}, nil
	}
	waits := ca.fair && (ca.wait == 1 && running == tick || ca.wait == 2)
	if l := s.live(k.lock, now); l != nil {
		if l.owner == owner {
			// As the script: a repeat of the call that claimed starts
			// the lease again, and answers before it moves seen.
			l.expires = now.Add(lease)
			g.seen = seen
			return claimReply{status: claimAcquired, value: l.token, try: g.tries, extra: g.running, from: g.from, def: g.definition, defOwner: g.defOwner}, nil
		}
		pttl := max(l.expires.Sub(now).Milliseconds(), 1)
		if waits {
			pttl, _ = s.keepPlace(k, owner, ca.place, now, pttl)
		}
		return claimReply{status: claimHeld, value: pttl, extra: running}, nil
	}
	if head := q.head(); waits && head != "" && head != owner {
		// Free, but others came first.
		sleep, _ := s.keepPlace(k, owner, ca.place, now, 0)
		return claimReply{status: claimHeld, value: sleep, extra: running}, nil
	}
	leave()
	r := claimReply{status: claimAcquired, value: s.take(k, owner, lease, now), extra: tick}
	if running != 0 && running < tick {
		r.extra = running // never overtaken: as the script
	}
	g.from = ""
	if running == r.extra {
		g.tries++
		g.from = g.owner
	} else {
		g.tries = 1
	}
	g.running, g.owner, r.try, r.from = r.extra, owner, g.tries, g.from
	g.since = now.UnixMilli()
	r.def, r.defOwner = g.definition, g.defOwner
	if ca.def != "" {
		g.definition, g.defOwner = ca.def, owner
	}
	return r, nil
}

func (b *memoryBackend) finish(ctx context.Context, k *keys, lg ledgerRef, owner string, holds int, tick int64, rec finishArgs) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	now := time.Now()
	// record writes the finish to the ledger and its history, as the
	// script's record.
	record := func(g *memLedger) {
		if rec.done && g.done < tick {
			g.done = tick
		}
		g.seen = max(g.seen, rec.seen)
		g.outcome, g.tries, g.finished = rec.outcome, int64(rec.tries), owner
		if g.last == nil {
			g.last = make(map[string]int64)
		}
		g.last[rec.outcome] = time.Now().UnixMilli()
		s.appendHistory(lg, rec.entry, now)
	}
	l := s.live(k.lock, now)
	switch {
	case l == nil || l.owner != owner:
		g := s.ledgerAt(lg.key, now, false)
		if g != nil && g.finished == owner {
			s.mu.Unlock()
			return relReleased, nil // as the script: a repeat
		}
		if l == nil && g != nil && rec.done && g.owner == owner && g.running == tick && g.done < tick {
			// As the script: the lock expired under a run that ended, and
			// no one has claimed the tick since: record it done, late,
			// and tell the listeners.
			record(s.ledgerAt(lg.key, now, true))
			subs := s.subscribers(k, b)
			s.mu.Unlock()
			for _, sub := range subs {
				sub.heard(k.channel, TickEvent{Tick: tick, Done: true}, lg.id)
				sub.wake(k.channel)
			}
			return relReleased, nil
		}
		s.mu.Unlock()
		return relNotHeld, nil
	case l.holds != holds:
		s.mu.Unlock()
		return relMismatch, nil
	}
	record(s.ledgerAt(lg.key, now, true))
	delete(s.locks, k.lock)
	subs := s.subscribers(k, b)
	head := ""
	if lg.fair {
		head = s.queueAt(k, now, false).head()
	}
	s.mu.Unlock()
	for _, sub := range subs {
		sub.heard(k.channel, TickEvent{Tick: tick, Done: rec.done}, lg.id) // before the wake-up, as on Redis
		if lg.fair {
			if head != "" {
				sub.wakeFair(head)
			}
		} else {
			sub.wake(k.channel)
		}
	}
	return relReleased, nil
}

func (b *memoryBackend) ledgerPass(ctx context.Context, lg ledgerRef, upTo int64, entry map[string]string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if upTo != 0 { // 0: append alone
		if g := s.ledgerAt(lg.key, now, false); g != nil && g.seen >= upTo {
			return 0, nil
		}
		s.ledgerAt(lg.key, now, true).seen = upTo
	}
	s.appendHistory(lg, entry, now)
	return 1, nil
}

func (b *memoryBackend) history(ctx context.Context, key string, limit int, before string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hists[key]
	if h == nil || !time.Now().Before(h.expires) {
		delete(s.hists, key)
		return nil, nil
	}
	var out []Entry
	for i := len(h.entries) - 1; i >= 0 && len(out) < limit; i-- {
		e := h.entries[i]
		if before != "" && !idBefore(e.id, before) {
			continue
		}
		out = append(out, Entry{ID: e.id.String(), Time: time.UnixMilli(e.id.ms), Fields: maps.Clone(e.fields)})
	}
	return out, nil
}

// memHistory is a ledger's history stream (lib.lua's appendHistory).
type memHistory struct {
	entries []memEntry // oldest first
	last    streamID
	expires time.Time
}

type memEntry struct {
	id     streamID
	fields map[string]string
}

// streamID is a Redis Stream entry id.
type streamID struct{ ms, seq int64 }

func (id streamID) String() string { return fmt.Sprintf("%d-%d", id.ms, id.seq) }

// idBefore reports whether id comes before the entry id s (well formed).
func idBefore(id streamID, s string) bool {
	var b streamID
	if _, err := fmt.Sscanf(s, "%d-%d", &b.ms, &b.seq); err != nil {
		return false
	}
	return id.ms < b.ms || id.ms == b.ms && id.seq < b.seq
}

// appendHistory appends fields, if any, to lg's history, trimmed as the
// script trims it. s.mu is held.
func (s *MemoryStore) appendHistory(lg ledgerRef, fields map[string]string, now time.Time) {
	if len(fields) == 0 {
		return
	}
	key := lg.history
	h := s.hists[key]
	if h == nil || !now.Before(h.expires) {
		h = &memHistory{}
		s.hists[key] = h
	}
	id := streamID{ms: now.UnixMilli()}
	if id.ms <= h.last.ms {
		id = streamID{ms: h.last.ms, seq: h.last.seq + 1}
	}
	h.last = id
	h.entries = append(h.entries, memEntry{id: id, fields: maps.Clone(fields)})
	if n := len(h.entries) - lg.keep; n > 0 {
		h.entries = slices.Delete(h.entries, 0, n)
	}
	oldest := id.ms - lg.maxAge.Milliseconds()
	i := 0
	for i < len(h.entries) && h.entries[i].id.ms < oldest {
		i++
	}
	h.entries = slices.Delete(h.entries, 0, i)
	h.expires = now.Add(lg.maxAge)
}

func (b *memoryBackend) ledger(ctx context.Context, k *keys, key string) (map[string]string, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	held := s.live(k.lock, now) != nil
	g := s.ledgerAt(key, now, false)
	if g == nil {
		return map[string]string{}, held, nil
	}
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	f := map[string]string{
		"done": n(g.done), "seen": n(g.seen), "running": n(g.running), "tries": n(g.tries),
		"owner": g.owner, "outcome": g.outcome, "finished": g.finished,
		"paused": map[bool]string{true: "1", false: ""}[g.paused], "triggers": n(g.triggers),
	}
	if g.since != 0 {
		f["since"] = n(g.since)
	}
	for outcome, ms := range g.last {
		f["at:"+outcome] = n(ms)
	}
	return f, held, nil
}

func (b *memoryBackend) ledgerPause(ctx context.Context, key string, paused bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	b.s.ledgerAt(key, time.Now(), true).paused = paused
	return nil
}

func (b *memoryBackend) ledgerTrigger(ctx context.Context, key string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	g := b.s.ledgerAt(key, time.Now(), true)
	g.triggers++
	return g.triggers, nil
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
