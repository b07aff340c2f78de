package fleet

import (
	"context"
	"time"

	"github.com/lockcron/lockcron/internal/core"
)

// A Backfill is a run of a task's past ticks, as the store keeps it beside
// the task's ledger (Ledger.AddBackfill): Fields are what the add was
// given; State is BackfillRunning, BackfillCancelled or BackfillFinished;
// Done counts the ticks handled, up to Last; Created and Ended are on the
// store's clock (Ended zero while it runs); CancelledBy is who cancelled it.
type Backfill = core.Backfill

// The states of a Backfill.
const (
	BackfillRunning   = core.BackfillRunning
	BackfillCancelled = core.BackfillCancelled
	BackfillFinished  = core.BackfillFinished
)

// BackfillKeep is how long a backfill is kept once it has ended (7 days).
const BackfillKeep = core.BackfillKeep

// ErrNoBackfill: CancelBackfill or BackfillProgress of an id that names no
// backfill of the ledger (or one dropped BackfillKeep after it ended).
var ErrNoBackfill = core.ErrNoBackfill

// ErrBackfillEnded: CancelBackfill of a backfill that has finished.
var ErrBackfillEnded = core.ErrBackfillEnded

// ErrBackfillOverlaps: AddBackfill of a range that overlaps a running
// backfill's; the error is a *BackfillOverlapError, which names it.
var ErrBackfillOverlaps = core.ErrBackfillOverlaps

// A BackfillOverlapError is AddBackfill's refusal of a range that overlaps
// that of the running backfill Running.
type BackfillOverlapError = core.BackfillOverlapError

// AddBackfill records the backfill id of the ledger's task, running, with
// fields (free names but state, created, ended, done, last, cancelled_by
// and nonce; id has no "/"). The ledger's backfills live in one hash at
// BackfillsKey, in the lock's hash slot, which lives LedgerTTL after the
// last change; a backfill is dropped BackfillKeep after it ended. A Redis
// client's retry of the call (after a lost reply) changes nothing and
// answers success, told by the call's nonce from another add of the id.
// Fields from and to (ms), when given, are its range: one that overlaps a
// running backfill's is refused (*BackfillOverlapError), in the same step.
// It returns lock.ErrInvalid for an id taken or malformed, lock.ErrBadKey if
// the key holds another type, lock.ErrClosed after Close.
func (g *Ledger) AddBackfill(ctx context.Context, id string, fields map[string]string) error {
	return g.g.AddBackfill(ctx, id, fields)
}

// CancelBackfill marks the backfill id cancelled by by (it stays so if it
// was), and in the same step pauses the ledger whose id is ledger (the
// backfill's own, of the same lock): no claim of it is granted after the
// cancel, not even one that waited for the lock. It returns ErrNoBackfill,
// ErrBackfillEnded for one that finished, and the errors of AddBackfill.
func (g *Ledger) CancelBackfill(ctx context.Context, id, by, ledger string) error {
	return g.g.CancelBackfill(ctx, id, by, ledger)
}

// BackfillProgress records that the backfill id handled done ticks up to
// last (only if last is later than the one recorded), and finishes it if
// finished and it is running, and that its next tick may start next from
// now (Backfill.Next, on the store's clock); it returns its state. It
// returns ErrNoBackfill and the errors of AddBackfill.
func (g *Ledger) BackfillProgress(ctx context.Context, id string, done, last int64, finished bool, next time.Duration) (string, error) {
	return g.g.BackfillProgress(ctx, id, done, last, finished, next)
}

// Backfills returns the ledger's backfills, oldest first, and the store's
// time. One round trip.
func (g *Ledger) Backfills(ctx context.Context) ([]Backfill, time.Time, error) {
	return g.g.Backfills(ctx)
}

// BackfillsKey is the Redis key of the ledger's backfills: a hash in the
// lock's hash slot.
func (g *Ledger) BackfillsKey() string { return g.g.BackfillsKey() }

// A BackfillIndexEntry is an entry of the fleet's index of running
// backfills: the backfill's job, and when it was indexed (the store's
// clock).
type BackfillIndexEntry = core.BackfillIndexEntry

// IndexBackfill records in the fleet's index of running backfills (a hash
// at prefix:backfills:{backfills}) that the backfill id is job's. The index
// is a hint that lets the replicas read a job's backfills only when it
// names them; its readers drop the entries of backfills that ended or
// were never added. It returns lock.ErrBadKey if the key holds another
// type, lock.ErrClosed after Close.
func (s *Store) IndexBackfill(ctx context.Context, id, job string) error {
	return s.c.IndexBackfill(ctx, id, job)
}

// UnindexBackfill drops the backfill id from the fleet's index. It returns
// the errors of IndexBackfill.
func (s *Store) UnindexBackfill(ctx context.Context, id string) error {
	return s.c.UnindexBackfill(ctx, id)
}

// BackfillIndex returns the fleet's index of running backfills, by id, and
// the store's time: one round trip. It returns the errors of
// IndexBackfill.
func (s *Store) BackfillIndex(ctx context.Context) (map[string]BackfillIndexEntry, time.Time, error) {
	return s.c.BackfillIndex(ctx)
}
