package fleet

import (
	"context"
	"time"

	"github.com/lockcron/lockcron/internal/core"
	"github.com/lockcron/lockcron/lock"
)

// ErrDone: Ledger.Claim found the tick done, or a later tick done or under
// way; there is nothing to run.
var ErrDone = core.ErrDone

// ErrPaused: Ledger.Claim found the ledger paused (Ledger.Pause); nothing
// was taken. The error Claim returns is a *PausedError, which says until
// when.
var ErrPaused = core.ErrPaused

// PausedError is the error of a Claim that found the ledger paused: it
// matches ErrPaused (errors.Is), and its Until says when the pause lifts
// itself, on the store's clock (zero: when resumed).
type PausedError = core.PausedError

// PauseInfo is a pause as the ledger keeps it (Ledger.Pause,
// LedgerState.Pause): By (who paused: an operator, a token, a replica;
// free text), Note (why; at most MaxPauseNote bytes), Until (when it
// lifts itself, decided on the store's clock; zero: at a resume), and At
// (when it was set, on the store's clock; set by the store).
type PauseInfo = core.PauseInfo

// MaxPauseNote is the longest PauseInfo.Note, in bytes (1000): a sentence
// or two; a longer text belongs in a ticket that the note names.
const MaxPauseNote = core.MaxPauseNote

// LedgerTTL is how long a ledger outlives its last claim or finish, 35
// days at least (up to a day more: the key's lifetime is renewed once a
// day, not at each claim and finish): long enough to judge a monthly
// schedule's missed tick after a downtime.
const LedgerTTL = core.LedgerTTL

// Defaults of a ledger's history (WithHistory): 100 entries, 30 days.
const (
	DefaultHistoryKeep   = core.DefaultHistoryKeep
	DefaultHistoryMaxAge = core.DefaultHistoryMaxAge
)

// A Store is the fleet's store on a lock.Client: the ledgers of its tasks,
// their histories, the groups of live members and the messages between
// the Clients of one store. It shares the Client's connections (one
// Pub/Sub connection for locks and ledgers alike), its lease time, key
// prefix, telemetry and id; Close the Client, not the Store. A Store is
// safe for concurrent use.
type Store struct{ c *core.Client }

// New returns the Store on locks. It sends nothing.
func New(locks *lock.Client) *Store { return &Store{c: locks.Core()} }

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
// other); a claim's lock excludes the lock.Client's Mutex of the same
// name. A Ledger is safe for concurrent use.
type Ledger struct{ g *core.Ledger }

// A LedgerOption configures a Ledger.
type LedgerOption = core.LedgerOption

// WithHistory sets how much of a ledger's history is kept: the latest keep
// entries, none older than maxAge. History shows exactly those; the store
// may hold a few more meanwhile (Redis trims the stream to keep
// approximately at each append, whole stream nodes of up to 100 entries
// at a time, and drops the entries older than maxAge once per a 16th of
// maxAge, at most an hour, rather than at each append: issue 23's lean
// scripts). Ledgers that share a history should share its retention. A
// zero keeps the default (DefaultHistoryKeep, DefaultHistoryMaxAge); a
// negative value is refused by Store.Ledger.
func WithHistory(keep int, maxAge time.Duration) LedgerOption {
	return core.WithHistory(keep, maxAge)
}

// WithSharedHistory makes the ledger keep its history in that of the
// ledger named id beside the same lock, so that the ledgers of one task
// (its scheduled and its manual runs, say) share one history.
func WithSharedHistory(id string) LedgerOption { return core.WithSharedHistory(id) }

// WithOwnLock makes the ledger's claims take a lock of its own named own,
// beside the lock the ledger is made on (prefix:{lockName}:own:<own>, in
// its hash slot; named lockName/own), instead of that lock: they exclude
// each other, not the lock's Mutex nor its other ledgers. The ledger lives
// beside its own lock, and its history stays the lock's (the ledger id's,
// or WithSharedHistory's), so that the ledgers of one task with own locks
// share one history. The scheduler gives each replica of a job that runs
// on every replica such a ledger, its replica's id as own. An own that is
// empty or holds { or } is refused by Store.Ledger (lock.ErrInvalid).
func WithOwnLock(own string) LedgerOption { return core.WithOwnLock(own) }

// WithDefinition makes each claim of the ledger record def in it (the
// field definition), a digest of what the claimant will run: the next
// claim's Claim.Definition tells it, so that claimants that run different
// versions of the task notice each other. It costs no round trip.
func WithDefinition(def string) LedgerOption { return core.WithDefinition(def) }

// WithBackfillClaims marks the ledger's claims as a backfill's: a claim of
// another ledger of the lock (a scheduled tick's) that finds one of them
// holding the lock waits for it, as under overlap queue, instead of
// answering busy, so that scheduled ticks come before a backfill's.
func WithBackfillClaims() LedgerOption { return core.WithBackfillClaims() }

// WithReplace makes the ledger's claims replace (overlap "replace"): a
// claim that finds the lock held by another owner for an earlier
// unfinished tick records its own tick in the ledger (LedgerState.Replace)
// in the same step, if it is later than the one there, tells the ledger's
// watchers (a TickEvent with Replace; delivery at most once), and waits
// for the lock as a claim that queues. The run of any tick before
// LedgerState.Replace is to end. It costs no round trip.
func WithReplace() LedgerOption { return core.WithReplace() }

// Ledger returns the ledger named id beside the lock named lockName, with
// its history (Ledger.History) kept as opts say. It returns lock.ErrInvalid
// for a bad lock name, an id that is empty or holds { or }, or a negative
// retention.
func (s *Store) Ledger(lockName, id string, opts ...LedgerOption) (*Ledger, error) {
	g, err := s.c.Ledger(lockName, id, opts...)
	if err != nil {
		return nil, err
	}
	return &Ledger{g}, nil
}

// FairLedger is Ledger whose claims take the lock in lock.Client.FairMutex
// order: claimants that wait for the lock (for the same tick, or for any
// tick when queue is true) keep a place in the lock's queue, take it in the
// order they came, and only the head is woken when it is released. The
// lock is the same as Ledger's: a Ledger and a FairLedger of one name
// exclude each other, but only FairLedger claims keep the order.
func (s *Store) FairLedger(lockName, id string, opts ...LedgerOption) (*Ledger, error) {
	g, err := s.c.FairLedger(lockName, id, opts...)
	if err != nil {
		return nil, err
	}
	return &Ledger{g}, nil
}

// Key is the ledger's Redis key.
func (g *Ledger) Key() string { return g.g.Key() }

// HistoryKey is the Redis key of the ledger's history: a Stream in the
// lock's hash slot, beside the ledger, expiring maxAge after its last
// entry (WithHistory; up to a 16th of maxAge, at most an hour, later: its
// lifetime is renewed once per that period, not at each append).
func (g *Ledger) HistoryKey() string { return g.g.HistoryKey() }

// A Claim is one owner's hold on a tick: it holds the ledger's lock, with
// its watchdog, until Finish. It is safe for concurrent use.
type Claim struct {
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
	// An owner id is the claiming Client's ID (lock.WithClientID), its
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
	// claimant, whatever their own clocks say. The scheduler measures a
	// job's start deadline on it.
	At time.Time
	// Params are the params of the ordered manual request claimed (see
	// Trigger; an empty map for none); nil if the tick claimed has no such
	// record (a request without params, or the store lost it).
	Params map[string]string
	// Requested reports whether the tick claimed has a record of its
	// request (Trigger's, with params or not), read in the claim's step: a
	// request without params has one, one the store lost has none.
	Requested bool

	cl *core.Claim
}

// Claim takes the lock for tick, unless the ledger says it is done. While
// another owner holds the lock for the same tick, Claim waits (no polling:
// unlock messages and the holder's TTL) and, when the holder finishes,
// returns ErrDone; if the holder gives the tick back or dies, Claim takes
// it, with Try counting on. While the lock is held for an earlier tick (or
// by a plain Lock), Claim waits for it if queue is true, else it returns
// lock.ErrLocked. It returns ErrDone, without taking the lock, when the
// tick or a later one is done or was claimed.
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
// from 25ms to 250ms, and the others go when it answers, instead of every
// claim retrying on its own. Failures to reach the store are ridden out
// while the wait lasts. When ctx ends, Claim returns its error, wrapped; lock.WithWait
// bounds the wait (then lock.ErrLocked); lock.WithWait(0) makes one
// attempt. lock.WithLease is refused: a claim is renewed by the watchdog
// until Finish.
func (g *Ledger) Claim(ctx context.Context, tick int64, queue bool, opts ...lock.AcquireOption) (*Claim, error) {
	cl, err := g.g.Claim(ctx, tick, queue, opts...)
	if err != nil {
		return nil, err
	}
	return &Claim{Tick: cl.Tick, Try: cl.Try, From: cl.From, Definition: cl.Definition, DefinitionBy: cl.DefinitionBy, At: cl.At, Params: cl.Params, Requested: cl.Requested, cl: cl}, nil
}

// Owner is the owner id under which the claim holds the lock: the
// claiming Client's ID (lock.WithClientID), its instance and a number.
func (cl *Claim) Owner() string { return cl.cl.Lease.Owner() }

// Token is the fencing token of the claim's lease on the lock.
func (cl *Claim) Token() int64 { return cl.cl.Lease.Token() }

// Context returns a context that ends when the ctx given to Claim ends,
// when the lock is lost (cause lock.ErrLockLost), or at Finish (cause
// lock.ErrReleased). Pass it to the work done for the tick.
func (cl *Claim) Context() context.Context { return cl.cl.Lease.Context() }

// Done is closed when the claim no longer holds the lock: finished or
// lost.
func (cl *Claim) Done() <-chan struct{} { return cl.cl.Lease.Done() }

// Err is nil while the claim holds the lock; then an error that wraps
// lock.ErrLockLost or lock.ErrReleased.
func (cl *Claim) Err() error { return cl.cl.Lease.Err() }

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

// Paused reports whether the claim's Finish paused the ledger: the
// Record's failure brought the failures in a row to its PauseAfter. Of
// the finishes of one ledger, only the one that paused it says so (a
// retry of it included); read it after Finish returned.
func (cl *Claim) Paused() bool { return cl.cl.Paused() }

// Finish writes rec to the ledger and releases the lock (every hold of the
// claim's lease) in one step, waking the lock's waiters.
//
// Call it on a live context (context.WithoutCancel with a timeout), like
// lock.Lease.Unlock. If the claim no longer holds the lock, Finish records
// nothing and returns an error wrapping lock.ErrNotHeld; the next claim of
// the tick finds it unfinished. A failure to reach the backend is retried,
// with a growing pause (up to 250ms), until ctx ends; then the lease ends
// all the same, the lock expires within its lease time, and the tick is
// unfinished. A retry that arrives after the lock expired still records a
// done tick if no one has claimed it since (the run ended while the lease
// held): the outage cost the lock, not the run. If a claim came first, the
// tick runs again: at least once.
func (cl *Claim) Finish(ctx context.Context, rec Record) error {
	return cl.cl.Finish(ctx, core.Record(rec))
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
	// (Record.PauseAfter), is that claim's owner id (Claim.Owner); else
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
// reads as the zero LedgerState. It returns lock.ErrBadKey if the key holds
// another type.
func (g *Ledger) State(ctx context.Context) (LedgerState, error) {
	st, err := g.g.State(ctx)
	return LedgerState(st), err
}

// ReplaceAsked reads the ledger's LedgerState.Replace alone (one read,
// lighter than State): the latest tick whose claim asked the run of an
// earlier tick to end (WithReplace), 0 if none.
func (g *Ledger) ReplaceAsked(ctx context.Context) (int64, error) { return g.g.ReplaceAsked(ctx) }

// Pause pauses the ledger (paused true) with p's By, Note and Until, or
// resumes it (p is not used): while it is paused, every Claim returns
// ErrPaused without taking the lock, on every Client of the store; the
// ticks claimed meanwhile count as seen. The store records when (its
// clock). A pause with an Until lifts itself then, decided on the store's
// clock: no resume is needed, and LedgerState no longer reports it. A
// pause replaces the one in force; a resume clears it and the failures in
// a row (LedgerState.Failures). It does not touch a claim under way. It
// returns lock.ErrInvalid, and changes nothing, for a Note longer than
// MaxPauseNote or an Until not after the store's clock; lock.ErrBadKey if
// the key is not a hash.
func (g *Ledger) Pause(ctx context.Context, paused bool, p PauseInfo) error {
	return g.g.Pause(ctx, paused, p)
}

// Trigger counts one more manual request for the task in g, records it
// in runs, the ledger that claims the requests' numbers (nil: g; else
// another ledger of the same lock, as the scheduler's ledger of manual
// runs), in the same step, and returns the count, which grows by one each
// time: a number to claim in runs (the scheduler's trigger). With params
// non-nil (an empty map too) the request is ordered: while it is not done,
// a Claim in runs of a later request claims it first (Claim.Tick), so that
// none is ever passed over, and the claim carries its params
// (Claim.Params; runs.Params reads them too, until the request is done).
// params nil: a request without parameters, not ordered. A client retry
// after a lost reply counts nothing again, until the request is done. It
// returns lock.ErrBadKey if a key is not a hash, lock.ErrInvalid if runs
// is of another lock.
func (g *Ledger) Trigger(ctx context.Context, runs *Ledger, params map[string]string) (int64, error) {
	var r *core.Ledger
	if runs != nil {
		r = runs.g
	}
	return g.g.Trigger(ctx, r, params)
}

// Params returns the params Trigger recorded with request n (an empty map
// for none: also for a request made without params, not ordered); nil if
// n has no record (the store lost it, or dropped it). They are kept while the request is not done
// (LedgerState.Done below n); once it is, a later Trigger drops them. It
// returns lock.ErrBadKey if the key is not a hash.
func (g *Ledger) Params(ctx context.Context, n int64) (map[string]string, error) {
	return g.g.Params(ctx, n)
}

// An Entry is one entry of a ledger's history: the fields its writer gave
// (Record.Entry, Ledger.Pass), under an id that the store assigns.
type Entry struct {
	// ID grows from entry to entry of one history: "<ms>-<seq>", the
	// store's time of the append in milliseconds and a sequence number
	// (a Redis Stream id).
	ID string
	// Time is when the entry was appended, on the store's clock.
	Time time.Time
	// Fields are the entry's fields, as written.
	Fields map[string]string
}

// ValidEntryID reports whether id has the form of an Entry's ID.
func ValidEntryID(id string) bool { return core.ValidEntryID(id) }

// History returns the ledger's latest history entries, newest first: at
// most limit, and only those older than before when before is not "" (an
// Entry's ID: the next page of a listing), of the entries the history
// keeps (WithHistory: the latest keep, none older than maxAge, on the
// store's clock; the store may hold a few more, which History leaves out). A ledger without history reads
// as none. It returns lock.ErrInvalid for a limit below 1 or a malformed
// before, and lock.ErrBadKey if the key holds another type.
func (g *Ledger) History(ctx context.Context, limit int, before string) ([]Entry, error) {
	in, err := g.g.History(ctx, limit, before)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, len(in))
	for i, e := range in {
		out[i] = Entry(e)
	}
	return out, nil
}

// Pass records that the ticks up to upTo were passed over, unclaimed: the
// ledger's Seen moves up to upTo, and entry, if not nil, is appended to its
// history, both in one step and only if Seen was below upTo and the
// store's clock is at least settled past upTo (a tick not yet due there,
// or due so recently that a claim of it may be on its way, is not passed
// over, whatever the caller's clock says; a negative settled lets the
// store's clock be that far before upTo). Of several callers that pass
// the same ticks, one does so and is told true; the others are told
// false, and nothing is written for them. (The scheduler passes the ticks
// missed while every replica was down.)
//
// An entry with the field "skip" records a tick skipped (busy, paused,
// excluded): skip names its cause, and the history coalesces consecutive
// skips of one cause. It is written once per tick: if upTo is above the
// latest tick passed with a skip entry (the ledger's field skipped; not
// Seen, which a claim that found the tick busy or paused moved already),
// and Seen moves up to upTo if it is below. The entry is then coalesced
// with the history's newest entry that has the same "skip" and "outcome"
// fields, among its latest 16 (and not older than the history's max
// age): that entry is replaced, in the same step, by this one with the
// field "count", the old count (1 when it had none) + 1, and "first", the
// old "first" or else its "tick"; the new entry's id is the newest. Skips
// of the same outcome and another cause in between (other replicas' busy
// ticks of a job that runs on every replica) do not break the run; any
// other entry in between starts a new run. Claim.Finish coalesces a
// Record.Entry with "skip" the same way. It returns lock.ErrBadKey if a
// key holds another type.
func (g *Ledger) Pass(ctx context.Context, upTo int64, settled time.Duration, entry map[string]string) (bool, error) {
	return g.g.Pass(ctx, upTo, settled, entry)
}

// Append appends entry to the ledger's history alone, leaving the ledger as
// it is: for what no Finish records, such as a run whose lock was lost
// (its Finish records nothing). It is not deduplicated: a retry after a
// lost reply may append it twice. It returns lock.ErrBadKey if the history
// key holds another type.
func (g *Ledger) Append(ctx context.Context, entry map[string]string) error {
	return g.g.Append(ctx, entry)
}

// A TickEvent is a tick of a ledger that a claimant claimed or finished.
type TickEvent struct {
	Tick int64
	// Done is true when the tick was recorded done, false when it was
	// given back (Record.Done false), to be claimed again, or claimed.
	Done bool
	// Claimed is true when the event is a claim of the tick: its run
	// begins on another Client. Done is false then.
	Claimed bool
	// Lease is a claim's lease time: its lock is kept for as long after
	// the claimant's last renewal (0 for other events).
	Lease time.Duration
	// Busy is true when a claim of the tick on another Client found the
	// lock held for an earlier tick, and let the tick go (a claim that
	// does not queue). Done is false then.
	Busy bool
	// Replace is true when a claim of the tick found the lock held for an
	// earlier tick and asked that run to end (WithReplace). Done is false
	// then.
	Replace bool
}

// Watch calls fn with each tick of the ledger that a claimant claims or
// finishes (Claim, Claim.Finish) on another Client of the store, and each
// this Client finishes, until stop is called or the Client is closed: the
// tick, and whether it was claimed, done, given back, or let go by a claim
// that found the lock held for an earlier tick.
//
// Claims and finishes are announced in batches on one channel of the
// store (prefix:ticks): a message per batch of a few milliseconds, to each
// Client that watches, not one per tick, so the store's cost per tick does
// not grow with the number of watchers. A Client announces the claims and
// finishes of the ledgers it watches itself. Delivery is at most once (a
// message sent while a connection is down is lost): a Watch is a hint, the
// ledger decides. While a Watch lasts, a Claim of a tick heard done returns
// lock.ErrDone without asking the store. fn runs on the goroutine that
// delivers the Client's messages (or on the finishing goroutine): it must
// return quickly. It returns lock.ErrClosed after Close; stop may be called
// more than once.
func (g *Ledger) Watch(fn func(TickEvent)) (stop func(), err error) {
	if fn == nil {
		return g.g.Watch(nil)
	}
	return g.g.Watch(func(ev core.TickEvent) { fn(TickEvent(ev)) })
}

// Heartbeat records member as a live member of group for ttl, on the
// store's clock (Redis TIME: the members' clocks do not matter), forgets
// the members whose time has passed, and returns the live members, sorted,
// member included. A member that stops calling it is gone within ttl of
// its last call; Leave removes it at once. Call it every ttl/3 or so to
// stay in.
//
// A group lives at prefix:members:{group}, beside the locks, and expires
// with its last member. It returns lock.ErrInvalid for an empty group or
// member, a group with braces, or a ttl under a millisecond; lock.ErrBadKey
// if the key holds another type; lock.ErrClosed after Close.
func (s *Store) Heartbeat(ctx context.Context, group, member string, ttl time.Duration) ([]string, error) {
	return s.c.Heartbeat(ctx, group, member, ttl)
}

// Leave removes member from group at once. It returns the errors of
// Heartbeat.
func (s *Store) Leave(ctx context.Context, group, member string) error {
	return s.c.Leave(ctx, group, member)
}

// Publish sends payload to the subscribers of topic on every Client of the
// same store and key prefix, this one's included (Redis Pub/Sub, or the
// lock.MemoryStore), and returns how many Clients received it (on Redis,
// the connections subscribed to the topic, as PUBLISH counts them; on a
// Cluster, those of the node it was sent to). Delivery is at most once: a
// subscriber whose connection is down at that moment misses it. ctx bounds
// the call. It returns lock.ErrInvalid for an empty topic or one with
// braces, and lock.ErrClosed after Close.
func (s *Store) Publish(ctx context.Context, topic, payload string) (int64, error) {
	return s.c.Publish(ctx, topic, payload)
}

// Subscribed reports whether the store has confirmed every subscription of
// Subscribe and Ledger.Watch in place on the Client: a message published
// from then on reaches them (on Redis, the server answered each SUBSCRIBE;
// on the memory backend, at once).
func (s *Store) Subscribed() bool { return s.c.Subscribed() }

// Subscribe calls fn with the payload of each message published on topic
// (Publish, from any Client of the store and key prefix) until stop is
// called or the Client is closed. On Redis it shares the Client's Pub/Sub
// connection; the subscription is in place once the server confirms it,
// shortly after Subscribe returns, and it is renewed after a reconnect
// (messages sent meanwhile are lost). fn runs on the Client's dispatcher
// goroutine, one message at a time: it must return quickly, handing the
// payload to a goroutine of the caller's. It returns lock.ErrInvalid for an
// empty topic or one with braces, and lock.ErrClosed after Close; stop may
// be called more than once.
func (s *Store) Subscribe(topic string, fn func(payload string)) (stop func(), err error) {
	return s.c.Subscribe(topic, fn)
}
