package fleet_test

import (
	"errors"
	"testing"
	"time"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// Publish reaches the subscribers of every Client of the store, the
// publisher's own included, until they stop.
func TestPublishSubscribe(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			cs := locktest.NewStore(t, be).NewClients(t, 2)
			ctx := testkit.Context(t)
			got := make(chan string, 10)
			stopA, err := fleet.New(cs[0]).Subscribe("control", func(p string) { got <- "a:" + p })
			if err != nil {
				t.Fatal(err)
			}
			stopB, err := fleet.New(cs[1]).Subscribe("control", func(p string) { got <- "b:" + p })
			if err != nil {
				t.Fatal(err)
			}
			// The Redis subscription is confirmed shortly after Subscribe:
			// publish until both have heard one.
			seen := map[string]bool{}
			deadline := time.Now().Add(5 * time.Second)
			for !seen["a:hello"] || !seen["b:hello"] {
				if time.Now().After(deadline) {
					t.Fatalf("after 5s the subscribers heard %v", seen)
				}
				if _, err := fleet.New(cs[0]).Publish(ctx, "control", "hello"); err != nil {
					t.Fatal(err)
				}
				select {
				case p := <-got:
					seen[p] = true
				case <-time.After(50 * time.Millisecond):
				}
			}
			stopB()
			stopB() // twice is fine
			if _, err := fleet.New(cs[1]).Publish(ctx, "control", "again"); err != nil {
				t.Fatal(err)
			}
			// Late copies of "hello" may still come; b must not hear "again".
			for p := ""; p != "a:again"; {
				select {
				case p = <-got:
					if p == "b:again" {
						t.Fatal("b heard a message after it stopped")
					}
				case <-time.After(5 * time.Second):
					t.Fatal("a did not hear the second message")
				}
			}
			stopA()
			if _, err := fleet.New(cs[0]).Subscribe("", func(string) {}); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("empty topic: %v, want ErrInvalid", err)
			}
			if _, err := fleet.New(cs[0]).Publish(ctx, "a{b}", "x"); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("topic with braces: %v, want ErrInvalid", err)
			}
		})
	}
}

// A paused ledger refuses claims on every Client until it is resumed; a
// trigger counts up.
func TestLedgerPauseAndTrigger(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			cs := locktest.NewStore(t, be).NewClients(t, 2)
			ctx := testkit.Context(t)
			ga, err := fleet.New(cs[0]).Ledger("job", "job")
			if err != nil {
				t.Fatal(err)
			}
			gb, _ := fleet.New(cs[1]).Ledger("job", "job")
			if err := ga.Pause(ctx, true, fleet.PauseInfo{}); err != nil {
				t.Fatal(err)
			}
			if _, err := gb.Claim(ctx, 10, false); !errors.Is(err, fleet.ErrPaused) {
				t.Fatalf("claim of a paused ledger: %v, want ErrPaused", err)
			}
			st, err := gb.State(ctx)
			if err != nil || !st.Paused || st.Seen != 10 || st.Held {
				t.Fatalf("state while paused: %+v, %v; want paused, seen 10, not held", st, err)
			}
			if err := gb.Pause(ctx, false, fleet.PauseInfo{}); err != nil {
				t.Fatal(err)
			}
			cl, err := ga.Claim(ctx, 11, false)
			if err != nil {
				t.Fatalf("claim after resume: %v", err)
			}
			if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
				t.Fatal(err)
			}
			for want := int64(1); want <= 3; want++ {
				n, err := gb.Trigger(ctx, nil, nil)
				if err != nil || n != want {
					t.Fatalf("Trigger = %d, %v; want %d", n, err, want)
				}
			}
			if st, _ := ga.State(ctx); st.Triggers != 3 || st.Paused {
				t.Fatalf("state: %+v; want 3 triggers, not paused", st)
			}
		})
	}
}

// Subscribed is false while the server has not confirmed a subscription
// (here it is paused), and once it is true, a message published once
// reaches the subscriber: what a replica's readiness rests on.
func TestSubscribedOnceConfirmed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c, err := lock.New(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := fleet.New(c)
	if !st.Subscribed() {
		t.Fatal("Subscribed is false with no subscription")
	}
	got := make(chan string, 10)
	srv.Pause()
	stop, err := st.Subscribe("control", func(p string) { got <- p })
	if err != nil {
		srv.Resume()
		t.Fatal(err)
	}
	defer stop()
	// A paused server cannot have answered: this is no race.
	if st.Subscribed() {
		srv.Resume()
		t.Fatal("Subscribed is true before the paused server confirmed the subscription")
	}
	srv.Resume()
	testkit.Eventually(t, 10*time.Second, "the subscription confirmed", st.Subscribed)
	if _, err := st.Publish(testkit.Context(t), "control", "once"); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p != "once" {
			t.Fatalf("heard %q, want %q", p, "once")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a message published once Subscribed was true was not heard")
	}
}
