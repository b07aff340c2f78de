package core

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A TickEvent is a tick of a ledger that a claimant claimed or finished.
type TickEvent struct {
	Tick int64
	// Done is true when the tick was recorded done, false when it was
	// given back (Record.Done false), to be claimed again, or claimed.
	Done bool
	// Claimed is true when the event is a claim of the tick: its run
	// begins on another Client. Done is false then.
	Claimed bool
	// Lease is a claim's lease time: its lock is kept for as long after
	// the claimant's last renewal (0 for other events).
	Lease time.Duration
	// Busy is true when a claim of the tick on another Client found the
	// lock held for an earlier tick, and let the tick go (a claim that
	// does not queue). Done is false then.
	Busy bool
	// Replace is true when a claim of the tick found the lock held for an
	// earlier tick, and asked that run to end (WithReplace: the ledger's
	// field replace says so; LedgerState.Replace). Done is false then.
	Replace bool
}

// tickTail is the tail of a finish's unlock message: it names the ledger
// and the tick, and whether the tick is done. The message is the releasing
// owner id, or a fair lock's unlock message, followed by it.
func tickTail(ledger string, tick int64, done bool) string {
	d := "0"
	if done {
		d = "1"
	}
	return "\n" + strconv.FormatInt(tick, 10) + "\n" + d + "\n" + ledger
}

// parseTickTail reads what tickTail wrote, without its first newline.
func parseTickTail(tail string) (TickEvent, string, bool) {
	t, rest, ok := strings.Cut(tail, "\n")
	if !ok {
		return TickEvent{}, "", false
	}
	d, ledger, ok := strings.Cut(rest, "\n")
	tick, err := strconv.ParseInt(t, 10, 64)
	if !ok || err != nil || (d != "0" && d != "1") {
		return TickEvent{}, "", false
	}
	return TickEvent{Tick: tick, Done: d == "1"}, ledger, true
}

// tickBoard is what a Client has heard of the ticks of its ledgers: the
// latest tick each has finished done, and the listeners (Ledger.Watch).
type tickBoard struct {
	mu        sync.Mutex
	done      map[string]int64           // by ledger key
	listeners map[string][]*tickListener // by ledger; replaced, never changed in place
	watches   int                        // Watch calls not stopped
	unlisten  func()                     // ends the subscription to the announcements, while watches > 0

	// The claims and finishes of this Client's ledgers to announce, and
	// whether a goroutine is on its way to publish them.
	pending  []string
	flushing bool
}

type tickListener struct{ fn func(TickEvent) }

// tickKey names a ledger on the board: its lock's channel and its id, as
// an announcement's record has them (so a record's tail is the key).
func tickKey(channel, ledger string) string { return channel + "\x1f" + ledger }

// heard records a claim or a finish of a ledger's tick, by this Client
// (Finish) or another (its unlock message, or an announcement), and tells
// the ledger's listeners. Claims of a tick heard done return ErrDone
// without asking the store: a tick once done stays done.
func (c *Client) heard(channel string, ev TickEvent, ledger string) {
	c.heardKey(tickKey(channel, ledger), ev)
}

// heardKey is heard of the ledger named k (tickKey).
func (c *Client) heardKey(k string, ev TickEvent) {
	b := &c.ticks
	b.mu.Lock()
	if ev.Done && ev.Tick > b.done[k] {
		if b.done == nil {
			b.done = make(map[string]int64)
		}
		b.done[k] = ev.Tick
	}
	ls := b.listeners[k]
	b.mu.Unlock()
	for _, l := range ls {
		l.fn(ev)
	}
}

// heardDone is the latest tick of g that this Client heard finished done,
// 0 if none.
func (c *Client) heardDone(g *Ledger) int64 {
	b := &c.ticks
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done[tickKey(g.m.k.channel, g.id)]
}

// Announcements. Each claim that takes a ledger's lock, and each finish the
// ledger records, is told to the Clients that watch ledgers (Watch) in one
// message per batch on one channel of the store (prefix:ticks), not one per
// tick on each lock's channel: the store writes a message to each watching
// Client per batch, so its cost per tick does not grow with the number of
// Clients. A batch is what a Client claimed and finished in a few
// milliseconds; it is published by a goroutine that drains the queue and
// ends when it is empty. A Client announces the claims of the ledgers it
// watches itself (the members of a fleet that listens for them), and the
// finishes of the claims it announced. Delivery is at most once: a
// watcher's Pub/Sub connection that is down at that moment misses it (a
// Watch is a hint, the ledger decides).
//
// A message is this Client's owner prefix, then one record per event,
// each "\x1e" followed by a letter (c claimed, d done, b given back, s
// let go: the lock was held for an earlier tick, r replace: the lock was
// held for an earlier tick, whose run is asked to end), the tick (and for a
// claim "+" and its lease in ms), "\x1f", the lock's channel, "\x1f" and
// the ledger's id. Events of a lock or ledger whose name holds either
// separator are not announced.

// announceLinger is how long the first event of a batch waits for others.
const announceLinger = 2 * time.Millisecond

// announceTimeout bounds the publishing of one batch.
const announceTimeout = time.Second

// ticksChannel is the channel of the announcements.
func (c *Client) ticksChannel() string { return c.opt.prefix + ":ticks" }

// announce queues ev of the ledger id of the lock whose channel is
// channel for the next batch, if this Client watches the ledger or always
// is true (the finish of a claim announced while it did), and reports
// whether it did.
func (c *Client) announce(channel, id string, ev TickEvent, always bool) bool {
	if strings.ContainsAny(channel, "\x1e\x1f") || strings.ContainsAny(id, "\x1e\x1f") {
		return false
	}
	b := &c.ticks
	if !always {
		b.mu.Lock()
		watched := len(b.listeners[tickKey(channel, id)]) > 0
		b.mu.Unlock()
		if !watched {
			return false // no one in this fleet listens for it (see above)
		}
	}
	kind := "b"
	switch {
	case ev.Claimed:
		kind = "c"
	case ev.Busy:
		kind = "s"
	case ev.Replace:
		kind = "r"
	case ev.Done:
		kind = "d"
	}
	head := kind + strconv.FormatInt(ev.Tick, 10)
	if ev.Claimed {
		head += "+" + strconv.FormatInt(ev.Lease.Milliseconds(), 10)
	}
	rec := "\x1e" + head + "\x1f" + channel + "\x1f" + id
	b.mu.Lock()
	b.pending = append(b.pending, rec)
	start := !b.flushing
	b.flushing = true
	b.mu.Unlock()
	if !start {
		return true
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		b.mu.Lock()
		b.pending, b.flushing = nil, false
		b.mu.Unlock()
		return true
	}
	c.wg.Add(1) // under c.mu, before Close's Wait can start
	c.mu.Unlock()
	go c.flushAnnouncements()
	return true
}

// flushAnnouncements publishes the queued events in batches until none is
// left.
func (c *Client) flushAnnouncements() {
	defer c.wg.Done()
	b := &c.ticks
	t := time.NewTimer(announceLinger)
	select {
	case <-t.C:
	case <-c.done:
		t.Stop()
	}
	for {
		b.mu.Lock()
		recs := b.pending
		b.pending = nil
		if len(recs) == 0 {
			b.flushing = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		msg := c.owner + strings.Join(recs, "")
		ctx, cancel := context.WithTimeout(context.Background(), announceTimeout)
		_, err := c.be.publish(ctx, c.ticksChannel(), msg)
		cancel()
		if err != nil && c.log.IsDebug() {
			c.log.Debug("claims and finishes not announced: the fleet learns of them from the ledger", "events", len(recs), "error", err)
		}
	}
}

// heardAnnouncements tells the listeners of the events in an announcement
// from another Client.
func (c *Client) heardAnnouncements(msg string) {
	from, recs, ok := strings.Cut(msg, "\x1e")
	if !ok || from == c.owner {
		return
	}
	for rec := range strings.SplitSeq(recs, "\x1e") {
		head, key, ok := strings.Cut(rec, "\x1f")
		if !ok || len(head) < 2 {
			continue
		}
		t, lease, _ := strings.Cut(head[1:], "+")
		tick, err := strconv.ParseInt(t, 10, 64)
		if err != nil {
			continue
		}
		var ev TickEvent
		switch head[0] {
		case 'c':
			ms, _ := strconv.ParseInt(lease, 10, 64)
			ev = TickEvent{Tick: tick, Claimed: true, Lease: time.Duration(ms) * time.Millisecond}
		case 'd':
			ev = TickEvent{Tick: tick, Done: true}
		case 'b':
			ev = TickEvent{Tick: tick}
		case 's':
			ev = TickEvent{Tick: tick, Busy: true}
		case 'r':
			ev = TickEvent{Tick: tick, Replace: true}
		default:
			continue
		}
		c.heardKey(key, ev)
	}
}

// Watch calls fn with each tick of the ledger that a claimant claims or
// finishes (Claim, Claim.Finish) on another Client of the store, and each
// this Client finishes, until stop is called or the Client is closed: the
// tick, and whether it was claimed, done, given back, or let go by a claim
// that found the lock held for an earlier tick. It learns them
// from the announcements that claims and finishes publish in batches, so
// delivery is at most once (a message sent while the connection is down
// is lost); a finish of this Client's is told at once.
//
// While a Watch lasts, a Claim of a tick heard done returns ErrDone without
// asking the store. fn runs on the goroutine that delivers the Client's
// messages (or on the finishing goroutine): it must return quickly. It
// returns ErrClosed after Close; stop may be called more than once.
func (g *Ledger) Watch(fn func(TickEvent)) (stop func(), err error) {
	c := g.c
	if fn == nil {
		return nil, fmt.Errorf("lock %q: ledger %q: Watch: nil func: %w", g.m.k.name, g.id, ErrInvalid)
	}
	if c.isClosed() {
		return nil, fmt.Errorf("lock %q: %w", g.m.k.name, ErrClosed)
	}
	l := &tickListener{fn: fn}
	k := tickKey(g.m.k.channel, g.id)
	b := &c.ticks
	b.mu.Lock()
	if b.listeners == nil {
		b.listeners = make(map[string][]*tickListener)
	}
	b.listeners[k] = append(slices.Clip(b.listeners[k]), l)
	if b.watches++; b.watches == 1 {
		b.unlisten = c.be.listen(c.ticksChannel(), c.heardAnnouncements)
	}
	b.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			ls := slices.DeleteFunc(slices.Clone(b.listeners[k]), func(o *tickListener) bool { return o == l })
			b.listeners[k] = ls
			if len(ls) == 0 {
				delete(b.listeners, k)
			}
			if b.watches--; b.watches == 0 {
				b.unlisten()
				b.unlisten = nil
			}
		})
	}, nil
}
