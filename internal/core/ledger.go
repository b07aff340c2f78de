package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrDone: Ledger.Claim found the tick done, or a later tick done or under
// way; there is nothing to run.
var ErrDone = errors.New("fleet: tick already done")

// ErrPaused: Ledger.Claim found the ledger paused (Ledger.Pause); nothing
// was taken. The error Claim returns is a *PausedError, which says until
// when.
var ErrPaused = errors.New("fleet: ledger paused")

// PausedError is the error of a Claim that found the ledger paused: it
// matches ErrPaused (errors.Is), and says when the pause lifts itself.
type PausedError struct {
	Lock, Ledger string
	Tick         int64
	// Until is when the pause lifts itself, on the store's clock; zero if
	// it lasts until a resume.
	Until time.Time
}

func (e *PausedError) Error() string {
	s := fmt.Sprintf("lock %q: ledger %q: tick %d: %v", e.Lock, e.Ledger, e.Tick, ErrPaused)
	if !e.Until.IsZero() {
		s += " until " + e.Until.UTC().Format(time.RFC3339Nano)
	}
	return s
}

// Is makes a PausedError match ErrPaused.
func (e *PausedError) Is(target error) bool { return target == ErrPaused }

// PauseInfo is a pause as the ledger keeps it (Ledger.Pause,
// LedgerState.Pause): who paused, why, and until when.
type PauseInfo struct {
	// By names who paused: an operator, a token, a replica; free text.
	By string
	// Note says why; at most MaxPauseNote bytes.
	Note string
	// Until is when the pause lifts itself, decided on the store's clock
	// (Redis TIME): from then on claims go through again, with no resume.
	// Zero: the pause lasts until a resume.
	Until time.Time
	// At is when the pause was set, on the store's clock. Pause ignores
	// it: the store sets it.
	At time.Time
}

// MaxPauseNote is the longest PauseInfo.Note, in bytes: a sentence or
// two, as a commit message's subject and body; a longer text belongs in
// a ticket that the note names.
const MaxPauseNote = 1000

// LedgerTTL is how long a ledger outlives its last claim or finish, at
// least (up to ledgerRenew more: the key's lifetime is renewed once per
// ledgerRenew, not at each claim and finish): long enough to judge a
// monthly schedule's missed tick after a downtime.
const LedgerTTL = 35 * 24 * time.Hour

// A Ledger records, beside a lock, the ticks of a recurring task (a cron
// job): which one was done last, which one is running and by whom, and how
// it ended. A claim of a tick checks the ledger and takes the lock in one
// step, so that each tick is done once, by one owner, however skewed the
// claimants' clocks are: a tick is any int64 that grows from tick to tick,
// the same on every claimant (the scheduler uses the scheduled time in
// milliseconds).
//
// The ledger of lock n and id j lives at prefix:{n}:ledger:j, in the lock's
// hash slot. Several ledgers may share one lock (jobs that exclude each
// other). A Ledger is safe for concurrent use.
type Ledger struct {
	c    *Client
	m    *mutex
	id   string
	key  string
	fair bool   // claims wait in the FairMutex's queue
	def  string // the definition each claim records (WithDefinition)

	keep   int           // history entries kept
	maxAge time.Duration // history entries' lifetime
	histID string        // the ledger whose history this one writes (WithSharedHistory)
	own    *string       // the lock of its own its claims take, beside the lock (WithOwnLock); nil: the lock's
	hist   string        // the history's key

	replace bool // claims ask the run of an earlier tick to end (WithReplace)
	// byBackfill: the ledger's claims are a backfill's (WithBackfillClaims):
	// their owner ids end with BackfillOwnerTag.
	byBackfill bool
}

// claimArgs are a claim's arguments besides the tick: how it takes part in
// a fair lock's queue (claim.lua's ARGV[6..9]; the zero value is a claim
// of the reentrant lock), and the definition it records (ARGV[10]).
type claimArgs struct {
	fair  bool
	place time.Duration // a place's lifetime without a heartbeat
	wait  int           // 0 no wait (one attempt); 1 for the same tick; 2 for any tick (queue)
	def   string        // "": record none
	// replace: a claim that finds the lock held for an earlier tick asks
	// that run to end (ARGV[12], WithReplace)
	replace bool
}

// ref is where g lives in the store, for the backend.
func (g *Ledger) ref() ledgerRef {
	return ledgerRef{id: g.id, key: g.key, history: g.HistoryKey(), fair: g.fair, keep: g.keep, maxAge: g.maxAge}
}

// args are rec as the backend takes it.
func (rec Record) args() finishArgs {
	fa := finishArgs{done: rec.Done, outcome: rec.Outcome, tries: rec.Tries, seen: rec.Seen, entry: rec.Entry, chain: rec.Chain}
	switch {
	case rec.Failed:
		fa.streak = streakFailed
		fa.pauseAfter, fa.pauseBy, fa.pauseNote = rec.PauseAfter, rec.Pause.By, rec.Pause.Note
	case rec.Succeeded:
		fa.streak = streakReset
	}
	return fa
}

// Ledger returns the ledger named id beside the lock named lockName, with
// its history (Ledger.History) kept as opts say. It returns ErrInvalid for
// a bad lock name, an id that is empty or holds { or }, or a negative
// retention.
func (c *Client) Ledger(lockName, id string, opts ...LedgerOption) (*Ledger, error) {
	if err := validName(lockName); err != nil {
		return nil, err
	}
	if id == "" || strings.ContainsAny(id, "{}") {
		return nil, fmt.Errorf("lock %q: ledger id %q: empty, or holds { or }: %w", lockName, id, ErrInvalid)
	}
	g := &Ledger{c: c, id: id, keep: DefaultHistoryKeep, maxAge: DefaultHistoryMaxAge}
	for _, o := range opts {
		o(g)
	}
	m, err := ownMutex(c, lockName, g.own)
	if err != nil {
		return nil, err
	}
	g.m, g.key = m, m.k.lock+":ledger:"+id
	c.tel.zero(m.k.name)
	if g.histID == "" {
		g.histID = id
	}
	if strings.ContainsAny(g.histID, "{}") {
		return nil, fmt.Errorf("lock %q: ledger %q: shared history %q holds { or }: %w", lockName, id, g.histID, ErrInvalid)
	}
	g.hist = base(c.opt.prefix, lockName) + ":ledger:" + g.histID + ":history"
	if g.keep < 0 || g.maxAge < 0 {
		return nil, fmt.Errorf("lock %q: ledger %q: history keeps %d entries for %v: must not be negative: %w", lockName, id, g.keep, g.maxAge, ErrInvalid)
	}
	if g.maxAge < time.Millisecond {
		g.maxAge = time.Millisecond
	}
	return g, nil
}

// FairLedger is Ledger whose claims take the lock in FairMutex order:
// claimants that wait for the lock (for the same tick, or for any tick when
// queue is true) keep a place in the lock's queue, take it in the order
// they came, and only the head is woken when it is released. The lock is
// the same as Ledger's: a Ledger and a FairLedger of one name exclude each
// other, but only FairLedger claims keep the order.
func (c *Client) FairLedger(lockName, id string, opts ...LedgerOption) (*Ledger, error) {
	g, err := c.Ledger(lockName, id, opts...)
	if err != nil {
		return nil, err
	}
	g.fair = true
	return g, nil
}

// Key is the ledger's Redis key.
func (g *Ledger) Key() string { return g.key }

// A Claim is one owner's hold on a tick: its Lease holds the lock, with its
// watchdog, until Finish.
type Claim struct {
	// Lease holds the lock. Its Context ends when the lock is lost.
	Lease *Lease
	// Tick is the tick claimed: the one asked for, or an earlier one that
	// was claimed and never finished (its claimant died, lost the lock, or
	// gave it back), which is never overtaken. Claim the asked-for tick
	// again once this one is finished.
	Tick int64
	// Try is the number of this claim's first try at the tick: 1, or more
	// when earlier claims of the tick gave it back or died with it.
	Try int
	// From is the owner id of the claim of Tick before this one, when Try
	// is above 1 (it died, lost the lock or gave the tick back), else "".
	// An owner id is the claiming Client's ID (WithClientID), its
	// instance (random, per Client value) and a number, joined by colons.
	From string
	// Definition is the definition the ledger held when the claim was
	// made: the one that the latest claim with one recorded
	// (WithDefinition), or "" if none did; DefinitionBy is that claim's
	// owner id. Each claim records its ledger's own, if it has one; one
	// that differs from it, recorded by another Client, tells of a
	// claimant that runs another version of the task (a change half rolled
	// out). A repeat of a claim after a lost reply answers with its own.
	Definition   string
	DefinitionBy string
	// At is when the claim took the lock, on the store's clock (Redis
	// TIME; the process's on the memory backend): one clock for every
	// claimant, to measure how late after its tick a claim came.
	At time.Time
	// Params are the params of the ordered manual request claimed (see
	// Trigger; an empty map for none), read in the claim's step; nil if
	// the tick claimed has no such record (not an ordered request, or the
	// store lost it).
	Params map[string]string
	// Requested reports whether the tick claimed has a record of its
	// request (Trigger's, ordered or not), read in the claim's step: a
	// request not ordered has one and no Params, one the store lost has
	// none.
	Requested bool

	g         *Ledger
	announced bool // the claim was announced: so is its finish
	paused    bool // its Finish paused the ledger (Record.PauseAfter)
}

// Paused reports whether the claim's Finish paused the ledger: the
// Record's failure brought the failures in a row to its PauseAfter. Of
// the finishes of one ledger, only the one that paused it says so (a
// retry of it included); read it after Finish returned.
func (cl *Claim) Paused() bool { return cl.paused }

// Claim takes the lock for tick, unless the ledger says it is done. While
// another owner holds the lock for the same tick, Claim waits (no polling:
// unlock messages and the holder's TTL) and, when the holder finishes,
// returns ErrDone; if the holder gives the tick back or dies, Claim takes
// it, with Try counting on. While the lock is held for an earlier tick (or
// by a plain Lock), Claim waits for it if queue is true, else it returns
// ErrLocked. It returns ErrDone, without taking the lock, when the tick or a
// later one is done or was claimed.
//
// A tick that was claimed and never finished (its claimant died, lost the
// lock, or gave it back) is never overtaken: if the lock is free and such
// a tick is earlier than tick, Claim claims that one instead (Claim.Tick
// says which, and Try counts on); claim tick again after its Finish.
//
// The first attempt goes out at once, even while other goroutines of this
// Client wait, unless this Client's last claim to the same shard (the
// store, or the Cluster primary of the lock's hash slot) could not reach
// it: then one claim at a time probes the shard, with a pause that grows
// from 25ms to 250ms, and the others go when it answers. Failures to reach
// the store are ridden out while the wait lasts. When ctx ends, Claim returns its error, wrapped; WithWait bounds
// the wait (then ErrLocked); WithWait(0) makes one attempt. WithLease is
// refused: a claim is renewed by the watchdog until Finish.
func (g *Ledger) Claim(ctx context.Context, tick int64, queue bool, opts ...AcquireOption) (*Claim, error) {
	var cl *Claim
	a := acquisition{
		k: g.m.k, kind: g.kind(), fair: g.fair, claim: true, ownerTag: g.ownerTag(),
		check: func() error { return g.heardDoneErr(tick) },
		attempt: func(ctx context.Context, at attemptArgs) (*Lease, time.Duration, error) {
			l, pttl, got, err := g.attempt(ctx, at.owner, tick, queue, at.once, at.until)
			if got != nil {
				cl = got
			}
			return l, pttl, err
		},
	}
	if _, err := g.c.acquire(ctx, a, false, opts); err != nil {
		return nil, err
	}
	return cl, nil
}

// attempt claims once. It returns the claim and its lease, or the holder's
// remaining TTL to wait for, or an error: ErrDone, ErrLocked (held for an
// earlier tick, and queue is false), or a failure.
func (g *Ledger) attempt(ctx context.Context, owner string, tick int64, queue, once bool, until time.Time) (*Lease, time.Duration, *Claim, error) {
	m, c := g.m, g.c
	fc := claimArgs{fair: g.fair, place: c.opt.waiterTTL, wait: 1, def: g.def, replace: g.replace}
	switch {
	case once:
		fc.wait = 0
	case queue:
		fc.wait = 2
	}
	if err := g.heardDoneErr(tick); err != nil {
		return nil, 0, nil, err // woken by the finish of the tick waited for
	}
	shard, slot, gated := c.claimShard(ctx, g.key)
	probe := false
	if gated {
		var err error
		if probe, err = c.gate.enter(ctx, shard, until, c.done); err != nil {
			return nil, 0, nil, fmt.Errorf("lock %q: claim: %w", m.k.name, err)
		}
	}
	var sent time.Time
	r, err := c.be.claim(withSent(ctx, &sent), m.k, g.key, owner, c.opt.leaseTime, tick, fc)
	if err != nil {
		err = c.transient(fmt.Errorf("lock %q: claim: %w", m.k.name, err))
	}
	if gated {
		o := shardUp
		switch {
		case err != nil && ctx.Err() != nil:
			o = shardUnknown
		case unreachable(err):
			o = shardDownNow
		}
		c.gate.leave(shard, probe, o)
		if o == shardUp && slot >= 0 {
			c.claimServed(ctx, g.key, slot)
		}
	}
	if err != nil {
		return nil, 0, nil, err
	}
	switch r.status {
	case claimAcquired:
		l, err := c.newLease(ctx, g.kind(), m.k, owner, r.value, c.opt.leaseTime, 0, sent)
		if err != nil {
			return nil, 0, nil, err
		}
		claimed := r.extra
		if claimed == 0 {
			claimed = tick
		}
		announced := c.announce(m.k.channel, g.id, TickEvent{Tick: claimed, Claimed: true, Lease: c.opt.leaseTime}, false)
		params, _ := requestParams(r.req) // a record that does not parse: none
		return l, 0, &Claim{Lease: l, Tick: claimed, Try: int(r.try), From: r.from, Definition: r.def, DefinitionBy: r.defOwner,
			At: time.UnixMilli(r.at), Params: params, Requested: r.req != "", g: g, announced: announced}, nil
	case claimDone:
		return nil, 0, nil, fmt.Errorf("lock %q: ledger %q: tick %d: %w (at %d)", m.k.name, g.id, tick, ErrDone, r.value)
	case claimPaused:
		pe := &PausedError{Lock: m.k.name, Ledger: g.id, Tick: tick}
		if r.value > 0 {
			pe.Until = time.UnixMilli(r.value)
		}
		return nil, 0, nil, pe
	case claimHeld:
		if g.replace && r.extra != 0 && r.extra < tick {
			g.replaceAsked(tick)
		}
		if r.extra == tick || queue || r.byBackfill {
			// (A backfill's run holds the lock: the claim waits for it,
			// as under overlap queue. Scheduled ticks come first.)
			return nil, time.Duration(r.value) * time.Millisecond, nil, nil
		}
		c.announce(m.k.channel, g.id, TickEvent{Tick: tick, Busy: true}, false)
		return nil, 0, nil, fmt.Errorf("lock %q: held for an earlier tick than %d: %w", m.k.name, tick, ErrLocked)
	case claimLedgerType:
		return nil, 0, nil, fmt.Errorf("lock %q: key %q holds another type, not a ledger hash: %w", m.k.name, g.key, ErrBadKey)
	case claimQueueType:
		return nil, 0, nil, fmt.Errorf("lock %q: key %q or %q holds another type, not a fair lock's queue: %w", m.k.name, m.k.queue, m.k.timeout, ErrBadKey)
	}
	return nil, 0, nil, badReply(m.k, acquireReply{status: r.status, value: r.value})
}

// heardDoneErr is ErrDone if this Client heard a finish of the tick, or of
// a later one, recorded done (a Watch, or a Finish of its own): no need to
// ask the store, since a tick once done stays done.
func (g *Ledger) heardDoneErr(tick int64) error {
	if done := g.c.heardDone(g); done >= tick {
		return fmt.Errorf("lock %q: ledger %q: tick %d: %w (at %d, heard)", g.m.k.name, g.id, tick, ErrDone, done)
	}
	return nil
}

// A Record is how a claimed tick ended, as Finish writes it to the ledger.
type Record struct {
	// Done marks the tick done, so that no one claims it again; false
	// gives it back: the next claim of the same tick takes it over, with
	// Try counting on from Tries.
	Done bool
	// Outcome is a word kept in the ledger for operators.
	Outcome string
	// Tries is how many tries the tick has had, this claim's included.
	Tries int
	// Seen, if above the ledger's Seen, moves it there: the claimant
	// handled every tick up to it (it skipped those due while it ran), so
	// none of them was missed.
	Seen int64
	// Entry, if not nil, is appended to the ledger's history (History)
	// when the finish is recorded, in the same step: once, whatever the
	// retries. An entry with the field "skip" (a tick not run, such as one
	// past its start deadline) is coalesced with the newest entry of the
	// same "skip" and "outcome", as Ledger.Pass says.
	Entry map[string]string
	// Failed counts the finish as one more failure in a row
	// (LedgerState.Failures); Succeeded ends the row (Failures back to
	// 0). With neither, the count stays as it is (a tick skipped, a run
	// cut short).
	Failed, Succeeded bool
	// PauseAfter, if above 0, pauses the ledger in the same step when
	// Failed brings the failures in a row to PauseAfter or more, and the
	// ledger is not paused already: with Pause's By and Note (its Until
	// is not used: such a pause lasts until a resume), and Claim.Paused
	// says so. Once across every Client, whatever the retries.
	PauseAfter int
	Pause      PauseInfo
	// Chain, when the tick is Done, adds the run to the ledger's chain
	// record in the same step (Ledger.ChainRuns): its tick, Outcome and
	// Entry's fields "tick" and "params", for the runs that follow it.
	// Once, whatever the retries.
	Chain bool
}

// Finish writes rec to the ledger and releases the lock (every hold of the
// lease) in one step, waking the lock's waiters.
//
// Call it on a live context (context.WithoutCancel with a timeout), like
// Unlock. If the lease no longer holds the lock, Finish records nothing and
// returns an error wrapping ErrNotHeld; the next claim of the tick finds it
// unfinished. A failure to reach the backend is retried, with a growing
// pause (up to 250ms), until ctx ends; then the lease ends all the same,
// the lock expires within its lease time, and the tick is unfinished. A
// retry that arrives after the lock expired still records a done tick if no
// one has claimed it since (the run ended while the lease held): the
// outage cost the lock, not the run. If a claim came first, the tick runs
// again: at least once.
func (cl *Claim) Finish(ctx context.Context, rec Record) error {
	l, g := cl.Lease, cl.g
	l.holdMu.Lock()
	defer l.holdMu.Unlock()
	if err := l.Err(); err != nil {
		l.freeIfLost(ctx, err) // the ledger stays as it is
		return fmt.Errorf("lock %q: finish: %w: %w", l.k.name, ErrNotHeld, err)
	}
	var ledgerErr error
	err := l.releaseWith(ctx, ErrReleased, func(ctx context.Context, holds int) (int64, error) {
		lg, f := g.ref(), rec.args()
		n, err := l.c.be.finish(ctx, l.k, lg, l.owner, holds, cl.Tick, f)
		// A tick whose outcome is not recorded may run again: retry
		// failures while ctx lasts (finish.lua answers a repeat with 1).
		for wait := finishRetry; err != nil && ctx.Err() == nil; wait = min(2*wait, maxBackoff) {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				continue
			}
			n, err = l.c.be.finish(ctx, l.k, lg, l.owner, holds, cl.Tick, f)
		}
		// The ledger recorded the finish (with or without its history
		// entry): our own listeners hear of it here, and so do the claims
		// of this Client that the wake-up below sends to the store (the
		// message is not ours to hear).
		switch n {
		case finishPaused:
			cl.paused, n = true, relReleased
		case finishPausedHistoryType:
			cl.paused, n = true, historyType
		}
		recorded := err == nil && (n == relReleased || n == historyType)
		switch n {
		case finishLedgerType:
			ledgerErr = fmt.Errorf("lock %q: key %q holds another type, not a ledger hash: %w", l.k.name, g.key, ErrBadKey)
			n = relReleased
		case historyType:
			ledgerErr = g.historyTypeErr()
			n = relReleased
		}
		if recorded {
			ev := TickEvent{Tick: cl.Tick, Done: rec.Done}
			l.c.heard(l.k.channel, ev, g.id)
			l.c.announce(l.k.channel, g.id, ev, cl.announced)
		}
		if err != nil || n == relReleased {
			l.c.wake(l.k.channel) // as Client.release: our own waiters
		}
		return n, err
	})
	return errors.Join(err, ledgerErr)
}

// kind is the kind of the claims' leases: the reentrant lock's, or the fair
// lock's, whose release wakes the head of its queue.
func (g *Ledger) kind() kind {
	if g.fair {
		return fairKind{g.c}
	}
	return mutexKind{g.c}
}

// LedgerState is what a ledger says now.
type LedgerState struct {
	Done     int64     // the latest tick done; 0 if none
	Seen     int64     // the latest tick anyone claimed (done or not)
	Running  int64     // the tick claimed after Done and not done: under way, given back, or its owner died; else 0
	Owner    string    // the owner id of the claim of Running, or of the last claim
	Since    time.Time // when that claim was taken, on the store's clock; zero if none
	Tries    int       // tries of the last tick claimed
	Outcome  string    // the outcome recorded by the last Finish
	Finished string    // the owner id of the last Finish
	Held     bool      // the lock is held now (by a claim or a plain Lock)
	Paused   bool      // paused now: Pause(true) was called (or a Finish paused it, Record.PauseAfter), not undone, and its Until has not passed on the store's clock: claims return ErrPaused
	Pause    PauseInfo // the pause in force when Paused: who, why, when, until; else zero
	Failures int       // failed finishes in a row (Record.Failed), since the last one that succeeded or a resume
	Triggers int64     // how many times Trigger was called
	// PauseFinish, when Paused and the pause was set by a Finish
	// (Record.PauseAfter), is that claim's owner id (Lease.Owner); else
	// "". A claimant whose Finish failed (its reply lost) reads it to
	// learn whether its finish paused the ledger.
	PauseFinish string
	// Last is when each outcome was last recorded by a Finish, on the
	// store's clock (as long as the ledger lives, LedgerTTL).
	Last map[string]time.Time
	// Replace is the latest tick whose claim asked the run of an earlier
	// tick to end (WithReplace); 0 if none. A run of a tick before it is
	// to end: replaced.
	Replace int64
}

// State reads the ledger, and whether the lock is held, in one round trip.
// A ledger that does not exist (never used, or expired after LedgerTTL)
// reads as the zero LedgerState. It returns ErrBadKey if the key holds
// another type.
func (g *Ledger) State(ctx context.Context) (LedgerState, error) {
	var st LedgerState
	if g.c.isClosed() {
		return st, fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	f, held, err := g.c.be.ledger(ctx, g.m.k, g.key)
	if err != nil {
		if errors.Is(err, ErrBadKey) {
			return st, fmt.Errorf("lock %q: key %q holds another type, not a ledger hash: %w", g.m.k.name, g.key, ErrBadKey)
		}
		return st, fmt.Errorf("lock %q: ledger %q: %w", g.m.k.name, g.id, err)
	}
	num := func(k string) int64 { n, _ := strconv.ParseInt(f[k], 10, 64); return n }
	st = LedgerState{
		Done: num("done"), Seen: num("seen"), Running: num("running"),
		Owner: f["owner"], Tries: int(num("tries")), Outcome: f["outcome"], Finished: f["finished"],
		Held: held, Paused: f["paused"] == "1", Failures: int(num("failures")), Triggers: num("triggers"),
		Replace: num("replace"),
	}
	if st.Paused {
		st.Pause, st.PauseFinish = PauseInfo{By: f["pausedby"], Note: f["pausenote"]}, f["pausefinish"]
		if ms := num("pausedat"); ms != 0 {
			st.Pause.At = time.UnixMilli(ms)
		}
		if ms := num("pauseduntil"); ms != 0 {
			st.Pause.Until = time.UnixMilli(ms)
		}
	}
	if ms := num("since"); ms != 0 {
		st.Since = time.UnixMilli(ms)
	}
	for k, v := range f {
		if outcome, ok := strings.CutPrefix(k, "at:"); ok {
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
				if st.Last == nil {
					st.Last = make(map[string]time.Time)
				}
				st.Last[outcome] = time.UnixMilli(ms)
			}
		}
	}
	if st.Running <= st.Done {
		st.Running = 0
	}
	return st, nil
}

// Pause pauses the ledger (paused true) with p's By, Note and Until, or
// resumes it (p is not used): while it is paused, every Claim returns
// ErrPaused without taking the lock, on every Client of the store; the
// ticks claimed meanwhile count as seen. The store records when (its
// clock). A pause with an Until lifts itself then, decided on the store's
// clock: no resume is needed, and LedgerState no longer reports it. A
// pause replaces the one in force; a resume clears it and the failures in
// a row (LedgerState.Failures). It does not touch a claim under way. It
// returns ErrInvalid, and changes nothing, for a Note longer than
// MaxPauseNote or an Until not after the store's clock; ErrBadKey if the
// key is not a hash.
func (g *Ledger) Pause(ctx context.Context, paused bool, p PauseInfo) error {
	if g.c.isClosed() {
		return fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	if paused && len(p.Note) > MaxPauseNote {
		return fmt.Errorf("lock %q: ledger %q: pause note of %d bytes: at most %d: %w", g.m.k.name, g.id, len(p.Note), MaxPauseNote, ErrInvalid)
	}
	var until int64
	if paused && !p.Until.IsZero() {
		until = max(p.Until.UnixMilli(), 1) // 0 is none
	}
	ok, err := g.c.be.ledgerPause(ctx, g.key, paused, pauseArgs{by: p.By, note: p.Note, until: until})
	if err != nil {
		return g.ledgerErr(err)
	}
	if !ok {
		return fmt.Errorf("lock %q: ledger %q: pause until %s: not after the store's clock: %w", g.m.k.name, g.id, p.Until.UTC().Format(time.RFC3339Nano), ErrInvalid)
	}
	return nil
}

func (g *Ledger) ledgerErr(err error) error {
	if errors.Is(err, ErrBadKey) || strings.HasPrefix(err.Error(), "WRONGTYPE") {
		return fmt.Errorf("lock %q: key %q holds another type, not a ledger hash: %w", g.m.k.name, g.key, ErrBadKey)
	}
	return fmt.Errorf("lock %q: ledger %q: %w", g.m.k.name, g.id, err)
}

type claimReply struct {
	status   int64
	value    int64 // token, done tick or pttl, by status
	try      int64
	extra    int64 // the tick claimed when acquired; the holder's tick when held
	from     string
	def      string // the ledger's definition before the claim, when acquired
	defOwner string // the owner of the claim that recorded def
	at       int64  // the store's time of an acquired claim, ms
	req      string // the record of the request claimed (trigger.lua's req:<n>), when acquired
	// byBackfill: held, by a backfill's claim (an owner id that ends with
	// BackfillOwnerTag); the claim waits for it whatever its queue.
	byBackfill bool
}

// finishRetry is the first pause before Finish tries again.
const finishRetry = 50 * time.Millisecond

const (
	claimAcquired   = 1
	claimDone       = 2
	claimPaused     = 3
	claimHeld       = 0
	claimLedgerType = -6
	claimQueueType  = -7

	finishLedgerType = -6
	// finishPaused: finish.lua finished, and its failure paused the
	// ledger (Record.PauseAfter).
	finishPaused = 2
	// finishPausedHistoryType: as historyType (the finish recorded, no
	// history entry), and the finish paused the ledger. The memory
	// backend has no keys of another type: it never answers it.
	finishPausedHistoryType = -9
)

// A finish's effect on the ledger's failures in a row (finish.lua's
// ARGV[15]).
const (
	streakKeep   = ""  // neither
	streakFailed = "+" // one more
	streakReset  = "0" // back to 0
)
