package fleet_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

// TestOwnLock: ledgers with own locks (one per replica) claim the same
// tick each once, at the same time, beside the lock's Mutex held by
// another, in the lock's hash slot, and write to the lock's history.
func TestOwnLock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := context.Background()
	c, err := lock.New(srv.Client(), lock.WithClientID("c"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st := fleet.New(c)
	main, err := st.Ledger("cache", "cache")
	if err != nil {
		t.Fatal(err)
	}
	own := func(replica string) *fleet.Ledger {
		g, err := st.Ledger("cache", "cache", fleet.WithOwnLock(replica))
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	r1, r2 := own("r1"), own("r2")
	if want := "lockcron:{cache}:own:r1:ledger:cache"; r1.Key() != want {
		t.Errorf("own ledger's key %q, want %q", r1.Key(), want)
	}
	if r1.HistoryKey() != main.HistoryKey() {
		t.Errorf("own ledger's history %q, want the lock's %q", r1.HistoryKey(), main.HistoryKey())
	}

	held, err := c.Mutex("cache").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Unlock(context.WithoutCancel(ctx))
	a := mustClaim(t, ctx, r1, 1000)
	b := mustClaim(t, ctx, r2, 1000) // at once: another own lock
	if _, err := r1.Claim(ctx, 1000, false, lock.WithWait(0)); !errors.Is(err, fleet.ErrDone) && !errors.Is(err, lock.ErrLocked) {
		t.Errorf("second claim of r1's tick: %v, want ErrDone or ErrLocked", err)
	}
	for i, cl := range []*fleet.Claim{a, b} {
		rec := fleet.Record{Done: true, Outcome: "ran", Tries: 1, Entry: map[string]string{"replica": []string{"r1", "r2"}[i]}}
		if err := cl.Finish(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r1.Claim(ctx, 1000, false); !errors.Is(err, fleet.ErrDone) {
		t.Errorf("claim of r1's tick after its finish: %v, want ErrDone", err)
	}
	ents, err := main.History(ctx, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2 || ents[0].Fields["replica"] != "r2" || ents[1].Fields["replica"] != "r1" {
		t.Errorf("the lock's history: %+v, want r2's and r1's runs", ents)
	}
	for _, bad := range []string{"r{1}", "", " "} {
		if _, err := st.Ledger("cache", "cache", fleet.WithOwnLock(bad)); !errors.Is(err, lock.ErrInvalid) {
			t.Errorf("own lock %q: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestOwnLockListed: a lock of its own (one per replica, for a job that
// runs on every replica) is listed by Locks while held, as lock/own, a
// mutex with its holder, beside the lock's own Mutex; its ledger is not a
// lock; on both backends.
func TestOwnLockListed(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := context.Background()
		c := store.NewClient(t)
		g, err := fleet.New(c).Ledger("cache", "cache", fleet.WithOwnLock("web-1"))
		if err != nil {
			t.Fatal(err)
		}
		cl := mustClaim(t, ctx, g, 1000)
		held, err := c.Mutex("cache").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		infos, err := c.Locks(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, in := range infos {
			names = append(names, in.Name+" "+in.Kind)
			if in.Err != nil {
				t.Errorf("lock %s: %v", in.Name, in.Err)
			}
		}
		if got, want := strings.Join(names, ", "), "cache mutex, cache/web-1 mutex"; got != want {
			t.Fatalf("Locks() = %s, want %s", got, want)
		}
		own := infos[1]
		if len(own.Holders) != 1 || own.Holders[0].Owner != cl.Owner() || own.TTL <= 0 || own.Token == 0 {
			t.Errorf("cache/web-1 = %+v, want held by the claim %s, with a TTL and a token", own, cl.Owner())
		}
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1}); err != nil {
			t.Fatal(err)
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if infos, err := c.Locks(ctx); err != nil || len(infos) != 0 {
			t.Errorf("Locks() after the finish and unlock = %+v, %v; want none", infos, err)
		}
	})
}
