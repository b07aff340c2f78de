package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/lockcron/lockcron/fleet"
)

// DefaultClaimFallback is how long the replica second in rank for a tick
// waits for it to be done before it claims it; the third waits twice as
// long, and so on (WithClaimFallback).
const DefaultClaimFallback = 250 * time.Millisecond

// DefaultMemberTTL is how long a replica counts as a member of the fleet
// after its last heartbeat (WithMemberTTL). It heartbeats every third of
// it.
const DefaultMemberTTL = 3 * time.Second

// memberGroup is the lock store's group (fleet.Store.Heartbeat) of the
// Schedulers that share a key prefix.
const memberGroup = "scheduler"

// leaveTimeout bounds a stopping replica's Leave.
const leaveTimeout = time.Second

// Why a replica claimed a tick, or did not (the lockcron.claim attribute
// of the lockcron.job.claims metric).
const (
	claimPreferred = "preferred"    // first in rank for the tick: claimed at once
	claimFallback  = "fallback"     // not first: the tick was not done within the fallback delay
	claimGivenBack = "given_back"   // not first: the tick's claimant gave it back
	claimUnknown   = "unknown"      // the membership is unknown: claimed at once
	claimSpared    = "spared"       // not first: the tick was heard done, and not claimed
	claimBefore    = "before_later" // not first: a later tick of the job was to be claimed here, so this one first
)

// membership is this replica's view of the fleet: the live members of the
// group, kept by a heartbeat in the lock store. Only the cost of a tick
// depends on it, never whether the tick runs once.
type membership struct {
	store *fleet.Store
	self  string
	ttl   time.Duration

	mu      sync.Mutex
	members []string  // sorted, self included, after a heartbeat that worked
	at      time.Time // when that heartbeat was sent (monotonic)
	failing bool      // heartbeats fail: logged once
}

func newMembership(store *fleet.Store, replica string, ttl time.Duration) *membership {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &membership{store: store, self: replica + "#" + hex.EncodeToString(b[:]), ttl: ttl}
}

// run heartbeats every ttl/3 until stop closes, then leaves the group at
// once, so that the others stop ranking this replica first.
func (m *membership) run(s *Scheduler, stop <-chan struct{}) {
	t := time.NewTicker(m.ttl / 3)
	defer t.Stop()
	for {
		m.beat(s)
		select {
		case <-stop:
			ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
			err := m.store.Leave(ctx, memberGroup, m.self)
			cancel()
			if err != nil {
				s.log.Debug("leaving the fleet's membership failed; it expires", "member", m.self, "ttl", m.ttl, "error", err)
			}
			return
		case <-t.C:
		}
	}
}

func (m *membership) beat(s *Scheduler) {
	sent := time.Now()
	ctx, cancel := context.WithTimeout(s.stopCtx, m.ttl/3)
	members, err := m.store.Heartbeat(ctx, memberGroup, m.self, m.ttl)
	cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if !m.failing && s.stopCtx.Err() == nil {
			s.log.Warn("fleet membership not renewed: until it is, this replica claims every tick at once", "error", err)
		}
		m.failing = true
		return
	}
	if m.failing {
		s.log.Info("fleet membership renewed", "members", len(members))
	}
	if len(members) != len(m.members) && s.log.IsDebug() {
		s.log.Debug("fleet membership", "members", members)
	}
	m.members, m.at, m.failing = members, sent, false
}

// rank is this replica's place among the live members for the tick of the
// job (0: first), by rendezvous hashing: every replica that sees the same
// members computes the same order. ok is false when the membership is
// unknown or stale: then this replica claims at once, as if alone.
func (m *membership) rank(job string, tick int64) (rank int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at.IsZero() || time.Since(m.at) >= m.ttl || !slices.Contains(m.members, m.self) {
		return 0, false
	}
	mine := rendezvous(m.self, job, tick)
	for _, o := range m.members {
		if o == m.self {
			continue
		}
		if h := rendezvous(o, job, tick); h > mine || (h == mine && o < m.self) {
			rank++
		}
	}
	return rank, true
}

// rendezvous is the weight of member for the tick of the job: FNV-1a of
// the three, mixed (SplitMix64's finalizer) so that close inputs spread.
func rendezvous(member, job string, tick int64) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(job))
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(tick))
	_, _ = h.Write(b[:])
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// heard is what a replica heard of a job's ticks from the finish messages
// of the fleet (fleet.Ledger.Watch). e.mu guards it.
type heard struct {
	done  int64         // the latest tick heard done, in ms
	backs uint64        // give-backs heard
	later int64         // the latest tick (ms) this replica is about to claim (awaitEarlier)
	ch    chan struct{} // closed at the next event
}

// listen is the job's Watch: it records each finish message, and wakes the
// replica's ticks that wait for one.
func (e *entry) listen(ev fleet.TickEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.Done {
		e.heard.done = max(e.heard.done, ev.Tick)
	} else {
		e.heard.backs++
	}
	e.wakeHeard()
}

// wakeHeard wakes the ticks that wait in shouldClaim. e.mu is held.
func (e *entry) wakeHeard() {
	if e.heard.ch != nil {
		close(e.heard.ch)
		e.heard.ch = nil
	}
}

// A claim of a later tick overtakes an earlier tick that no one claimed:
// the ledger then answers the earlier one done. So a replica never claims
// a tick of a job while it still decides on an earlier one (its wait in
// shouldClaim, or its claim on the way): that one is claimed at once
// (claimBefore), and the later claim goes out after its answer. This
// matters when a replica's fallback for a tick ends as its next tick falls
// due (rank × fallback reaches the period), and the replicas first in rank
// for the earlier tick run late clocks: the later claim would otherwise
// reach the ledger first, and the earlier tick would be lost.

// deciding registers tick as one this replica decides on. e.mu is held.
func (e *entry) deciding(ms int64) {
	if e.undecided == nil {
		e.undecided = make(map[int64]chan struct{})
	}
	if _, ok := e.undecided[ms]; !ok {
		e.undecided[ms] = make(chan struct{})
	}
}

// decided says that the tick's decision is made: skipped, or its claim
// answered. It may be called more than once.
func (e *entry) decided(ms int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ch, ok := e.undecided[ms]; ok {
		close(ch)
		delete(e.undecided, ms)
	}
}

// awaitEarlier hurries the earlier ticks of e this replica still decides
// on, and waits until each is decided, or the Scheduler stops, or quit is
// closed.
func (s *Scheduler) awaitEarlier(e *entry, ms int64, quit <-chan struct{}) {
	e.mu.Lock()
	var waits []chan struct{}
	for t, ch := range e.undecided {
		if t < ms {
			waits = append(waits, ch)
		}
	}
	if len(waits) > 0 && ms > e.heard.later {
		e.heard.later = ms
		e.wakeHeard()
	}
	e.mu.Unlock()
	for _, ch := range waits {
		select {
		case <-ch:
		case <-s.stopping:
			return
		case <-quit:
			return
		}
	}
}

// shouldClaim decides whether this replica claims the tick, and when: the
// replica first in rank at once; the others after the fallback delay of
// their rank, unless the tick is heard done before (then they do not claim
// it: it returns false) or given back (then at once). It returns false
// also when the Scheduler stops meanwhile.
func (s *Scheduler) shouldClaim(e *entry, tick time.Time) bool {
	if s.opt.fallback <= 0 || s.members == nil {
		return true
	}
	ms := tick.UnixMilli()
	rank, ok := s.members.rank(e.job.Name, ms)
	switch {
	case !ok:
		s.tel.claimed(e.job.Name, claimUnknown)
		return true
	case rank == 0:
		s.tel.claimed(e.job.Name, claimPreferred)
		if s.log.IsDebug() {
			s.log.Debug("tick claimed: first in rank", "job", e.job.Name, "tick", fmtTick(tick))
		}
		return true
	}
	e.mu.Lock()
	backs := e.heard.backs
	e.mu.Unlock()
	t := time.NewTimer(time.Duration(rank) * s.opt.fallback)
	defer t.Stop()
	for {
		e.mu.Lock()
		done, back, before := e.heard.done >= ms, e.heard.backs != backs, e.heard.later > ms
		if e.heard.ch == nil {
			e.heard.ch = make(chan struct{})
		}
		ch := e.heard.ch
		e.mu.Unlock()
		switch {
		case done:
			s.tel.claimed(e.job.Name, claimSpared)
			s.record(e, tick, OutcomeSkippedDone)
			if s.log.IsDebug() {
				s.log.Debug("tick skipped: heard done", "job", e.job.Name, "tick", fmtTick(tick), "rank", rank)
			}
			return false
		case back:
			s.tel.claimed(e.job.Name, claimGivenBack)
			return true
		case before:
			s.tel.claimed(e.job.Name, claimBefore)
			if s.log.IsDebug() {
				s.log.Debug("tick claimed before a later one of this replica", "job", e.job.Name, "tick", fmtTick(tick), "rank", rank)
			}
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			s.tel.claimed(e.job.Name, claimFallback)
			if s.log.IsDebug() {
				s.log.Debug("tick not heard done within the fallback: claiming it", "job", e.job.Name, "tick", fmtTick(tick), "rank", rank)
			}
			return true
		case <-s.stopping:
			return false
		}
	}
}
