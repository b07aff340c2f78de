package core

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// TestShortLeasesCostNoGoroutineNorTimer: a lease released before its
// watchdog's start has had no goroutine, and a loop of such leases sets
// the Client's start timer once, not once per lease; a lease held longer
// gets its watchdog, which keeps it.
func TestShortLeasesCostNoGoroutineNorTimer(t *testing.T) {
	c, err := NewMemory() // the default lease: the watchdog starts 5s after the acquisition
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	before := runtime.NumGoroutine()
	var leases []*Lease
	for i := range 50 {
		l, err := c.Mutex(fmt.Sprintf("short-%d", i)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	if n := runtime.NumGoroutine() - before; n >= 25 {
		t.Errorf("50 fresh leases added %d goroutines, want none of their own", n)
	}
	for _, l := range leases {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	mu := c.Mutex("loop")
	pair := func() {
		t.Helper()
		l, err := mu.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pair()
	c.renew.mu.Lock()
	armed := c.renew.armed
	c.renew.mu.Unlock()
	for range 100 {
		pair()
	}
	c.renew.mu.Lock()
	again, pending := c.renew.armed, len(c.renew.pending)
	c.renew.mu.Unlock()
	if pending != 0 {
		t.Errorf("%d leases wait for their watchdog after every lease was released", pending)
	}
	if !again.Equal(armed) {
		t.Errorf("the start timer moved from %v to %v: set again for a lease due later", armed, again)
	}

	// Held for three lease times, a lease lives on its watchdog.
	short, err := NewMemory(WithLeaseTime(600 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	l, err := short.Mutex("held").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-l.Done():
		t.Fatalf("lease ended while held: %v", l.Err())
	case <-time.After(1800 * time.Millisecond):
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("unlock after three lease times: %v", err)
	}
}
