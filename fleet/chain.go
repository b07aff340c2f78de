package fleet

import (
	"context"
	"time"

	"github.com/lockcron/lockcron/internal/core"
)

// A ChainRun is a finished run of a ledger's tick, as its chain record
// keeps it for the runs that follow it (Record.Chain, Ledger.ChainRuns).
type ChainRun = core.ChainRun

// ChainRuns returns the runs of g's ticks after tick after that finished
// done with Record.Chain, oldest first: at most the latest 1000, for as
// long as the ledger lives (LedgerTTL). The chain record lives beside the
// ledger, in its hash slot, and Claim.Finish adds to it in the same step
// as it records the finish, so that a run that follows another is never
// lost to a crash between the two. It returns an error wrapping
// lock.ErrBadKey if the record is of another type.
func (g *Ledger) ChainRuns(ctx context.Context, after int64) ([]ChainRun, error) {
	return g.g.ChainRuns(ctx, after)
}

// ChainFloor sets the ledger's chain floor to now, on the store's clock,
// if it has none, and returns the floor it has: for a job that follows
// others, the time before which its parents' finishes are not its to
// follow (the first time one of its replicas read them), so that a new child, or one whose ledger was
// lost, does not run its parents' past runs. It lives as long as the
// ledger (LedgerTTL); a ledger that does not exist is made. It returns
// lock.ErrBadKey if the key is not a hash.
func (g *Ledger) ChainFloor(ctx context.Context) (time.Time, error) {
	return g.g.ChainFloor(ctx)
}
