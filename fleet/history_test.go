package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

// finishWith claims tick and finishes it with an entry naming it.
func finishWith(t *testing.T, ctx context.Context, g *fleet.Ledger, tick int64) {
	t.Helper()
	cl := mustClaim(t, ctx, g, tick)
	rec := fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: tick, Entry: map[string]string{"tick": strconv.FormatInt(tick, 10)}}
	if err := cl.Finish(ctx, rec); err != nil {
		t.Fatalf("finish of tick %d: %v", tick, err)
	}
}

func ticksOf(ents []fleet.Entry) []string {
	out := make([]string, len(ents))
	for i, e := range ents {
		out[i] = e.Fields["tick"]
	}
	return out
}

func TestLedgerHistory(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := context.Background()
		c := store.NewClient(t)
		t.Run("NewestFirstAndPaged", func(t *testing.T) {
			g, err := fleet.New(c).Ledger("hist", "job", fleet.WithHistory(3, time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			if ents, err := g.History(ctx, 10, ""); err != nil || len(ents) != 0 {
				t.Fatalf("history of a new ledger: %v, %v; want none", ents, err)
			}
			for tick := int64(1); tick <= 5; tick++ {
				finishWith(t, ctx, g, tick)
			}
			ents, err := g.History(ctx, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(ticksOf(ents)); got != "[5 4 3]" {
				t.Fatalf("history kept %s, want the latest 3, newest first: [5 4 3]", got)
			}
			for i, e := range ents {
				if !fleet.ValidEntryID(e.ID) || e.Time.IsZero() || time.Since(e.Time) > time.Hour {
					t.Errorf("entry %d: id %q, time %v", i, e.ID, e.Time)
				}
			}
			page, err := g.History(ctx, 1, ents[0].ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(ticksOf(page)); got != "[4]" {
				t.Fatalf("one entry before %s: %s, want [4]", ents[0].ID, got)
			}
			if _, err := g.History(ctx, 1, "x-1"); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("before x-1: %v, want ErrInvalid", err)
			}
			if _, err := g.History(ctx, 0, ""); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("limit 0: %v, want ErrInvalid", err)
			}
		})
		t.Run("GivenBackAndSharedWithAnotherLedger", func(t *testing.T) {
			g, err := fleet.New(c).Ledger("shared", "job")
			if err != nil {
				t.Fatal(err)
			}
			m, err := fleet.New(c).Ledger("shared", "job!manual", fleet.WithSharedHistory("job"))
			if err != nil {
				t.Fatal(err)
			}
			if g.HistoryKey() != m.HistoryKey() {
				t.Fatalf("history keys %q and %q, want one", g.HistoryKey(), m.HistoryKey())
			}
			cl := mustClaim(t, ctx, g, 10)
			if err := cl.Finish(ctx, fleet.Record{Done: false, Outcome: "handed_off", Tries: 1, Entry: map[string]string{"tick": "10"}}); err != nil {
				t.Fatal(err)
			}
			finishWith(t, ctx, g, 10)
			finishWith(t, ctx, m, 1)
			ents, err := g.History(ctx, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(ticksOf(ents)); got != "[1 10 10]" {
				t.Fatalf("history %s, want the manual run, the re-run and the handoff: [1 10 10]", got)
			}
		})
		t.Run("NoEntryWhenNotHeld", func(t *testing.T) {
			g := ledger(t, c, "notheld")
			cl := mustClaim(t, ctx, g, 1)
			if _, err := c.ForceUnlock(ctx, "notheld"); err != nil {
				t.Fatal(err)
			}
			other := store.NewClient(t)
			og := ledger(t, other, "notheld")
			ocl := mustClaim(t, ctx, og, 1) // the tick is taken over
			if ocl.Try != 2 || !strings.HasPrefix(ocl.From, c.ID()+":") {
				t.Fatalf("takeover: try %d from %q; want try 2 from an owner of %s", ocl.Try, ocl.From, c.ID())
			}
			if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Entry: map[string]string{"tick": "1"}}); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("finish after losing the lock: %v, want ErrNotHeld", err)
			}
			if err := ocl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 2, Entry: map[string]string{"tick": "1", "by": "other"}}); err != nil {
				t.Fatal(err)
			}
			ents, err := g.History(ctx, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != 1 || ents[0].Fields["by"] != "other" {
				t.Fatalf("history %v, want only the finish of the holder", ents)
			}
		})
		t.Run("PassOnce", func(t *testing.T) {
			g := ledger(t, c, "pass")
			finishWith(t, ctx, g, 1)
			g2 := ledger(t, store.NewClient(t), "pass")
			entry := map[string]string{"tick": "5", "outcome": "missed"}
			first, err := g.Pass(ctx, 5, 0, entry)
			if err != nil {
				t.Fatal(err)
			}
			second, err := g2.Pass(ctx, 5, 0, entry)
			if err != nil {
				t.Fatal(err)
			}
			if !first || second {
				t.Fatalf("passes of the same ticks: %v, %v; want true, false", first, second)
			}
			st, err := g.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Seen != 5 || st.Done != 1 {
				t.Fatalf("ledger after the pass: seen %d, done %d; want 5, 1", st.Seen, st.Done)
			}
			ents, err := g.History(ctx, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(ticksOf(ents)); got != "[5 1]" {
				t.Fatalf("history %s, want [5 1]", got)
			}
		})
		// A tick that the store's clock is not settled past is not passed
		// over, whatever the caller's clock says: the fleet may still
		// claim it, and its claim stands.
		t.Run("PassNotSettled", func(t *testing.T) {
			g := ledger(t, c, "unsettled")
			finishWith(t, ctx, g, 1)
			tick := time.Now().Add(500 * time.Millisecond).UnixMilli() // due soon
			entry := map[string]string{"outcome": "missed"}
			if passed, err := g.Pass(ctx, tick, 3*time.Second, entry); err != nil || passed {
				t.Fatalf("pass of a tick not yet due: %v, %v; want false", passed, err)
			}
			past := time.Now().Add(-5 * time.Second).UnixMilli()
			if passed, err := g.Pass(ctx, past, 3*time.Second, entry); err != nil || !passed {
				t.Fatalf("pass of a tick 5s past, settled 3s: %v, %v; want true", passed, err)
			}
			if passed, err := g.Pass(ctx, tick, 3*time.Second, entry); err != nil || passed {
				t.Fatalf("pass of a tick not yet due, after a pass: %v, %v; want false", passed, err)
			}
			cl := mustClaim(t, ctx, g, tick) // the fleet's claim of it
			if cl.Tick != tick {
				t.Fatalf("claim of tick %d after the passes: took %d", tick, cl.Tick)
			}
		})
		t.Run("Append", func(t *testing.T) {
			g := ledger(t, c, "append")
			finishWith(t, ctx, g, 7)
			if err := g.Append(ctx, map[string]string{"tick": "8"}); err != nil {
				t.Fatal(err)
			}
			st, err := g.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if st.Seen != 7 || st.Done != 7 {
				t.Fatalf("ledger after Append: seen %d, done %d; want it untouched (7, 7)", st.Seen, st.Done)
			}
			ents, err := g.History(ctx, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(ticksOf(ents)); got != "[8 7]" {
				t.Fatalf("history %s, want [8 7]", got)
			}
		})
		t.Run("MaxAge", func(t *testing.T) {
			g, err := fleet.New(c).Ledger("aged", "job", fleet.WithHistory(100, 50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			finishWith(t, ctx, g, 1)
			first, err := g.History(ctx, 10, "")
			if err != nil || len(first) != 1 {
				t.Fatalf("history: %v, %v", first, err)
			}
			// Wait until the store's clock is past the first entry's age
			// (entries are stamped by the store), then append another.
			deadline := time.Now().Add(10 * time.Second)
			for time.Since(first[0].Time) < 100*time.Millisecond && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			finishWith(t, ctx, g, 2)
			ents, err := g.History(ctx, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(ticksOf(ents)); got != "[2]" {
				t.Fatalf("history %s, want the entry older than max age trimmed: [2]", got)
			}
		})
		t.Run("BadRetention", func(t *testing.T) {
			if _, err := fleet.New(c).Ledger("bad", "job", fleet.WithHistory(-1, 0)); !errors.Is(err, lock.ErrInvalid) {
				t.Fatalf("keep -1: %v, want ErrInvalid", err)
			}
		})
	})
}

// TestLedgerHistoryRedis: the history is a stream in the lock's slot with a
// TTL, and a key of another type is reported, not overwritten.
func TestLedgerHistoryRedis(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv)
	rdb := srv.Client()
	g := ledger(t, c, "typed")
	if want := "lockcron:{typed}:ledger:job:history"; g.HistoryKey() != want {
		t.Fatalf("history key %q, want %q", g.HistoryKey(), want)
	}
	finishWith(t, ctx, g, 1)
	if typ := rdb.Type(ctx, g.HistoryKey()).Val(); typ != "stream" {
		t.Fatalf("history key holds a %s, want a stream", typ)
	}
	// The stream outlives its last entry by the max age, and by at most
	// an hour more (its lifetime is renewed once an hour, not at each
	// append).
	if ttl := rdb.PTTL(ctx, g.HistoryKey()).Val(); ttl < fleet.DefaultHistoryMaxAge-time.Minute || ttl > fleet.DefaultHistoryMaxAge+time.Hour {
		t.Fatalf("history TTL %v, want the default max age and at most an hour more", ttl)
	}
	if err := rdb.Del(ctx, g.HistoryKey()).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, g.HistoryKey(), "x", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	cl := mustClaim(t, ctx, g, 2)
	err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: 2, Entry: map[string]string{"tick": "2"}})
	if !errors.Is(err, lock.ErrBadKey) {
		t.Fatalf("finish with a history key of another type: %v, want ErrBadKey", err)
	}
	st, _ := g.State(ctx)
	if st.Done != 2 || st.Held {
		t.Fatalf("ledger %+v: want tick 2 done and the lock released all the same", st)
	}
	if v := rdb.Get(ctx, g.HistoryKey()).Val(); v != "x" {
		t.Fatalf("the key of another type was overwritten: %q", v)
	}
	if _, err := g.History(ctx, 1, ""); !errors.Is(err, lock.ErrBadKey) {
		t.Fatalf("History of a key of another type: %v, want ErrBadKey", err)
	}
}

// TestLedgerHistoryTrimmedApproximately: a finish trims the history to its
// keep approximately (MAXLEN ~, whole stream nodes only), so the stream
// holds more entries than the ledger keeps; History shows the latest keep
// alone, on every page.
func TestLedgerHistoryTrimmedApproximately(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv)
	rdb := srv.Client()
	g, err := fleet.New(c).Ledger("approx", "job", fleet.WithHistory(3, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for tick := int64(1); tick <= 8; tick++ {
		finishWith(t, ctx, g, tick)
	}
	if n := rdb.XLen(ctx, g.HistoryKey()).Val(); n <= 3 {
		t.Fatalf("stream holds %d entries, want more than the 3 kept (trimmed approximately)", n)
	}
	ents, err := g.History(ctx, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(ticksOf(ents)); got != "[8 7 6]" {
		t.Fatalf("history %s, want the latest 3: [8 7 6]", got)
	}
	page, err := g.History(ctx, 100, ents[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 0 {
		t.Fatalf("history before the 3rd newest: %v, want none (beyond the keep)", ticksOf(page))
	}
}

// TestLedgerHistoryAged: entries older than the history's max age are
// hidden from History at once and dropped from the stream by a later
// finish (on Redis, once per renewal period: a 16th of the max age here).
func TestLedgerHistoryAged(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := context.Background()
		c := store.NewClient(t)
		const maxAge = time.Second
		g, err := fleet.New(c).Ledger("aged", "job", fleet.WithHistory(100, maxAge))
		if err != nil {
			t.Fatal(err)
		}
		finishWith(t, ctx, g, 1)
		ents, err := g.History(ctx, 10, "")
		if err != nil || len(ents) != 1 {
			t.Fatalf("history after one finish: %v, %v", ents, err)
		}
		first := ents[0].Time
		// The time that passes is what is tested: the first entry comes of
		// age while the stream lives on (the second finish renews it).
		time.Sleep(time.Until(first.Add(maxAge / 2)))
		finishWith(t, ctx, g, 2)
		time.Sleep(time.Until(first.Add(maxAge + 50*time.Millisecond)))
		ents, err = g.History(ctx, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(ticksOf(ents)); got != "[2]" {
			t.Fatalf("history once the first entry is older than %v: %s, want [2]", maxAge, got)
		}
		finishWith(t, ctx, g, 3)
		if store.Server != nil {
			if n := store.Server.Client().XLen(ctx, g.HistoryKey()).Val(); n != 2 {
				t.Fatalf("stream holds %d entries after a finish past the first one's age, want 2 (the aged one dropped)", n)
			}
		}
		ents, err = g.History(ctx, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(ticksOf(ents)); got != "[3 2]" {
			t.Fatalf("history %s, want [3 2]", got)
		}
	})
}

// Skipped ticks (entries with skip) are recorded once per tick across the
// callers of Pass, and consecutive skips of one cause and outcome make one
// entry, with count and first; another entry in between breaks the run, on
// both backends. The deadline_missed of a Finish coalesces the same way.
func TestLedgerHistoryCoalescesSkips(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, store locktest.Store) {
		ctx := context.Background()
		c := store.NewClient(t)
		g, err := fleet.New(c).Ledger("skips", "job")
		if err != nil {
			t.Fatal(err)
		}
		skip := func(tick int64, outcome, cause string) bool {
			t.Helper()
			e := map[string]string{"tick": strconv.FormatInt(tick, 10), "outcome": outcome, "skip": cause, "reason": "reason " + strconv.FormatInt(tick, 10)}
			ok, err := g.Pass(ctx, tick, -time.Hour, e)
			if err != nil {
				t.Fatalf("pass of skip %d: %v", tick, err)
			}
			return ok
		}
		show := func() string {
			t.Helper()
			ents, err := g.History(ctx, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range ents {
				f := e.Fields
				out = append(out, fmt.Sprintf("%s/%s %s..%s x%s (%s)", f["outcome"], f["skip"], f["first"], f["tick"], f["count"], f["reason"]))
			}
			return strings.Join(out, "; ")
		}
		for tick := int64(1); tick <= 3; tick++ {
			if !skip(tick, "skipped_busy", "busy:r1") {
				t.Fatalf("skip %d: not written", tick)
			}
		}
		// A retried pass (a lost reply), or another replica's pass of the
		// same tick, writes nothing; so does an older tick's.
		if skip(3, "skipped_busy", "busy:r1") || skip(2, "skipped_busy", "busy:r1") {
			t.Fatal("a second pass of a skipped tick was written")
		}
		if got, want := show(), "skipped_busy/busy:r1 1..3 x3 (reason 3)"; got != want {
			t.Fatalf("after 3 busy skips: %s; want %s", got, want)
		}
		// A claim of a later tick moves seen; a skip of it is still recorded.
		cl := mustClaim(t, ctx, g, 4)
		if err := cl.Finish(ctx, fleet.Record{Done: false, Outcome: "handed_off", Tries: 1, Seen: 5}); err != nil {
			t.Fatal(err)
		}
		if !skip(5, "skipped_busy", "busy:r1") {
			t.Fatal("skip of a tick already seen: not written")
		}
		// Another cause of the same outcome, then the first again: the
		// first's run goes on past it (the busy ticks of the replicas of
		// a job on every replica come in turn); a skip of another outcome
		// breaks it.
		skip(6, "skipped_busy", "busy:r2")
		skip(7, "skipped_busy", "busy:r1")
		skip(8, "paused", "paused")
		skip(9, "skipped_busy", "busy:r1")
		if got, want := show(), "skipped_busy/busy:r1 ..9 x (reason 9); paused/paused ..8 x (reason 8); skipped_busy/busy:r1 1..7 x5 (reason 7); skipped_busy/busy:r2 ..6 x (reason 6)"; got != want {
			t.Fatalf("history:\n %s\nwant\n %s", got, want)
		}
		// A run in between breaks the run of skips; a finish with skip
		// coalesces with the one before it.
		finishWith(t, ctx, g, 10)
		skip(11, "paused", "paused")
		for tick := int64(12); tick <= 13; tick++ {
			cl := mustClaim(t, ctx, g, tick)
			e := map[string]string{"tick": strconv.FormatInt(tick, 10), "outcome": "deadline_missed", "skip": "deadline", "reason": "late"}
			if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "deadline_missed", Tries: 1, Seen: tick, Entry: e}); err != nil {
				t.Fatal(err)
			}
		}
		ents, err := g.History(ctx, 4, "")
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fmt.Sprint(ticksOf(ents)), "[13 11 10 9]"; got != want {
			t.Fatalf("history ticks %s, want %s", got, want)
		}
		if f := ents[0].Fields; f["count"] != "2" || f["first"] != "12" {
			t.Fatalf("two deadline_missed finishes: %v; want one entry, count 2, first 12", f)
		}
		if f := ents[1].Fields; f["count"] != "" {
			t.Fatalf("a skip after a run: %v; want an entry of its own", f)
		}
		// A skip not yet settled on the store's clock is not recorded.
		if ok, err := g.Pass(ctx, time.Now().Add(time.Hour).UnixMilli(), 0, map[string]string{"skip": "paused", "outcome": "paused"}); ok || err != nil {
			t.Fatalf("pass of a tick an hour ahead: %t, %v; want false", ok, err)
		}
		// A tick recorded skipped busy may still be claimed (a takeover
		// of an earlier tick, a queued claim: one replica's busy skip is
		// its own view); one recorded excluded is not (a freeze read a
		// moment late: neither runs it); a tick claimed to run, or run, is
		// not recorded skipped.
		if !skip(20, "skipped_busy", "busy:r1") {
			t.Fatal("skip of tick 20: not written")
		}
		cl = mustClaim(t, ctx, g, 20)
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: 20}); err != nil {
			t.Fatal(err)
		}
		cl = mustClaim(t, ctx, g, 21)
		if skip(21, "excluded", "freeze:f1") {
			t.Fatal("a tick under way was recorded skipped")
		}
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: 21}); err != nil {
			t.Fatal(err)
		}
		if skip(21, "excluded", "freeze:f1") {
			t.Fatal("a tick done was recorded skipped")
		}
		if skip(22, "excluded", "freeze:f1") != true {
			t.Fatal("skip of tick 22 after a run: not written")
		}
		if cl, err := g.Claim(ctx, 22, false); !errors.Is(err, fleet.ErrDone) {
			if cl != nil {
				_ = cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: 22})
			}
			t.Fatalf("claim of a tick recorded excluded: %v; want ErrDone", err)
		}
		cl = mustClaim(t, ctx, g, 23) // the next tick runs
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: 23}); err != nil {
			t.Fatal(err)
		}
	})
}
