package core

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Defaults of a ledger's history (WithHistory).
const (
	DefaultHistoryKeep   = 100
	DefaultHistoryMaxAge = 30 * 24 * time.Hour
)

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

// A LedgerOption configures a Ledger.
type LedgerOption func(*Ledger)

// WithHistory sets how much of a ledger's history is kept: the latest keep
// entries, none older than maxAge. History shows exactly those; the store
// may hold a few more meanwhile (Redis trims the stream to keep
// approximately at each append, whole stream nodes of up to 100 entries
// at a time, and drops the entries older than maxAge once per a 16th of
// maxAge, at most an hour, rather than at each append: issue 23's lean
// scripts). Ledgers that share a history should share its retention. A
// zero keeps the default (DefaultHistoryKeep, DefaultHistoryMaxAge); a
// negative value is refused by Client.Ledger.
func WithHistory(keep int, maxAge time.Duration) LedgerOption {
	return func(g *Ledger) {
		if keep != 0 {
			g.keep = keep
		}
		if maxAge != 0 {
			g.maxAge = maxAge
		}
	}
}

// WithSharedHistory makes the ledger keep its history in that of the
// ledger named id beside the same lock, so that the ledgers of one task
// (its scheduled and its manual runs, say) share one history.
func WithSharedHistory(id string) LedgerOption {
	return func(g *Ledger) { g.histID = id }
}

// WithDefinition makes each claim of the ledger record def in it (the
// field definition), a digest of what the claimant will run: the next
// claim's Claim.Definition tells it, so that claimants that run different
// versions of the task notice each other. It costs no round trip.
func WithDefinition(def string) LedgerOption {
	return func(g *Ledger) { g.def = def }
}

var entryID = regexp.MustCompile(`^[0-9]{1,20}-[0-9]{1,20}$`)

// ValidEntryID reports whether id has the form of an Entry's ID.
func ValidEntryID(id string) bool { return entryID.MatchString(id) }

// HistoryKey is the Redis key of the ledger's history: a Stream in the
// lock's hash slot, beside the ledger, expiring maxAge after its last
// entry (WithHistory; up to a 16th of maxAge, at most an hour, later: its
// lifetime is renewed once per that period, not at each append).
func (g *Ledger) HistoryKey() string { return g.hist }

// History returns the ledger's latest history entries, newest first: at
// most limit, and only those older than before when before is not "" (an
// Entry's ID: the next page of a listing), of the entries the history
// keeps (WithHistory: the latest keep, none older than maxAge, on the
// store's clock; the store may hold a few more, which History leaves out). A ledger without history reads
// as none. It returns ErrInvalid for a limit below 1 or a malformed
// before, and ErrBadKey if the key holds another type.
func (g *Ledger) History(ctx context.Context, limit int, before string) ([]Entry, error) {
	if limit < 1 {
		return nil, fmt.Errorf("lock %q: ledger %q: history limit %d: must be at least 1: %w", g.m.k.name, g.id, limit, ErrInvalid)
	}
	if before != "" && !ValidEntryID(before) {
		return nil, fmt.Errorf("lock %q: ledger %q: history before %q: not an entry id: %w", g.m.k.name, g.id, before, ErrInvalid)
	}
	if g.c.isClosed() {
		return nil, fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	ents, err := g.c.be.history(ctx, g.ref(), limit, before)
	if err != nil {
		if errors.Is(err, ErrBadKey) || strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, g.historyTypeErr()
		}
		return nil, fmt.Errorf("lock %q: ledger %q: history: %w", g.m.k.name, g.id, err)
	}
	return ents, nil
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
// Record.Entry with "skip" the same way. It returns ErrBadKey if a key
// holds another type.
func (g *Ledger) Pass(ctx context.Context, upTo int64, settled time.Duration, entry map[string]string) (bool, error) {
	if upTo < 1 {
		return false, fmt.Errorf("lock %q: ledger %q: pass up to %d: a tick is above 0: %w", g.m.k.name, g.id, upTo, ErrInvalid)
	}
	return g.pass(ctx, upTo, settled, entry)
}

// Append appends entry to the ledger's history alone, leaving the ledger as
// it is: for what no Finish records, such as a run whose lock was lost
// (its Finish records nothing). It is not deduplicated: a retry after a
// lost reply may append it twice. It returns ErrBadKey if the history key
// holds another type.
func (g *Ledger) Append(ctx context.Context, entry map[string]string) error {
	if len(entry) == 0 {
		return fmt.Errorf("lock %q: ledger %q: append: an empty entry: %w", g.m.k.name, g.id, ErrInvalid)
	}
	_, err := g.pass(ctx, 0, 0, entry)
	return err
}

func (g *Ledger) pass(ctx context.Context, upTo int64, settled time.Duration, entry map[string]string) (bool, error) {
	if g.c.isClosed() {
		return false, fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	n, err := g.c.be.ledgerPass(ctx, g.ref(), upTo, settled, entry)
	switch {
	case err != nil:
		return false, g.ledgerErr(err)
	case n == finishLedgerType:
		return false, fmt.Errorf("lock %q: key %q holds another type, not a ledger hash: %w", g.m.k.name, g.key, ErrBadKey)
	case n == historyType:
		return false, g.historyTypeErr()
	}
	return n == 1, nil
}

// historyType is the scripts' status for a history key of another type.
const historyType = -8

func (g *Ledger) historyTypeErr() error {
	return fmt.Errorf("lock %q: key %q holds another type, not a ledger's history stream: %w", g.m.k.name, g.HistoryKey(), ErrBadKey)
}
