package core

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

func (b *redisBackend) claim(ctx context.Context, k *keys, ledger, owner string, lease time.Duration, tick int64, ca claimArgs) (claimReply, error) {
	keys := []string{k.lock, k.token, ledger}
	args := []any{owner, lease.Milliseconds(), max(tokenTTL, 2*lease).Milliseconds(), tick, ledgerLife.Milliseconds()}
	if ca.fair {
		keys = append(keys, k.queue, k.timeout)
		args = append(args, 1, ca.place.Milliseconds(), max((ca.place/3).Milliseconds(), 1), ca.wait, ca.def, ledgerRenew.Milliseconds())
	} else {
		args = append(args, 0, 0, 0, 0, ca.def, ledgerRenew.Milliseconds())
	}
	if ca.replace {
		args = append(args, 1)
	}
	v, err := b.runBatched(ctx, claimScript, keys, args...).Slice()
	if err != nil {
		return claimReply{}, err
	}
	if len(v) < 2 {
		return claimReply{}, fmt.Errorf("claim: %d values in reply, want 2 or more", len(v))
	}
	n := make([]int64, len(v))
	for i, x := range v {
		switch x := x.(type) {
		case int64:
			n[i] = x
		case string:
			if i < 4 || i == 7 {
				return claimReply{}, fmt.Errorf("claim: value %d of the reply is %q, not an integer", i, x)
			}
		default:
			return claimReply{}, fmt.Errorf("claim: value %d of the reply is a %T", i, x)
		}
	}
	r := claimReply{status: n[0], value: n[1]}
	switch {
	case r.status == claimAcquired && len(v) == 9:
		r.try, r.extra, r.at = n[2], n[3], n[7]
		r.req, _ = v[8].(string)
		r.from, _ = v[4].(string)
		r.def, _ = v[5].(string)
		r.defOwner, _ = v[6].(string)
	case r.status == claimHeld && (len(v) == 3 || len(v) == 4):
		r.extra = n[2]
		r.byBackfill = len(v) == 4 && n[3] == 1
	case r.status == claimAcquired, r.status == claimHeld:
		return claimReply{}, fmt.Errorf("claim: %d values in reply with status %d", len(v), r.status)
	}
	return r, nil
}

func (b *redisBackend) finish(ctx context.Context, k *keys, g ledgerRef, owner string, holds int, tick int64, rec finishArgs) (int64, error) {
	d := 0
	if rec.done {
		d = 1
	}
	keys := []string{k.lock, k.channel, g.key, g.history}
	f := 0
	if g.fair {
		f = 1
	}
	if g.fair || rec.chain {
		keys = append(keys, k.queue, k.timeout)
	}
	if rec.chain {
		keys = append(keys, chainKey(g.key))
	}
	args := append([]any{owner, holds, tick, d, rec.outcome, rec.tries, ledgerLife.Milliseconds(), tickTail(g.id, tick, rec.done), rec.seen, f,
		g.keep, g.maxAge.Milliseconds(), ledgerRenew.Milliseconds(), g.historyRenew().Milliseconds(),
		rec.streak, rec.pauseAfter, rec.pauseBy, rec.pauseNote}, flatten(rec.entry)...)
	return b.runBatched(ctx, finishScript, keys, args...).Int64()
}

func (b *redisBackend) ledgerPass(ctx context.Context, g ledgerRef, upTo int64, settled time.Duration, entry map[string]string) (int64, error) {
	var up any = upTo
	if upTo == 0 {
		up = "" // append alone
	}
	args := append([]any{up, ledgerLife.Milliseconds(), g.keep, g.maxAge.Milliseconds(), g.historyRenew().Milliseconds(), settled.Milliseconds()}, flatten(entry)...)
	return passScript.Run(ctx, b.rdb, []string{g.key, g.history}, args...).Int64()
}

func (b *redisBackend) history(ctx context.Context, lg ledgerRef, limit int, before string) ([]Entry, error) {
	// The scripts trim approximately (finish.lua): the latest lg.keep
	// entries are read, with the server's time, and those older than
	// lg.maxAge or not before before are left out.
	var msgs *redis.XMessageSliceCmd
	var now *redis.TimeCmd
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		msgs = p.XRevRangeN(ctx, lg.history, "+", "-", int64(lg.keep))
		return nil
	})
	if err != nil {
		return nil, err
	}
	oldest := now.Val().Add(-lg.maxAge)
	out := make([]Entry, 0, min(limit, len(msgs.Val())))
	for _, m := range msgs.Val() {
		if len(out) == limit {
			break
		}
		t := entryTime(m.ID)
		if t.Before(oldest) {
			break // the ones after it are older still
		}
		if before != "" && !idLess(m.ID, before) {
			continue
		}
		f := make(map[string]string, len(m.Values))
		for k, v := range m.Values {
			if s, ok := v.(string); ok {
				f[k] = s
			}
		}
		out = append(out, Entry{ID: m.ID, Time: t, Fields: f})
	}
	return out, nil
}

// idLess reports whether the entry id a comes before b (both well formed,
// ValidEntryID).
func idLess(a, b string) bool {
	am, as, _ := strings.Cut(a, "-")
	bm, bs, _ := strings.Cut(b, "-")
	an, _ := strconv.ParseUint(am, 10, 64)
	bn, _ := strconv.ParseUint(bm, 10, 64)
	if an != bn {
		return an < bn
	}
	aseq, _ := strconv.ParseUint(as, 10, 64)
	bseq, _ := strconv.ParseUint(bs, 10, 64)
	return aseq < bseq
}

func (b *redisBackend) ledgerPause(ctx context.Context, key string, paused bool, p pauseArgs) (bool, error) {
	on := 0
	if paused {
		on = 1
	}
	n, err := pauseScript.Run(ctx, b.rdb, []string{key}, on, ledgerLife.Milliseconds(), p.by, p.note, p.until).Int64()
	switch {
	case err != nil:
		return false, err
	case n == claimLedgerType:
		return false, ErrBadKey
	}
	return n == 1, nil
}

func (b *redisBackend) ledger(ctx context.Context, k *keys, key string) (map[string]string, bool, error) {
	var fields *redis.MapStringStringCmd
	var exists *redis.IntCmd
	var now *redis.TimeCmd
	_, err := b.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		fields = p.HGetAll(ctx, key)
		exists = p.Exists(ctx, k.lock)
		now = p.Time(ctx)
		return nil
	})
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, false, fmt.Errorf("%w: %w", ErrBadKey, err)
		}
		return nil, false, err
	}
	f := fields.Val()
	pauseOver(f, now.Val().UnixMilli())
	return f, exists.Val() == 1, nil
}

// pauseOver removes from a ledger's fields f a pause whose pauseduntil is
// not after now (ms on the store's clock): it is over, as claim.lua reads
// it.
func pauseOver(f map[string]string, now int64) {
	if until, _ := strconv.ParseInt(f["pauseduntil"], 10, 64); until != 0 && until <= now {
		for _, k := range []string{"paused", "pausedby", "pausenote", "pausedat", "pauseduntil", "pausefinish"} {
			delete(f, k)
		}
	}
}

// entryTime is the store's time of an entry id: its milliseconds.
func entryTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n)
}

// flatten is an entry's fields as XADD's arguments, in a stable order.
func flatten(f map[string]string) []any {
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]any, 0, 2*len(f))
	for _, k := range keys {
		out = append(out, k, f[k])
	}
	return out
}
