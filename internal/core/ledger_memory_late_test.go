package core

import (
	"context"
	"testing"
	"time"
)

// The memory backend's twin of TestFinishScriptAfterExpiry: a finish that
// comes after its lock expired records a done tick if no one has claimed it
// since, and nothing if someone has.
func TestMemoryFinishAfterExpiry(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, reclaimed := range []bool{false, true} {
		store := NewMemoryStore()
		c, err := store.NewClient(WithLeaseTime(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		g, err := c.Ledger("late", "job")
		if err != nil {
			t.Fatal(err)
		}
		const tick = 1000
		cl, err := g.Claim(ctx, tick, false)
		if err != nil {
			t.Fatal(err)
		}
		owner := cl.Lease.Owner()
		store.mu.Lock()
		delete(store.locks, cl.Lease.k.lock) // the lease ran out
		store.mu.Unlock()
		if reclaimed {
			other, err := store.NewClient(WithLeaseTime(time.Second))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			og, err := other.Ledger("late", "job")
			if err != nil {
				t.Fatal(err)
			}
			if ocl, err := og.Claim(ctx, tick, false); err != nil || ocl.Try != 2 {
				t.Fatalf("claim by another after the expiry: %v, %v; want try 2", ocl, err)
			}
		}
		n, err := c.be.finish(ctx, cl.Lease.k, g.ref(), owner, 1, tick, finishArgs{done: true, outcome: "ran", tries: 1, seen: tick})
		if err != nil {
			t.Fatal(err)
		}
		st, err := g.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case !reclaimed && (n != relReleased || st.Done != tick):
			t.Errorf("late finish, tick not claimed since: %d, done %d; want released, done %d", n, st.Done, tick)
		case reclaimed && (n != relNotHeld || st.Done != 0):
			t.Errorf("late finish after another's claim: %d, done %d; want not held, nothing done", n, st.Done)
		}
		_ = cl.Lease.Unlock(ctx)
	}
}
