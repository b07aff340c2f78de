package core

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/trigger.lua
	triggerSrc    string
	triggerScript = redis.NewScript(triggerSrc)
)

// paramsKept bounds how many requests' params one trigger drops (trigger.lua).
const paramsKept = 1000

// Trigger counts one more manual request for the task in g, keeps params
// with it (nil or empty: none) in runs, the ledger that claims the
// requests' numbers (nil: g; another ledger of the same lock), in the same
// step, and returns the count, which grows by one each time: a number to
// claim in a ledger of manual runs (the scheduler's trigger). runs.Params
// reads the params back until the request is done. A client retry of the
// request after a lost reply counts nothing again. It returns ErrBadKey if
// a key is not a hash, ErrInvalid if runs is of another lock or Client.
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
	if len(params) > 0 {
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

// Params returns the params that Trigger kept with request n: nil if it
// had none, or once the request is done (the ledger's Done is n or later)
// and a later Trigger dropped them. It returns ErrBadKey if the key is not
// a hash.
func (g *Ledger) Params(ctx context.Context, n int64) (map[string]string, error) {
	if g.c.isClosed() {
		return nil, fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	js, err := g.c.be.ledgerParams(ctx, g.key, n)
	if err != nil {
		return nil, g.ledgerErr(err)
	}
	if js == "" {
		return nil, nil
	}
	var p map[string]string
	if err := json.Unmarshal([]byte(js), &p); err != nil {
		return nil, fmt.Errorf("lock %q: ledger %q: params of request %d: %w", g.m.k.name, g.id, n, err)
	}
	return p, nil
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
	s, err := b.rdb.HGet(ctx, key, "params:"+strconv.FormatInt(n, 10)).Result()
	if err == redis.Nil {
		return "", nil
	}
	return s, err
}

// memTrigger is trigger.lua's fields of a ledger.
type memTrigger struct {
	params map[int64]string
	low    int64  // paramslow
	last   string // lasttrigger's id
	lastN  int64  // and number
}

func (b *memoryBackend) ledgerTrigger(ctx context.Context, key, runs, id, params string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	now := time.Now()
	g := b.s.ledgerAt(key, now, true)
	if g.trig.last != "" && g.trig.last == id {
		return g.trig.lastN, nil
	}
	g.triggers++
	n := g.triggers
	g.trig.last, g.trig.lastN = id, n
	r := b.s.ledgerAt(runs, now, params != "")
	if r == nil {
		return n, nil
	}
	t := &r.trig
	low := max(t.low, 1)
	if r.done >= low {
		for m := max(low, r.done-paramsKept+1); m <= r.done; m++ {
			delete(t.params, m)
		}
		t.low = r.done + 1
	}
	if params != "" {
		if t.params == nil {
			t.params = map[int64]string{}
		}
		t.params[n] = params
	}
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
	return g.trig.params[n], nil
}
