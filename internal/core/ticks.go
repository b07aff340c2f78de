package core

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// A TickEvent is a tick of a ledger that a claimant finished (Finish), as
// the finish's unlock message names it.
type TickEvent struct {
	Tick int64
	// Done is true when the tick was recorded done, false when it was
	// given back (Record.Done false), to be claimed again.
	Done bool
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
	done      map[string]int64 // by ledger key
	listeners map[string]map[*tickListener]struct{}
}

type tickListener struct{ fn func(TickEvent) }

// tickKey names a ledger on the board: its lock's channel and its id.
func tickKey(channel, ledger string) string { return channel + "\n" + ledger }

// heard records a finish of a ledger's tick, by this Client (Finish) or
// another (its unlock message), and tells the ledger's listeners. Claims
// of a tick heard done return ErrDone without asking the store: a tick
// once done stays done.
func (c *Client) heard(channel string, ev TickEvent, ledger string) {
	b := &c.ticks
	k := tickKey(channel, ledger)
	b.mu.Lock()
	if ev.Done && ev.Tick > b.done[k] {
		if b.done == nil {
			b.done = make(map[string]int64)
		}
		b.done[k] = ev.Tick
	}
	var fns []func(TickEvent)
	for l := range b.listeners[k] {
		fns = append(fns, l.fn)
	}
	b.mu.Unlock()
	for _, fn := range fns {
		fn(ev)
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

// Watch calls fn with each tick of the ledger that a claimant finishes
// (Claim.Finish), on any Client of the store, until stop is called or the
// Client is closed: the tick, and whether it is done or given back. It
// learns them from the unlock messages that Finish publishes, so delivery
// is at most once (a message sent while the connection is down is lost);
// a finish of this Client's is told at once.
//
// While a Watch lasts, the lock's channel stays subscribed, so that Claims
// of the lock need no subscription of their own, and a Claim of a tick
// heard done returns ErrDone without asking the store. fn runs on the
// goroutine that delivers the Client's messages (or on the finishing
// goroutine): it must return quickly. It returns ErrClosed after Close;
// stop may be called more than once.
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
		b.listeners = make(map[string]map[*tickListener]struct{})
	}
	if b.listeners[k] == nil {
		b.listeners[k] = make(map[*tickListener]struct{})
	}
	b.listeners[k][l] = struct{}{}
	b.mu.Unlock()
	c.be.subscribe(g.m.k)
	var once sync.Once
	return func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.listeners[k], l)
			if len(b.listeners[k]) == 0 {
				delete(b.listeners, k)
			}
			b.mu.Unlock()
			c.be.unsubscribe(g.m.k)
		})
	}, nil
}
