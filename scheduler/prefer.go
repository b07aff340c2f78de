package scheduler

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"io"
	"slices"
	"strconv"
	"strings"
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
// Schedulers of a key prefix that run the jobs named: "scheduler:" and the
// first 16 hex digits of the SHA-256 of the names, sorted, each followed
// by a newline. A replica is ranked only among replicas that run the same
// jobs, so a program with other jobs on the same store (another service)
// never comes first for a job it does not run. Replicas whose sets differ
// (a change rolled out half-way) are in two groups, each with a first in
// rank: a tick then costs a claim more, never a run more.
func memberGroup(names []string) string {
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		_, _ = io.WriteString(h, n)
		_, _ = h.Write([]byte{'\n'})
	}
	return "scheduler:" + hex.EncodeToString(h.Sum(nil))[:16]
}

// leaveTimeout bounds a stopping replica's Leave.
const leaveTimeout = time.Second

// Why a replica claimed a tick, or did not (the lockcron.claim attribute
// of the lockcron.job.claims metric).
const (
	claimPreferred = "preferred"    // first in rank for the tick: claimed at once
	claimFallback  = "fallback"     // not first: the tick was not done within the fallback delay
	claimGivenBack = "given_back"   // not first: the tick's claimant gave it back
	claimUnknown   = "unknown"      // the membership is unknown: claimed at once
	claimSpared    = "spared"       // not first: the tick was heard claimed, done or let go, and not claimed
	claimBefore    = "before_later" // not first: a later tick of the job was to be claimed here, so this one first

	claimBusy = "busy" // how a wait is settled when the first in rank let the tick go (lock held): counted as spared
)

// membership is this replica's view of the fleet: the live members of the
// group, kept by a heartbeat in the lock store. Only the cost of a tick
// depends on it, never whether the tick runs once.
type membership struct {
	store *fleet.Store
	base  string // replica#random: the member's name in every group, before its start
	ttl   time.Duration

	kick chan struct{} // the jobs changed: heartbeat at once

	mu      sync.Mutex
	group   string               // the group of the last heartbeat (memberGroup)
	self    string               // the name in group: base@start (memberName)
	members []string             // sorted, self included, after a heartbeat that worked
	starts  []int64              // each member's start (memberStart), in the order of members
	at      time.Time            // when that heartbeat was sent (monotonic)
	failing bool                 // heartbeats fail: logged once
	gone    map[string]time.Time // replicas found gone from the group, and when (noteGone)
}

func newMembership(store *fleet.Store, replica string, ttl time.Duration) *membership {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return &membership{store: store, base: replica + "#" + hex.EncodeToString(b[:]), ttl: ttl, kick: make(chan struct{}, 1)}
}

// memberName is the name of a replica in a group whose trigger loops all
// fire every tick after start (its own clock): base@start, start in unix
// ms, the latest of the loops' starts (entry.from). The others rank it
// only for the ticks after start (memberStart): a replica whose clock is
// ahead, ranked first for a tick before its start, would never fire it,
// and its claim of the next tick would make the fleet count the earlier
// one done (the soak's miss, seed 37). The start is the loops' own, not
// the heartbeat's time: a loop on a loaded machine may fire a tick due
// before the first heartbeat after it, and must be ranked for it.
func memberName(base string, start time.Time) string {
	return base + "@" + strconv.FormatInt(start.UnixMilli(), 10)
}

// memberStart is the start in member's name (memberName), or 0 if it has
// none: a member named otherwise is ranked for every tick.
func memberStart(member string) int64 {
	i := strings.LastIndexByte(member, '@')
	if i < strings.LastIndexByte(member, '#') {
		return 0
	}
	n, err := strconv.ParseInt(member[i+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// changed asks for a heartbeat at once: the Scheduler's jobs changed, and
// with them its group.
func (m *membership) changed() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
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
			m.mu.Lock()
			group, self := m.group, m.self
			m.mu.Unlock()
			m.leave(s, group, self)
			return
		case <-t.C:
		case <-m.kick:
		}
	}
}

// leave takes this replica, named self there, out of group at once, so
// that the others stop ranking it first.
func (m *membership) leave(s *Scheduler, group, self string) {
	if group == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	err := m.store.Leave(ctx, group, self)
	cancel()
	if err != nil {
		s.log.Debug("leaving the fleet's membership failed; it expires", "member", self, "group", group, "ttl", m.ttl, "error", err)
	}
}

func (m *membership) beat(s *Scheduler) {
	s.mu.Lock()
	names := make([]string, 0, len(s.entries))
	var start time.Time // the latest start of the group's trigger loops
	for name, e := range s.entries {
		names = append(names, name)
		if e.from.After(start) {
			start = e.from
		}
	}
	s.mu.Unlock()
	group := memberGroup(names)
	m.mu.Lock()
	old, self := m.group, m.self
	m.mu.Unlock()
	if old != group {
		m.leave(s, old, self)
		self = memberName(m.base, start)
	}
	sent := time.Now()
	ctx, cancel := context.WithTimeout(s.stopCtx, m.ttl/3)
	members, err := m.store.Heartbeat(ctx, group, self, m.ttl)
	cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	if old != group {
		m.group, m.self, m.members, m.starts, m.at = group, self, nil, nil, time.Time{}
	}
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
	m.noteGone(members, sent)
	starts := make([]int64, len(members))
	for i, o := range members {
		starts[i] = memberStart(o)
	}
	m.members, m.starts, m.at, m.failing = members, starts, sent, false
}

// rank is this replica's place among the live members for the tick of the
// job (0: first), by rendezvous hashing on key (the tick in ms, or a
// manual run's number): every replica that sees the same members computes
// the same order. Members whose start (memberStart) is not before tick, a
// time in ms, are not ranked for it (they do not fire it); when this
// replica is one of them, it comes after every member that is. A tick of 0
// ranks every member (manual runs). ok is false when the membership is
// unknown or stale: then this replica claims at once, as if alone.
func (m *membership) rank(job string, key, tick int64) (rank int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at.IsZero() || time.Since(m.at) >= m.ttl || !slices.Contains(m.members, m.self) {
		return 0, false
	}
	late := tick != 0 && memberStart(m.self) >= tick
	mine := rendezvous(m.self, job, key)
	for i, o := range m.members {
		if o == m.self || (tick != 0 && m.starts[i] >= tick) {
			continue
		}
		if h := rendezvous(o, job, key); late || h > mine || (h == mine && o < m.self) {
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

// heard is what a replica heard of a job's ticks from the fleet's
// announcements of claims and finishes (fleet.Ledger.Watch). e.mu guards
// it.
type heard struct {
	done      int64         // the latest tick heard done, in ms
	running   int64         // a tick heard claimed by another replica and not heard finished since, 0 if none
	runningAt time.Time     // when that claim was heard
	lease     time.Duration // that claim's lease time
}

// underWay reports whether a claim of the tick was heard less than its
// lease ago, and not its finish: its run holds the job's lock (or its
// claimant died, and the lock is held until the lease ends), and until
// when to assume so. A later tick is not held off by an earlier one's
// claim: its own first in rank claims it at once, and a wait held past
// the period would let a later tick's claim overtake it. e.mu is held.
func (h *heard) underWay(ms int64) (time.Time, bool) {
	if h.running != ms {
		return time.Time{}, false
	}
	until := h.runningAt.Add(h.lease)
	return until, time.Now().Before(until)
}

// A wait is a tick this replica is not first in rank for, fired and not
// claimed: when its fallback delay ends, the replica claims it, unless it
// heard it done, or let go by another replica (then it lets it go too,
// sending nothing), or given back (then it claims at once). A claim of the
// tick heard holds the wait off until that claim's lease has passed: the
// run is under way, and only if its claimant died does the replica claim,
// to take it over once the lock expires. A wait has no goroutine: a timer, or the announcement
// that settles it, does what is left. Its fire's counts (e.inflight, s.wg,
// e.undecided) pass to what settles it.
type wait struct {
	e     *entry
	tick  time.Time
	ms    int64
	delay time.Duration // rank × the fallback
	timer *time.Timer
	held  bool // held off by a claim of the tick heard (e.held counts it); e.mu guards it
}

// dropWait takes w out of e's waits. e.mu is held.
func (e *entry) dropWait(w *wait) {
	delete(e.waits, w.ms)
	if w.held {
		w.held = false
		e.held--
	}
}

// heardTick is the job's Watch: it records each announcement of another
// replica's claim or finish, and settles the waits it decides. It runs on
// the lock Client's dispatcher: it must not block.
func (s *Scheduler) heardTick(e *entry, ev fleet.TickEvent) {
	if ev.Replace {
		return // a request to end a run: watchReplaces hears it
	}
	e.mu.Lock()
	h := &e.heard
	heardClaimed := h.running == ev.Tick // by another replica: not this one's own give-back
	switch {
	case ev.Claimed:
		if ev.Tick >= h.running {
			h.running, h.runningAt, h.lease = ev.Tick, time.Now(), ev.Lease
		}
	case ev.Busy:
		// A claim found the lock held for an earlier tick: that run goes
		// on.
	case ev.Done:
		h.done = max(h.done, ev.Tick)
		fallthrough
	default: // done or given back: that claim's run is over
		if ev.Tick >= h.running {
			h.running = 0
		}
	}
	back := !ev.Done && !ev.Claimed && !ev.Busy
	var settled []*wait
	var whys []string
	for ms, w := range e.waits {
		why := ""
		switch {
		case ev.Done && ms <= ev.Tick, ev.Claimed && ms < ev.Tick:
			why = claimSpared
		case ev.Busy && ms == ev.Tick:
			why = claimBusy
		case back:
			why = claimGivenBack
		}
		if why != "" {
			e.dropWait(w)
			settled, whys = append(settled, w), append(whys, why)
		}
	}
	_, waiting := e.waits[ev.Tick]
	e.mu.Unlock()
	for i, w := range settled {
		s.settle(w, whys[i])
	}
	if back && heardClaimed && !waiting && !slices.ContainsFunc(settled, func(w *wait) bool { return w.ms == ev.Tick }) {
		// A handoff of a tick this replica let go when it heard it
		// claimed: claim it at once.
		s.fireGivenBack(e, time.UnixMilli(ev.Tick))
	}
}

// claimsNow reports whether this replica claims the tick at once (first in
// rank, or ranking off or unknown). If not, the tick waits (wait), and what
// settles the wait claims it or lets it go.
func (s *Scheduler) claimsNow(e *entry, tick time.Time) bool {
	if s.opt.fallback <= 0 || s.members == nil || e.job.everyReplica() {
		return true
	}
	ms := tick.UnixMilli()
	rank, ok := s.members.rank(e.job.Name, ms, ms)
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
	w := &wait{e: e, tick: tick, ms: ms, delay: time.Duration(rank) * s.opt.fallback}
	if !s.addWait(w) {
		s.settle(w, "") // stopping
		return false
	}
	e.mu.Lock()
	if e.heard.done >= ms {
		e.mu.Unlock()
		s.dropWait(w)
		s.settle(w, claimSpared)
		return false
	}
	if e.waits == nil {
		e.waits = make(map[int64]*wait)
	}
	e.waits[ms] = w
	w.timer = time.AfterFunc(w.delay, func() { s.waitEnded(w) })
	e.mu.Unlock()
	return false
}

// waitEnded is a wait's timer: the fallback delay is over and nothing
// settled the tick. While a claim of the tick is under way (heard, not its
// finish, within its lease), the wait goes on until then. Else the replica
// claims the tick.
func (s *Scheduler) waitEnded(w *wait) {
	e := w.e
	e.mu.Lock()
	if e.waits[w.ms] != w {
		e.mu.Unlock()
		return // settled meanwhile
	}
	if until, ok := e.heard.underWay(w.ms); ok {
		if !w.held {
			// The tick is in hand elsewhere, not here: the job's next
			// ticks are not skipped for it (fire's overlap limit).
			w.held = true
			e.held++
		}
		w.timer.Reset(time.Until(until))
		e.mu.Unlock()
		return
	}
	e.dropWait(w)
	e.mu.Unlock()
	s.settle(w, claimFallback)
}

// settle ends w: why is how (claimSpared or claimBusy: let go; another:
// claimed now; "": the Scheduler stops). The caller took w out of e.waits.
func (s *Scheduler) settle(w *wait, why string) {
	e := w.e
	if w.timer != nil {
		w.timer.Stop()
	}
	s.dropWait(w)
	switch why {
	case "":
		e.decided(w.ms)
		s.fired(e)
		return
	case claimSpared, claimBusy:
		outcome := OutcomeSkippedDone
		if why == claimBusy {
			outcome = OutcomeSkippedBusy
		}
		s.tel.claimed(e.job.Name, claimSpared)
		s.record(e, w.tick, outcome)
		if s.log.IsDebug() {
			s.log.Debug("tick skipped: heard "+string(outcome), "job", e.job.Name, "tick", fmtTick(w.tick))
		}
		e.decided(w.ms)
		s.fired(e)
		return
	}
	s.tel.claimed(e.job.Name, why)
	if s.log.IsDebug() {
		msg := map[string]string{
			claimFallback:  "tick not heard claimed or done within the fallback: claiming it",
			claimGivenBack: "tick heard given back: claiming it",
			claimBefore:    "tick claimed before a later one of this replica",
		}[why]
		s.log.Debug(msg, "job", e.job.Name, "tick", fmtTick(w.tick), "rank", int(w.delay/s.opt.fallback))
	}
	go s.claimTick(e, w.tick)
}

// addWait registers w with the Scheduler, so that a stop settles it; false
// if the stop has begun.
func (s *Scheduler) addWait(w *wait) bool {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if s.waitsClosed {
		return false
	}
	if s.waiting == nil {
		s.waiting = make(map[*wait]struct{})
	}
	s.waiting[w] = struct{}{}
	return true
}

func (s *Scheduler) dropWait(w *wait) {
	s.waitMu.Lock()
	delete(s.waiting, w)
	s.waitMu.Unlock()
}

// endWaits settles every wait: the Scheduler stops.
func (s *Scheduler) endWaits() {
	s.waitMu.Lock()
	s.waitsClosed = true
	ws := make([]*wait, 0, len(s.waiting))
	for w := range s.waiting {
		ws = append(ws, w)
	}
	s.waitMu.Unlock()
	for _, w := range ws {
		e := w.e
		e.mu.Lock()
		mine := e.waits[w.ms] == w
		if mine {
			e.dropWait(w)
		}
		e.mu.Unlock()
		if mine {
			s.settle(w, "")
		}
	}
}

// A claim of a later tick overtakes an earlier tick that no one claimed:
// the ledger then answers the earlier one done. So a replica never claims
// a tick of a job while it still decides on an earlier one (its wait, or
// its claim on the way): that one is claimed at once (claimBefore), and
// the later claim goes out after its answer. This matters when a replica's
// fallback for a tick ends as its next tick falls due (rank × fallback
// reaches the period), and the replicas first in rank for the earlier tick
// run late clocks: the later claim would otherwise reach the ledger first,
// and the earlier tick would be lost.

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

// awaitEarlier claims at once the earlier ticks of e this replica waits
// on, and waits until each earlier tick is decided, or the Scheduler
// stops, or quit is closed. An earlier tick heard claimed by another
// replica, its run under way (heard.underWay), is neither claimed nor
// waited for: the ledger has its claim, which a later one cannot
// overtake; claiming it would only queue behind its run, and the later
// tick with it (a run longer than the period would have every replica
// claim its tick at each next tick, and run the next tick late instead of
// skipping it).
func (s *Scheduler) awaitEarlier(e *entry, ms int64, quit <-chan struct{}) {
	e.mu.Lock()
	var waits []chan struct{}
	for t, ch := range e.undecided {
		if _, claimed := e.heard.underWay(t); t < ms && !claimed {
			waits = append(waits, ch)
		}
	}
	var hurry []*wait
	for t, w := range e.waits {
		if _, claimed := e.heard.underWay(t); t < ms && !claimed {
			e.dropWait(w)
			hurry = append(hurry, w)
		}
	}
	e.mu.Unlock()
	for _, w := range hurry {
		s.settle(w, claimBefore)
	}
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
