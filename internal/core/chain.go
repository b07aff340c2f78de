package core

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A ChainRun is a finished run of a ledger's tick, as its chain record
// keeps it for the runs that follow it (Record.Chain, Ledger.ChainRuns).
type ChainRun struct {
	// Tick is the ledger's tick (a manual run's number, in a ledger of
	// manual runs).
	Tick int64
	// Outcome is the finish's Record.Outcome.
	Outcome string
	// RunTick is the field "tick" of the finish's history entry, "" if it
	// had none: the tick the run reported (the scheduler's RFC 3339 time).
	RunTick string
	// At is when the finish was recorded, on the store's clock.
	At time.Time
	// Params are the field "params" of the finish's history entry, a JSON
	// object read (an empty map if the entry had none), so that the runs
	// that follow a manual run need not its request's record, which a
	// later trigger drops; nil if the record predates them or the field
	// does not parse.
	Params map[string]string
}

var (
	//go:embed scripts/chainfloor.lua
	chainFloorSrc    string
	chainFloorScript = redis.NewScript(libSrc + chainFloorSrc)
)

// maxChainRuns is how many runs a chain record keeps, the latest
// (finish.lua's ZREMRANGEBYRANK), and the most ChainRuns returns.
const maxChainRuns = 1000

// chainKey is the chain record of the ledger at key: in its hash slot.
func chainKey(key string) string { return key + ":chain" }

// ChainRuns returns the runs of g's ticks after tick after that finished
// done with Record.Chain, oldest first: at most the latest 1000, for as
// long as the ledger lives. It returns an error wrapping ErrBadKey if the
// record is of another type, and ErrClosed once the Client is closed.
func (g *Ledger) ChainRuns(ctx context.Context, after int64) ([]ChainRun, error) {
	if g.c.isClosed() {
		return nil, fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	runs, err := g.c.be.chainRuns(ctx, g.key, after)
	if err != nil {
		if errors.Is(err, ErrBadKey) || strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, fmt.Errorf("lock %q: ledger %q: chain record %q is not a sorted set: %w", g.m.k.name, g.id, chainKey(g.key), ErrBadKey)
		}
		return nil, fmt.Errorf("lock %q: ledger %q: chain record: %w", g.m.k.name, g.id, err)
	}
	return runs, nil
}

func (b *redisBackend) chainRuns(ctx context.Context, key string, after int64) ([]ChainRun, error) {
	ms, err := b.rdb.ZRangeByScore(ctx, chainKey(key), &redis.ZRangeBy{
		Min: "(" + strconv.FormatInt(after, 10), Max: "+inf", Count: maxChainRuns,
	}).Result()
	if err != nil {
		return nil, err
	}
	out := make([]ChainRun, 0, len(ms))
	for _, m := range ms {
		r, ok := parseChainRun(m)
		if !ok {
			return nil, fmt.Errorf("chain record %q: malformed member %q", chainKey(key), m)
		}
		out = append(out, r)
	}
	return out, nil
}

// parseChainRun reads a member of a chain record (finish.lua's KEYS[7]).
func parseChainRun(m string) (ChainRun, bool) {
	// (The params come last: a newline in them, which JSON escapes, would
	// be theirs.)
	f := strings.SplitN(m, "\n", 5)
	if len(f) < 4 {
		return ChainRun{}, false
	}
	tick, err1 := strconv.ParseInt(f[0], 10, 64)
	at, err2 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil {
		return ChainRun{}, false
	}
	r := ChainRun{Tick: tick, Outcome: f[1], RunTick: f[2], At: time.UnixMilli(at)}
	if len(f) == 5 { // (a member of 4 fields predates the params)
		r.Params = chainParams(f[4])
	}
	return r, true
}

// chainParams reads a chain member's params, the history entry's field
// (JSON, "" none): an empty map for none, nil if it does not parse.
func chainParams(js string) map[string]string {
	p := map[string]string{}
	if js != "" && json.Unmarshal([]byte(js), &p) != nil {
		return nil
	}
	return p
}

// addChain is finish.lua's addition to a chain record: it keeps the
// latest maxChainRuns by tick. s.mu is held.
func (g *memLedger) addChain(r ChainRun) {
	g.chain = append(g.chain, r)
	// As the sorted set: by tick, then (two runs of one tick) by member.
	member := func(r ChainRun) string {
		js := ""
		if len(r.Params) > 0 {
			b, _ := json.Marshal(r.Params) // (sorted keys, as the entry's)
			js = string(b)
		}
		return fmt.Sprintf("%d\n%s\n%s\n%d\n%s", r.Tick, r.Outcome, r.RunTick, r.At.UnixMilli(), js)
	}
	slices.SortStableFunc(g.chain, func(a, b ChainRun) int {
		if c := cmp.Compare(a.Tick, b.Tick); c != 0 {
			return c
		}
		return strings.Compare(member(a), member(b))
	})
	if n := len(g.chain); n > maxChainRuns {
		g.chain = slices.Delete(g.chain, 0, n-maxChainRuns)
	}
}

func (b *memoryBackend) chainRuns(ctx context.Context, key string, after int64) ([]ChainRun, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.ledgerAt(key, time.Now(), false)
	if g == nil {
		return nil, nil
	}
	var out []ChainRun
	for _, r := range g.chain {
		if r.Tick > after {
			out = append(out, r)
		}
	}
	return out, nil
}

// ChainFloor sets the ledger's chain floor to now, on the store's clock,
// if it has none, and returns the floor it has: for a job that follows
// others, the time before which its parents' finishes are not its to
// follow (the first time one of its replicas read them). It lives as long
// as the ledger; a ledger that does not exist is made, with its lifetime
// (LedgerTTL). It returns ErrBadKey if the key is not a hash.
func (g *Ledger) ChainFloor(ctx context.Context) (time.Time, error) {
	if g.c.isClosed() {
		return time.Time{}, fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	ms, err := g.c.be.chainFloor(ctx, g.key)
	if err != nil {
		return time.Time{}, g.ledgerErr(err)
	}
	return time.UnixMilli(ms), nil
}

func (b *redisBackend) chainFloor(ctx context.Context, key string) (int64, error) {
	s, err := chainFloorScript.Run(ctx, b.rdb, []string{key}, ledgerLife.Milliseconds()).Text()
	if err != nil {
		return 0, err
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("ledger %q: chain floor %q is not a number", key, s)
	}
	return ms, nil
}

func (b *memoryBackend) chainFloor(ctx context.Context, key string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	g := s.ledgerAt(key, now, false)
	if g == nil {
		g = s.ledgerAt(key, now, true)
	}
	if g.chainSince == 0 {
		g.chainSince = now.UnixMilli()
	}
	return g.chainSince, nil
}
