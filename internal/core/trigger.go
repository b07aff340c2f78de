package core

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/trigger.lua
	triggerSrc    string
	triggerScript = redis.NewScript(libSrc + triggerSrc)
)

// reqsDropped bounds how many records of requests done one trigger drops,
// and reqsKept how many requests back records are kept at most
// (trigger.lua).
const reqsDropped, reqsKept = 1000, 1000

// Trigger counts one more manual request for the task in g, records it
// with params in runs, the ledger that claims the requests' numbers (nil:
// g; another ledger of the same lock), in the same step, and returns the
// count, which grows by one each time: a number to claim in a ledger of
// manual runs (the scheduler's trigger). params non-nil (empty too) makes
// the request ordered: a Claim in runs of a later request claims it first
// while it is not done (see Claim.Params), so that none is passed over,
// and runs.Params reads its params back until it is done. params nil is a
// request without parameters, not ordered. A client retry of the request
// after a lost reply counts nothing again (while its record is kept, until
// it is done). It returns ErrBadKey if a key is not a hash, ErrInvalid if
// runs is of another lock or Client.
func (g *Ledger) Trigger(ctx context.Context, runs *Ledger, params map[string]string) (int64, error) {
	if g.c.isClosed() {
		return 0, fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	if runs == nil {
		runs = g
	}
	if runs.c != g.c || runs.m.k.name != g.m.k.name {
		return 0, fmt.Errorf("lock %q: ledger %q: trigger for ledger %q of lock %q: not the same lock: %w", g.m.k.name, g.id, runs.id, runs.m.k.name, ErrInvalid)
	}
	var js string
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return 0, fmt.Errorf("lock %q: ledger %q: params: %w", g.m.k.name, g.id, err)
		}
		js = string(b)
	}
	n, err := g.c.be.ledgerTrigger(ctx, g.key, runs.key, g.c.newOwner(), js)
	if err != nil {
		return 0, g.ledgerErr(err)
	}
	return n, nil
}

// Params returns the params that Trigger recorded with request n (an
// empty map for none: also for a request made without params, not
// ordered); nil if n has no record: it is done and a later Trigger dropped
// it, or the store lost it. It returns ErrBadKey if the key is not a hash.
func (g *Ledger) Params(ctx context.Context, n int64) (map[string]string, error) {
	if g.c.isClosed() {
		return nil, fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	rec, err := g.c.be.ledgerParams(ctx, g.key, n)
	if err != nil {
		return nil, g.ledgerErr(err)
	}
	if rec != "" && !requestOrdered(rec) {
		return map[string]string{}, nil
	}
	p, err := requestParams(rec)
	if err != nil {
		return nil, fmt.Errorf("lock %q: ledger %q: request %d: %w", g.m.k.name, g.id, n, err)
	}
	return p, nil
}

// requestParams reads the params of a request's record (trigger.lua's
// req:<n>): nil if the record is "" or not ordered.
func requestParams(rec string) (map[string]string, error) {
	parts := strings.SplitN(rec, "\n", 3)
	if len(parts) < 3 {
		return nil, nil
	}
	p := map[string]string{}
	if err := json.Unmarshal([]byte(parts[2]), &p); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	return p, nil
}

// requestOrdered reports whether a request's record says it is ordered.
func requestOrdered(rec string) bool {
	return strings.Count(rec, "\n") >= 2
}

func (b *redisBackend) ledgerTrigger(ctx context.Context, key, runs, id, params string) (int64, error) {
	n, err := run(ctx, b.rdb, triggerScript, []string{key, runs}, ledgerLife.Milliseconds(), id, params).Int64()
	switch {
	case err != nil:
		return 0, err
	case n == claimLedgerType:
		return 0, ErrBadKey
	}
	return n, nil
}

func (b *redisBackend) ledgerParams(ctx context.Context, key string, n int64) (string, error) {
	s, err := b.rdb.HGet(ctx, key, "req:"+strconv.FormatInt(n, 10)).Result()
	if err == redis.Nil {
		return "", nil
	}
	return s, err
}

// memTrigger is trigger.lua's fields of a ledger.
type memTrigger struct {
	reqs map[int64]string // req:<n>
	ids  map[string]int64 // trig:<id>
	low  int64            // reqlow
}

func (b *memoryBackend) ledgerTrigger(ctx context.Context, key, runs, id, params string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	now := time.Now()
	if r := b.s.ledgerAt(runs, now, false); r != nil {
		if n, ok := r.trig.ids[id]; ok {
			return n, nil // a retry: as the script, nothing changes
		}
	}
	g := b.s.ledgerAt(key, now, true)
	g.triggers++
	n := g.triggers
	r := b.s.ledgerAt(runs, now, true)
	t := &r.trig
	low := max(t.low, 1)
	if upto := min(max(r.done, n-reqsKept-1), low+reqsDropped-1, n-1); upto >= low {
		for m := low; m <= upto; m++ {
			if rec, ok := t.reqs[m]; ok {
				if _, rid, ok := strings.Cut(rec, "\n"); ok {
					rid, _, _ = strings.Cut(rid, "\n")
					delete(t.ids, rid)
				}
				delete(t.reqs, m)
			}
		}
		t.low = upto + 1
	}
	if t.reqs == nil {
		t.reqs, t.ids = map[int64]string{}, map[string]int64{}
	}
	rec := strconv.FormatInt(now.UnixMilli(), 10) + "\n" + id
	if params != "" {
		rec += "\n" + params
	}
	t.reqs[n], t.ids[id] = rec, n
	return n, nil
}

func (b *memoryBackend) ledgerParams(ctx context.Context, key string, n int64) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	g := b.s.ledgerAt(key, time.Now(), false)
	if g == nil {
		return "", nil
	}
	return g.trig.reqs[n], nil
}
