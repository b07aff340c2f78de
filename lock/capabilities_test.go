package lock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// coreOnly is a backend with the reentrant lock and nothing else: its
// embedded field's type is the core interface, so no capability is found
// by type assertion.
type coreOnly struct{ backend }

// A backend that lacks a capability keeps the reentrant lock working, and
// every kind and call that needs the missing one fails with an error that
// wraps errors.ErrUnsupported and says what is missing, sending nothing.
func TestBackendWithoutCapabilities(t *testing.T) {
	t.Parallel()
	c, err := NewMemoryStore().NewClient()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.setBackend(coreOnly{c.be})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := c.Mutex("m").Lock(ctx)
	if err != nil {
		t.Fatalf("Mutex on the core alone: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForceUnlock(ctx, "m"); err != nil {
		t.Fatalf("ForceUnlock on the core alone: %v", err)
	}

	lockErr := func(l Locker) error { _, err := l.Lock(ctx); return err }
	_, ledgerErr := c.Ledger("j", "j")
	_, fairLedgerErr := c.FairLedger("j", "j")
	_, subErr := c.Subscribe("t", func(string) {})
	_, pubErr := c.Publish(ctx, "t", "x")
	_, locksErr := c.Locks(ctx)
	_, hbErr := c.Heartbeat(ctx, "g", "me", time.Second)
	for what, err := range map[string]error{
		"fair locks":       lockErr(c.FairMutex("f")),
		"read-write locks": lockErr(c.RWMutex("rw")),
		"read locks":       lockErr(c.RWMutex("rw").RLocker()),
		"semaphores":       lockErr(c.Semaphore("s", 2)),
		"ledgers":          ledgerErr,
		"fair ledgers":     fairLedgerErr,
		"subscribe":        subErr,
		"publish":          pubErr,
		"locks":            locksErr,
		"heartbeat":        hbErr,
	} {
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s on the core alone: %v, want an error wrapping errors.ErrUnsupported", what, err)
		}
	}
}
