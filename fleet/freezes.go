package fleet

import (
	"context"
	"time"

	"github.com/lockcron/lockcron/internal/core"
)

// A Freeze is a fleet-wide stop of the ticks of the jobs whose names match
// Jobs (a path.Match pattern), from Created until Until, both on the
// store's clock (Redis TIME), with a note that says why. Its ID is "f1",
// "f2", ...: never given twice by one store and key prefix.
type Freeze = core.Freeze

// ErrNoFreeze: Store.DeleteFreeze of an id that names no freeze, or one
// that has ended.
var ErrNoFreeze = core.ErrNoFreeze

// AddFreeze records a freeze of the jobs matching pattern until until,
// with note, and returns it with its id and its start (the store's time).
// The freezes live at prefix:freezes:{freezes} (a hash, which expires
// with its last freeze), their ids' counter beside it, and the nonces of
// the adds and dels of the last 30 seconds, so that a Redis client's retry
// of one (after a lost reply) makes no second freeze and is answered as
// the first call was; a freeze whose until has passed is dropped by the
// next call. until must be after the
// store's time: else it returns lock.ErrInvalid, and nothing is added. It
// returns lock.ErrBadKey if the key holds another type, and lock.ErrClosed
// after Close.
func (s *Store) AddFreeze(ctx context.Context, pattern string, until time.Time, note string) (Freeze, error) {
	return s.c.AddFreeze(ctx, pattern, until, note)
}

// DeleteFreeze ends the freeze id at once. It returns ErrNoFreeze if there
// is no such freeze (or it has ended), and the errors of AddFreeze; a
// retry of a call that ended it answers success.
func (s *Store) DeleteFreeze(ctx context.Context, id string) error {
	return s.c.DeleteFreeze(ctx, id)
}

// Freezes returns the freezes that have not ended on the store's clock, in
// the order they were made, and that clock's time. One round trip.
func (s *Store) Freezes(ctx context.Context) ([]Freeze, time.Time, error) {
	return s.c.Freezes(ctx)
}
