package core

import (
	"fmt"
	"strings"
)

// WithOwnLock makes the ledger's claims take a lock of its own named own,
// beside the lock the ledger is made on, instead of that lock: its keys
// are prefix:{lockName}:own:<own> and the like, in the lock's hash slot,
// and its name (in errors, spans and metrics) is lockName/own. Claims of
// the ledger then exclude each other (and the other ledgers with the same
// own lock), but not the lock's Mutex nor its other ledgers. The ledger
// itself lives beside its own lock, and its history stays the lock's:
// prefix:{lockName}:ledger:<id>:history (or WithSharedHistory's), so that
// ledgers with own locks of one task share the task's history. The
// scheduler gives each replica of a job that runs on every replica a
// ledger so (its replica's id as own). own must not be empty nor hold {
// or } (Client.Ledger returns ErrInvalid).
func WithOwnLock(own string) LedgerOption {
	return func(g *Ledger) { g.own = &own }
}

// ownMutex is the mutex a ledger's claims take: the lock named lockName,
// or, with own set (WithOwnLock), the lock of its own beside it.
func ownMutex(c *Client, lockName string, own *string) (*mutex, error) {
	switch {
	case own == nil:
		return newMutex(c, lockName), nil
	case strings.TrimSpace(*own) == "" || strings.ContainsAny(*own, "{}"):
		return nil, fmt.Errorf("lock %q: own lock %q: empty, or holds { or }: %w", lockName, *own, ErrInvalid)
	}
	return mutexAt(c, keysAt(lockName+"/"+*own, base(c.opt.prefix, lockName)+":own:"+*own)), nil
}
