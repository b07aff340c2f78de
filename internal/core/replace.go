package core

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithReplace makes the ledger's claims replace (a scheduler's overlap
// "replace"): a claim that finds the lock held by another owner for an
// earlier unfinished tick records its own tick in the ledger's field
// replace (LedgerState.Replace), in the same step, if it is later than
// the one there, and tells the ledger's watchers (a TickEvent with
// Replace, on every Client that Watches the ledger, this one's included).
// The holder of the earlier tick is to end its run; the claim waits for
// the lock as a claim that queues. Claims of a ledger without it never
// write the field. It costs no round trip.
func WithReplace() LedgerOption {
	return func(g *Ledger) { g.replace = true }
}

// replaceAsked tells the ledger's watchers, on this Client at once and on
// the others by an announcement, that a claim of tick asked the run of an
// earlier tick to end. Each attempt of a waiting claim tells it again: a
// message lost is sent again at the next attempt, and the holder also
// reads the ledger now and then.
func (g *Ledger) replaceAsked(tick int64) {
	ev := TickEvent{Tick: tick, Replace: true}
	g.c.heard(g.m.k.channel, ev, g.id)
	g.c.announce(g.m.k.channel, g.id, ev, true)
}

// LeaseTime is the lease time of the Client's locks and claims
// (WithLeaseTime): a claim's lock is kept that long after its last renewal.
func (c *Client) LeaseTime() time.Duration { return c.opt.leaseTime }

// ReplaceAsked reads the ledger's field replace alone (one HGET, lighter
// than State): the latest tick whose claim asked the run of an earlier
// tick to end (WithReplace), 0 if none. It returns ErrBadKey if the key is
// not a hash.
func (g *Ledger) ReplaceAsked(ctx context.Context) (int64, error) {
	if g.c.isClosed() {
		return 0, fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	n, err := g.c.be.ledgerReplace(ctx, g.key)
	if err != nil {
		return 0, g.ledgerErr(err)
	}
	return n, nil
}

func (b *redisBackend) ledgerReplace(ctx context.Context, key string) (int64, error) {
	s, err := b.rdb.HGet(ctx, key, "replace").Result()
	if err == redis.Nil {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, _ := strconv.ParseInt(s, 10, 64)
	return n, nil
}

func (b *memoryBackend) ledgerReplace(ctx context.Context, key string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	g := b.s.ledgerAt(key, time.Now(), false)
	if g == nil {
		return 0, nil
	}
	return g.replace, nil
}
