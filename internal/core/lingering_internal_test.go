package core

import (
	"context"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
)

// An unlock that lands after a waiter's first attempt on a lingering
// subscription, and before the waiter joins its queue, still wakes it: it
// does not sleep for the holder's TTL.
func TestUnlockBetweenAttemptAndQueue(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	newC := func() *Client {
		c, err := New(srv.Client())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	a, b := newC(), newC()
	linger := func() {
		// b waits once, so that its subscription to "x" lingers.
		la, err := a.Mutex("x").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan *Lease, 1)
		go func() {
			lb, err := b.Mutex("x").Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- lb
		}()
		for deadline := time.Now().Add(5 * time.Second); b.Waiting("x") == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("b does not wait for x after 5s")
			}
		}
		if err := la.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if lb := <-got; lb != nil {
			_ = lb.Unlock(ctx)
		}
		if b.be.subscribed(b.Mutex("x").(*mutex).k) == nil {
			t.Fatal("b's subscription does not linger")
		}
	}

	for _, kind := range []string{"mutex", "ledger"} {
		t.Run(kind, func(t *testing.T) {
			linger()
			held, err := a.Mutex("x").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			testHookBeforeQueue = func(string) {
				testHookBeforeQueue = nil
				b.mu.Lock()
				w := b.watches[newKeys(b.opt.prefix, "x").channel]
				seen := w.unlock
				b.mu.Unlock()
				if err := held.Unlock(ctx); err != nil {
					t.Error(err)
				}
				// Let b's dispatcher take the unlock message before b queues.
				deadline := time.Now().Add(5 * time.Second)
				for {
					b.mu.Lock()
					n := w.unlock
					b.mu.Unlock()
					if n != seen || time.Now().After(deadline) {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
			defer func() { testHookBeforeQueue = nil }()
			start := time.Now()
			if kind == "mutex" {
				l, err := b.Mutex("x").Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				_ = l.Unlock(ctx)
			} else {
				g, err := b.Ledger("x", "j")
				if err != nil {
					t.Fatal(err)
				}
				cl, err := g.Claim(ctx, 1, true)
				if err != nil {
					t.Fatal(err)
				}
				_ = cl.Finish(ctx, Record{Done: true})
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("the waiter slept %v: the unlock before it queued was missed", d)
			}
		})
	}
}
