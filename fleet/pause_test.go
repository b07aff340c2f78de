package fleet_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// A pause keeps who, why, when and until; it lifts itself at until, on
// every Client, with no resume; bad input is refused with nothing changed
// (the store's scripts, pause.lua and claim.lua, and the memory backend).
func TestPauseUntil(t *testing.T) {
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
			until := time.Now().Add(2 * time.Second).Truncate(time.Millisecond)
			before := time.Now().Add(-time.Second) // the store's clock may be a little behind
			if err := ga.Pause(ctx, true, fleet.PauseInfo{By: "alice", Note: "release freeze", Until: until}); err != nil {
				t.Fatal(err)
			}
			_, err = gb.Claim(ctx, 10, false)
			var pe *fleet.PausedError
			if !errors.Is(err, fleet.ErrPaused) || !errors.As(err, &pe) || !pe.Until.Equal(until) {
				t.Fatalf("claim of a paused ledger: %v, want a PausedError until %v", err, until)
			}
			st, err := gb.State(ctx)
			if err != nil || !st.Paused || st.Pause.By != "alice" || st.Pause.Note != "release freeze" || !st.Pause.Until.Equal(until) ||
				st.Pause.At.Before(before) || st.Pause.At.After(time.Now().Add(time.Second)) {
				t.Fatalf("state while paused: %+v, %v; want paused by alice, its note, until %v, at about now", st, err, until)
			}

			// Bad input changes nothing.
			for name, p := range map[string]fleet.PauseInfo{
				"until in the past": {By: "bob", Note: "late", Until: time.Now().Add(-time.Minute)},
				"note of 10 kB":     {By: "bob", Note: strings.Repeat("x", 10_000)},
				"note of 1001 B":    {By: "bob", Note: strings.Repeat("x", fleet.MaxPauseNote+1)},
			} {
				if err := gb.Pause(ctx, true, p); !errors.Is(err, lock.ErrInvalid) {
					t.Errorf("%s: %v, want ErrInvalid", name, err)
				}
				if st2, err := ga.State(ctx); err != nil || st2.Pause != st.Pause {
					t.Errorf("%s: the pause is now %+v (%v), want it unchanged, %+v", name, st2.Pause, err, st.Pause)
				}
			}

			// At until the pause is over, on the store's clock, for every
			// Client: claims go through with no resume.
			if _, err := ga.Claim(ctx, 11, false); !errors.Is(err, fleet.ErrPaused) {
				t.Fatalf("claim before until: %v, want ErrPaused", err)
			}
			var cl *fleet.Claim
			testkit.Eventually(t, 10*time.Second, "a claim after until", func() bool {
				cl, err = gb.Claim(ctx, 12, false)
				return err == nil
			})
			if time.Now().Before(until.Add(-time.Second)) {
				t.Errorf("claimed at %v, long before until %v", time.Now(), until)
			}
			if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
				t.Fatal(err)
			}
			if st, err := ga.State(ctx); err != nil || st.Paused || st.Pause != (fleet.PauseInfo{}) {
				t.Errorf("state after until: %+v, %v; want not paused, no pause", st, err)
			}
		})
	}
}

// Failed finishes in a row are counted in the ledger, whichever Client
// made them; a success sets the count back to 0; the finish that brings it
// to PauseAfter pauses the ledger, once, and says so; a resume sets it
// back to 0.
func TestPauseAfterFailures(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			cs := locktest.NewStore(t, be).NewClients(t, 2)
			ctx := testkit.Context(t)
			var gs [2]*fleet.Ledger
			for i := range gs {
				g, err := fleet.New(cs[i]).Ledger("job", "job")
				if err != nil {
					t.Fatal(err)
				}
				gs[i] = g
			}
			tick := int64(100)
			// run claims the next tick on Client i and finishes it failed
			// or not; it reports whether the finish paused the ledger.
			run := func(i int, failed bool) bool {
				t.Helper()
				tick++
				cl, err := gs[i].Claim(ctx, tick, false)
				if err != nil {
					t.Fatalf("claim of tick %d: %v", tick, err)
				}
				rec := fleet.Record{Done: true, Outcome: "ran", Tries: 1, Succeeded: !failed, Failed: failed, PauseAfter: 3,
					Pause: fleet.PauseInfo{By: "replica:r" + string(rune('a'+i)), Note: "paused after 3 failed runs in a row"}}
				if failed {
					rec.Outcome = "failed"
				}
				if err := cl.Finish(ctx, rec); err != nil {
					t.Fatal(err)
				}
				return cl.Paused()
			}
			failures := func(want int) {
				t.Helper()
				if st, err := gs[0].State(ctx); err != nil || st.Failures != want || st.Paused {
					t.Fatalf("state: %+v, %v; want %d failures in a row, not paused", st, err, want)
				}
			}
			if run(0, true) || run(1, true) {
				t.Fatal("paused after fewer than 3 failures")
			}
			failures(2)
			if run(0, false) {
				t.Fatal("paused by a success")
			}
			failures(0)
			if run(1, true) || run(0, true) {
				t.Fatal("paused after fewer than 3 failures since the success")
			}
			failures(2)
			if !run(1, true) {
				t.Fatal("the third failure in a row did not pause the ledger")
			}
			st, err := gs[0].State(ctx)
			if err != nil || !st.Paused || st.Failures != 3 || st.Pause.By != "replica:rb" || st.Pause.Note != "paused after 3 failed runs in a row" ||
				!st.Pause.Until.IsZero() || st.Pause.At.IsZero() {
				t.Fatalf("state after 3 failures: %+v, %v; want paused by replica:rb with the note, no end", st, err)
			}
			if _, err := gs[0].Claim(ctx, tick+1, false); !errors.Is(err, fleet.ErrPaused) {
				t.Fatalf("claim after the pause: %v, want ErrPaused", err)
			}
			if err := gs[0].Pause(ctx, false, fleet.PauseInfo{}); err != nil {
				t.Fatal(err)
			}
			failures(0)
			if run(0, true) || run(0, true) {
				t.Fatal("paused after fewer than 3 failures since the resume")
			}
			failures(2)
		})
	}
}

// The finish that pauses the ledger says so even when the history key
// holds another type (finish.lua's -9): Finish returns ErrBadKey, Paused
// is true, and the ledger names the claim whose finish paused it
// (LedgerState.PauseFinish), so that its replica announces the pause.
func TestPauseAfterFailuresHistoryBadKey(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t)
	srv := redistest.Start(t)
	g := ledger(t, locktest.NewClient(t, srv), "badhist")
	if err := srv.Client().Set(ctx, g.HistoryKey(), "x", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	cl := mustClaim(t, ctx, g, 1)
	err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "failed", Tries: 1, Failed: true, PauseAfter: 1,
		Pause: fleet.PauseInfo{By: "replica:r1", Note: "paused after 1 failed runs in a row"}, Entry: map[string]string{"tick": "1"}})
	if !errors.Is(err, lock.ErrBadKey) || !cl.Paused() {
		t.Fatalf("pausing finish with a history key of another type: %v, paused %v; want ErrBadKey and paused", err, cl.Paused())
	}
	st, err := g.State(ctx)
	if err != nil || !st.Paused || st.PauseFinish != cl.Owner() || st.Pause.By != "replica:r1" || st.Done != 1 {
		t.Fatalf("state: %+v, %v; want tick 1 done, paused by replica:r1, PauseFinish %q", st, err, cl.Owner())
	}
	if err := g.Pause(ctx, true, fleet.PauseInfo{By: "alice", Note: "by hand"}); err != nil {
		t.Fatal(err)
	}
	if st, err := g.State(ctx); err != nil || st.PauseFinish != "" {
		t.Fatalf("state after a pause by hand: %+v, %v; want no PauseFinish", st, err)
	}
}
