package fleet_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// The ledger's scripts, read from the files the package embeds, run on
// their own: go-redis may send a script again after its reply was lost,
// and the second run must answer as the first and leave Redis as one run
// would have.

// scriptKeys are the keys of lock name and its ledger "job", as the Client
// names them.
type scriptKeys struct{ lock, token, channel, ledger string }

func keysOf(name string) scriptKeys {
	base := "lockcron:{" + name + "}"
	return scriptKeys{lock: base, token: base + ":token", channel: base + ":channel", ledger: base + ":ledger:job"}
}

const (
	scriptLease    = time.Minute
	scriptTokenTTL = 24 * time.Hour
)

// ledgerScripts runs claim.lua and finish.lua on one redis-server.
type ledgerScripts struct {
	rdb    *redis.Client
	claimS *redis.Script
	finS   *redis.Script
}

func newLedgerScripts(t *testing.T) *ledgerScripts {
	t.Helper()
	load := func(name string) *redis.Script { return redis.NewScript(locktest.ScriptSource(t, "lib.lua", name)) }
	return &ledgerScripts{rdb: redistest.Start(t).Client(), claimS: load("claim.lua"), finS: load("finish.lua")}
}

// claim runs claim.lua: owner claims tick.
func (s *ledgerScripts) claim(t *testing.T, ctx context.Context, k scriptKeys, owner string, tick int64) []int64 {
	t.Helper()
	v, err := s.claimS.Run(ctx, s.rdb, []string{k.lock, k.token, k.ledger},
		owner, scriptLease.Milliseconds(), scriptTokenTTL.Milliseconds(), tick, fleet.LedgerTTL.Milliseconds()).Slice()
	if err != nil {
		t.Fatalf("claim.lua by %s of tick %d: %v", owner, tick, err)
	}
	// The numbers of the reply (an acquired claim's strings, the owner it
	// took the tick from and the definition, are left out; its last number
	// is the server's time of the claim).
	var n []int64
	for _, x := range v {
		if i, ok := x.(int64); ok {
			n = append(n, i)
		}
	}
	return n
}

// finishRec is what finish.lua is told.
type finishRec struct {
	holds   int
	tick    int64
	done    bool
	outcome string
	tries   int
	seen    int64
}

// finish runs finish.lua for owner.
func (s *ledgerScripts) finish(t *testing.T, ctx context.Context, k scriptKeys, owner string, r finishRec) int64 {
	t.Helper()
	done := 0
	if r.done {
		done = 1
	}
	n, err := s.finS.Run(ctx, s.rdb, []string{k.lock, k.channel, k.ledger},
		owner, r.holds, r.tick, done, r.outcome, r.tries, fleet.LedgerTTL.Milliseconds(), finishTail(r), r.seen).Int64()
	if err != nil {
		t.Fatalf("finish.lua by %s: %v", owner, err)
	}
	return n
}

// finishTail is the tail of the finish's unlock message: the tick, whether
// it is done, and the ledger's id.
func finishTail(r finishRec) string {
	done := 0
	if r.done {
		done = 1
	}
	return fmt.Sprintf("\n%d\n%d\njob", r.tick, done)
}

// dump is every key in Redis: its type, its value, and whether it has a
// TTL.
func (s *ledgerScripts) dump(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	keys, err := s.rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]string, len(keys))
	for _, key := range keys {
		typ := s.rdb.Type(ctx, key).Val()
		var v any
		switch typ {
		case "hash":
			v = s.rdb.HGetAll(ctx, key).Val() // fmt prints maps sorted
		case "string":
			v = s.rdb.Get(ctx, key).Val()
		}
		out[key] = fmt.Sprintf("%s %v ttl:%v", typ, v, s.rdb.PTTL(ctx, key).Val() > 0)
	}
	return out
}

func (s *ledgerScripts) fields(t *testing.T, ctx context.Context, key string) map[string]string {
	t.Helper()
	f, err := s.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		t.Fatalf("HGETALL %s: %v", key, err)
	}
	return f
}

func sameDump(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		keys := slices.Sorted(maps.Keys(want))
		for k := range got {
			if _, ok := want[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			if got[k] != want[k] {
				t.Errorf("%s: key %s = %q, want %q", what, k, got[k], want[k])
			}
		}
	}
}

// A claim, and its retry with the same owner id: the same acquired reply,
// and the ledger counts one try.
func TestClaimScriptRetryAfterLostReply(t *testing.T) {
	t.Parallel()
	s := newLedgerScripts(t)
	ctx := testkit.Context(t)
	const tick = 1000
	for _, tc := range []struct {
		name    string
		ledger  []any // fields set before the claim
		wantTry int64
		// claimed is the tick the claim takes: the one asked for, or an
		// earlier unfinished one, which comes first.
		claimed int64
	}{
		{name: "empty ledger", wantTry: 1, claimed: tick},
		{name: "earlier tick done", ledger: []any{"done", 900, "running", 900, "tries", 1, "seen", 900}, wantTry: 1, claimed: tick},
		{name: "tick given back", ledger: []any{"running", tick, "tries", 2, "seen", tick}, wantTry: 3, claimed: tick},
		{name: "earlier tick unfinished", ledger: []any{"done", 800, "running", 900, "tries", 1, "seen", 900}, wantTry: 2, claimed: 900},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := keysOf("claim-" + tc.name)
			if tc.ledger != nil {
				s.rdb.HSet(ctx, k.ledger, tc.ledger...)
			}
			owner := "me:" + tc.name
			first := s.claim(t, ctx, k, owner, tick)
			if len(first) != 5 || first[0] != 1 || first[1] <= 0 || first[2] != tc.wantTry || first[3] != tc.claimed || first[4] <= 0 {
				t.Fatalf("claim = %v, want [1 token>0 %d %d time>0]", first, tc.wantTry, tc.claimed)
			}
			after := s.dump(t, ctx)

			again := s.claim(t, ctx, k, owner, tick) // the retry
			if len(again) != 5 || again[0] != 1 || again[1] != first[1] || again[2] != first[2] || again[3] != first[3] || again[4] < first[4] {
				t.Fatalf("retried claim = %v, want %v as the first (its time not before)", again, first)
			}
			sameDump(t, "after the retried claim", s.dump(t, ctx), after)
			f := s.fields(t, ctx, k.ledger)
			if f["tries"] != fmt.Sprint(tc.wantTry) || f["running"] != fmt.Sprint(tc.claimed) || f["owner"] != owner || f["seen"] != fmt.Sprint(tick) {
				t.Errorf("ledger %v; want tries %d, running %d, owner %s, seen %d", f, tc.wantTry, tc.claimed, owner, tick)
			}
			if h := s.fields(t, ctx, k.lock); len(h) != 2 || h[owner] != "1" || h[owner+":token"] != fmt.Sprint(first[1]) {
				t.Errorf("lock hash %v, want one hold by %s and its token %d", h, owner, first[1])
			}
		})
	}
}

// A finish, and its retry: 1 both times, and the ledger as after the first.
func TestFinishScriptRetryAfterLostReply(t *testing.T) {
	t.Parallel()
	s := newLedgerScripts(t)
	ctx := testkit.Context(t)
	k := keysOf("finish")
	const owner, tick = "me:1", 1000
	if r := s.claim(t, ctx, k, owner, tick); r[0] != 1 {
		t.Fatalf("claim = %v", r)
	}
	ps := s.rdb.Subscribe(ctx, k.channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the confirmation
		t.Fatal(err)
	}

	rec := finishRec{holds: 1, tick: tick, done: true, outcome: "ran", tries: 1, seen: tick}
	if n := s.finish(t, ctx, k, owner, rec); n != 1 {
		t.Fatalf("finish = %d, want 1", n)
	}
	msg, err := ps.ReceiveMessage(ctx)
	if want := owner + "\n1000\n1\njob"; err != nil || msg.Payload != want {
		t.Fatalf("unlock message: %v, %v; want %q (the owner, and the tick done)", msg, err, want)
	}
	after := s.dump(t, ctx)
	want := map[string]string{"done": "1000", "seen": "1000", "running": "1000", "owner": owner,
		"tries": "1", "outcome": "ran", "finished": owner, "from": ""}
	f := s.fields(t, ctx, k.ledger)
	if at, err := strconv.ParseInt(f["at:ran"], 10, 64); err != nil || at <= 0 {
		t.Fatalf("ledger after finish: at:ran = %q, want the time of the finish", f["at:ran"])
	}
	delete(f, "at:ran")
	if since, err := strconv.ParseInt(f["since"], 10, 64); err != nil || since <= 0 {
		t.Fatalf("ledger after finish: since = %q, want the time of the claim", f["since"])
	}
	delete(f, "since")
	if renewed, err := strconv.ParseInt(f["renewed"], 10, 64); err != nil || renewed <= 0 {
		t.Fatalf("ledger after finish: renewed = %q, want the time its lifetime was set", f["renewed"])
	}
	delete(f, "renewed")
	if !maps.Equal(f, want) {
		t.Fatalf("ledger after finish %v, want %v", f, want)
	}
	if n := s.rdb.Exists(ctx, k.lock).Val(); n != 0 {
		t.Fatal("finish left the lock held")
	}

	if n := s.finish(t, ctx, k, owner, rec); n != 1 { // the retry
		t.Fatalf("retried finish = %d, want 1", n)
	}
	sameDump(t, "after the retried finish", s.dump(t, ctx), after)

	// Another owner that never held the lock gets 0, and changes nothing.
	if n := s.finish(t, ctx, k, "other:1", rec); n != 0 {
		t.Fatalf("finish by another owner = %d, want 0", n)
	}
	sameDump(t, "after another owner's finish", s.dump(t, ctx), after)
}

// A finish that names a hold count other than the lock's: -5, and nothing
// touched.
func TestFinishScriptWrongHoldCount(t *testing.T) {
	t.Parallel()
	s := newLedgerScripts(t)
	ctx := testkit.Context(t)
	k := keysOf("holds")
	const owner, tick = "me:1", 1000
	if r := s.claim(t, ctx, k, owner, tick); r[0] != 1 {
		t.Fatalf("claim = %v", r)
	}
	before := s.dump(t, ctx)
	for _, holds := range []int{0, 2} {
		if n := s.finish(t, ctx, k, owner, finishRec{holds: holds, tick: tick, done: true, outcome: "ran", tries: 1, seen: 5000}); n != -5 {
			t.Fatalf("finish naming %d holds = %d, want -5", holds, n)
		}
		sameDump(t, fmt.Sprintf("after a finish naming %d holds", holds), s.dump(t, ctx), before)
	}
}

// A claim whose ledger key holds a string: {-6, 0}, and nothing written.
func TestClaimScriptLedgerWrongType(t *testing.T) {
	t.Parallel()
	s := newLedgerScripts(t)
	ctx := testkit.Context(t)
	k := keysOf("wrongtype")
	s.rdb.Set(ctx, k.ledger, "not a ledger", 0)
	before := s.dump(t, ctx)
	if r := s.claim(t, ctx, k, "me:1", 1000); !slices.Equal(r, []int64{-6, 0}) {
		t.Fatalf("claim = %v, want [-6 0]", r)
	}
	sameDump(t, "after the refused claim", s.dump(t, ctx), before)
}

// A finish whose ledger key holds another type (replaced during the run):
// the lock is released all the same, waiters are told, the foreign key is
// kept, and the reply is -6.
func TestFinishScriptLedgerWrongType(t *testing.T) {
	t.Parallel()
	s := newLedgerScripts(t)
	ctx := testkit.Context(t)
	k := keysOf("wrongtype")
	const owner, tick = "me:1", 1000
	if r := s.claim(t, ctx, k, owner, tick); r[0] != 1 {
		t.Fatalf("claim = %v", r)
	}
	s.rdb.Del(ctx, k.ledger)
	s.rdb.RPush(ctx, k.ledger, "not", "a", "ledger")
	ps := s.rdb.Subscribe(ctx, k.channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	if n := s.finish(t, ctx, k, owner, finishRec{holds: 1, tick: tick, done: true, outcome: "ran", tries: 1, seen: tick}); n != -6 {
		t.Fatalf("finish = %d, want -6", n)
	}
	if n := s.rdb.Exists(ctx, k.lock).Val(); n != 0 {
		t.Error("finish with a foreign ledger key left the lock held")
	}
	if msg, err := ps.ReceiveMessage(ctx); err != nil || msg.Payload != owner {
		t.Errorf("unlock message: %v, %v; want %q", msg, err, owner)
	}
	if got := s.rdb.LRange(ctx, k.ledger, 0, -1).Val(); !slices.Equal(got, []string{"not", "a", "ledger"}) {
		t.Errorf("the foreign key now holds %v", got)
	}
}

// The ledger's seen: a claim of a tick below it leaves it, a claim above
// raises it; a finish raises it to its ARGV[9] when that is above, and
// leaves it otherwise.
func TestLedgerScriptsSeen(t *testing.T) {
	t.Parallel()
	s := newLedgerScripts(t)
	ctx := testkit.Context(t)
	k := keysOf("seen")
	seen := func() string { return s.rdb.HGet(ctx, k.ledger, "seen").Val() }
	s.rdb.HSet(ctx, k.ledger, "seen", 5000)

	if r := s.claim(t, ctx, k, "me:1", 1000); r[0] != 1 {
		t.Fatalf("claim of tick 1000 = %v", r)
	}
	if got := seen(); got != "5000" {
		t.Fatalf("seen after a claim of tick 1000 below it = %s, want 5000", got)
	}
	if n := s.finish(t, ctx, k, "me:1", finishRec{holds: 1, tick: 1000, done: true, outcome: "ran", tries: 1, seen: 6000}); n != 1 {
		t.Fatalf("finish = %d", n)
	}
	if got := seen(); got != "6000" {
		t.Fatalf("seen after a finish with ARGV[9] 6000 = %s, want 6000", got)
	}

	if r := s.claim(t, ctx, k, "me:2", 2000); r[0] != 1 {
		t.Fatalf("claim of tick 2000 = %v", r)
	}
	if n := s.finish(t, ctx, k, "me:2", finishRec{holds: 1, tick: 2000, done: true, outcome: "ran", tries: 1, seen: 3000}); n != 1 {
		t.Fatalf("finish = %d", n)
	}
	if got := seen(); got != "6000" {
		t.Fatalf("seen after a finish with ARGV[9] 3000 below it = %s, want 6000", got)
	}

	if r := s.claim(t, ctx, k, "me:3", 7000); r[0] != 1 {
		t.Fatalf("claim of tick 7000 = %v", r)
	}
	if got := seen(); got != "7000" {
		t.Fatalf("seen after a claim of tick 7000 above it = %s, want 7000", got)
	}
}

// A finish that comes after its lock expired (the server was out of reach
// while the run ended) records the tick done if no one has claimed it
// since, and changes nothing if someone has.
func TestFinishScriptAfterExpiry(t *testing.T) {
	t.Parallel()
	s := newLedgerScripts(t)
	ctx := testkit.Context(t)
	k := keysOf("late")
	const owner, tick = "me:1", 1000
	rec := finishRec{holds: 1, tick: tick, done: true, outcome: "ran", tries: 1, seen: tick}

	if r := s.claim(t, ctx, k, owner, tick); r[0] != 1 {
		t.Fatalf("claim = %v", r)
	}
	s.rdb.Del(ctx, k.lock) // the lease ran out
	if n := s.finish(t, ctx, k, owner, rec); n != 1 {
		t.Fatalf("late finish, tick not claimed since = %d, want 1", n)
	}
	f := s.fields(t, ctx, k.ledger)
	if f["done"] != "1000" || f["finished"] != owner || f["outcome"] != "ran" {
		t.Fatalf("ledger after the late finish %v, want tick 1000 done by %s", f, owner)
	}
	if r := s.claim(t, ctx, k, "other:1", tick); r[0] != 2 {
		t.Fatalf("claim of the tick after its late finish = %v, want done (2)", r)
	}

	// Claimed again by another before the late finish arrives: the finish
	// changes nothing, and the other's claim stands.
	k = keysOf("late2")
	if r := s.claim(t, ctx, k, owner, tick); r[0] != 1 {
		t.Fatalf("claim = %v", r)
	}
	s.rdb.Del(ctx, k.lock)
	if r := s.claim(t, ctx, k, "other:1", tick); r[0] != 1 || r[2] != 2 {
		t.Fatalf("claim by another after the expiry = %v, want acquired, try 2", r)
	}
	before := s.dump(t, ctx)
	if n := s.finish(t, ctx, k, owner, rec); n != 0 {
		t.Fatalf("late finish after another's claim = %d, want 0", n)
	}
	sameDump(t, "after a late finish that lost the race", s.dump(t, ctx), before)

	// A late finish that gives the tick back (not done) records nothing.
	k = keysOf("late3")
	if r := s.claim(t, ctx, k, owner, tick); r[0] != 1 {
		t.Fatalf("claim = %v", r)
	}
	s.rdb.Del(ctx, k.lock)
	before = s.dump(t, ctx)
	back := rec
	back.done = false
	if n := s.finish(t, ctx, k, owner, back); n != 0 {
		t.Fatalf("late hand-back = %d, want 0", n)
	}
	sameDump(t, "after a late hand-back", s.dump(t, ctx), before)
}
