package core

import "time"

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
