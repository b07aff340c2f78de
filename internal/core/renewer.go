package core

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// renewer renews the leases of one Client (those taken without WithLease)
// together: one batch of renewals in flight, normally, so that the
// connection the pool has warm carries them all. (Each lease renewing on
// its own, their renewals were in flight together when the network slowed;
// each took a connection, a new connection's first request pays go-redis's
// handshake, three round trips, and the renewals answered after the
// leases' deadlines although Redis had renewed the keys.)
//
// A lease joins the renewer lease/6 after it was taken, about half-way to
// its first renewal; its deadline's timer starts then (the deadline, 9/10
// of the lease, cannot pass before, and Lease.Err checks it itself). Until
// then it waits in pending, under one timer for the whole Client. Most
// leases are released before that time: they add and remove an entry here
// and touch no runtime timer and no goroutine. The timer is set again only
// when a lease joins before the time it is set for, so that a loop of
// short leases sets it about once per join delay instead of once per lease
// (setting a timer can wake a thread of the runtime: a system call on the
// caller's path).
//
// The leases that joined are renewed by one goroutine (loop), which runs
// while there are any, and sends each batch on a goroutine of its own
// (fly); the Redis backend sends a batch as one pipeline on a connection
// of the client's main pool that it keeps from batch to batch (renewAll,
// keptConns). A batch is due when one lease is:
// lease/3 after its last successful renewal (or acquisition) was sent, or
// lease/12 after a renewal that failed with an error. It holds every lease
// that is at least a sixth of that interval old (ripe), so that leases
// align into the same batch. While a batch is in flight no other is sent,
// but for two cases. A lease that is in no batch in flight, and was ripe
// already when the latest went out (it joined after, its
// acquisition having answered late, or its own batch answered just after),
// goes out at once, in a batch of such leases: no lease waits a round trip
// behind a batch it was not in. And a batch with no reply after twice the
// last round trip (and at least lease/12) is sent again at once, while
// still in flight, so on another connection: before the deadline, so that
// a reply held up on one connection (a stalled link, a server that answers
// late) does not cost the leases while another request can still make it;
// once one copy answers, the others hold nothing back. A lease is in at
// most maxRenewals batches in flight. A lease's deadline counts from the
// send time of its latest renewal that succeeded, whichever batch it was
// in. A renewal that finds the lock gone or another owner's loses that
// lease (the others of its batch are not touched); one that fails with an
// error is tried again lease/12 later. The deadline timer, not the
// renewer, declares a lease lost if no renewal succeeds in time, so a
// batch stuck on a silent server cannot delay the signal. Unlock and
// Client.Close stop a lease's renewals and wait until no batch that holds
// it is in flight (stop), so that nothing renews a lock after its release
// is sent.
//
// Arithmetic, for a lease whose round trip went up to 0.4 of it: a lease
// not yet ripe when a batch goes out without it (younger than lease/18)
// is due at most lease/3 after its last successful send, waits at most for
// the batch's reply (a round trip after the batch's send), and its own
// renewal answers a round trip later: lease/18 + 2 × 0.4 = 0.856 of the
// lease after its last successful send, inside its deadline (0.9). (With
// a third of the interval, lease/9, it was 0.911: the fault suite's added
// round trip of 0.4 × a 2 s lease lost leases, seed 38.)
//
// renewer is safe for concurrent use.
type renewer struct {
	c *Client

	mu      sync.Mutex
	answers sync.Cond            // L is &mu; broadcast when a batch answers
	pending map[*Lease]time.Time // leases that have not joined: when each joins
	timer   *time.Timer          // fires at armed; nil until first needed
	armed   time.Time            // zero when the timer is not set
	held    map[*Lease]struct{}  // leases that joined: the loop renews them
	flights []*flight            // batches in flight, oldest first
	rtt     time.Duration        // the last successful batch's round trip
	running bool                 // the loop's goroutine runs
	wake    chan struct{}        // tells the loop to look again; buffered
	closed  bool
}

// A lease's place in the renewer; under renewer.mu.
type renewState int8

const (
	renNew     renewState = iota // not added yet
	renPending                   // waits to join
	renHeld                      // renewed by the loop
	renStopped                   // released, lost, or never renewed: never again
)

// flight is one batch in flight.
type flight struct {
	leases  []*Lease
	sent    time.Time     // when it went out, about (a lease counts from its backend's send clock)
	late    time.Duration // no reply after this: it is late
	first   *flight       // the batch it is a copy of (sent again when late), or itself
	settled bool          // it was sent again, or a copy answered: it holds nothing back
}

// renewing is one lease's renewal in a batch (backend.renewAll).
type renewing struct {
	kind  kind
	k     *keys
	owner string
	lease time.Duration

	sent time.Time // when its request went out: the backend sets it
	ok   bool      // renewed; false when owner no longer holds the lock
	err  error
}

func (r *renewer) init(c *Client) {
	r.c = c
	r.answers.L = &r.mu
	r.wake = make(chan struct{}, 1)
}

// add registers l, taken at sent, to join at sent + lease/6, unless l was
// stopped already or the Client closed: then it reports false and
// registers nothing. It checks that under the same lock as stop, so that a
// stop cannot fall between the check and the registration.
func (r *renewer) add(l *Lease, sent time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || l.ren != renNew {
		return false
	}
	if r.pending == nil {
		r.pending = make(map[*Lease]time.Time)
	}
	at := sent.Add(l.lease / 6)
	l.ren, l.lastOK = renPending, sent
	r.pending[l] = at
	r.arm(at)
	return true
}

// stop keeps l from being renewed from now on. If wait, it returns only
// once no batch that holds l is in flight, so that nothing renews the lock
// after its release is sent; the batches' own goroutines do not wait.
func (r *renewer) stop(l *Lease, wait bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch l.ren {
	case renPending:
		delete(r.pending, l)
	case renHeld:
		delete(r.held, l)
	}
	l.ren = renStopped
	for wait && l.flying > 0 {
		r.answers.Wait()
	}
}

// arm makes the timer fire at at, unless it fires sooner already. r.mu is
// held.
func (r *renewer) arm(at time.Time) {
	if !r.armed.IsZero() && !at.Before(r.armed) {
		return
	}
	r.armed = at
	if r.timer == nil {
		r.timer = time.AfterFunc(time.Until(at), r.join)
		return
	}
	r.timer.Reset(time.Until(at))
}

// join moves the leases that are due, with those due within a twelfth of
// their lease (early is harmless: a batch holds a lease only once it is
// ripe), to the loop, starts their deadlines' timers,
// and sets the timer for the next.
func (r *renewer) join() {
	r.mu.Lock()
	now := time.Now()
	var due []*Lease
	var next time.Time
	for l, at := range r.pending {
		if at.Sub(now) <= l.lease/12 {
			due = append(due, l)
			delete(r.pending, l)
			if r.held == nil {
				r.held = make(map[*Lease]struct{})
			}
			r.held[l] = struct{}{}
			l.ren = renHeld
			if r.rtt == 0 {
				r.rtt = l.rtt
			}
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	r.armed = time.Time{}
	if !next.IsZero() && !r.closed {
		r.arm(next)
	}
	start := len(due) > 0 && !r.running && !r.closed
	if start {
		r.running = true
		r.c.wg.Add(1) // under r.mu, before closed is set: Close's Wait comes after
	}
	r.mu.Unlock()
	for _, l := range due {
		l.startTimer()
	}
	if start {
		go r.loop()
	} else if len(due) > 0 {
		r.poke()
	}
}

// poke tells the loop to look again.
func (r *renewer) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// loop sends the batches as they fall due, until no lease is held and none
// is in flight, or the Client closes; it waits for its batches.
func (r *renewer) loop() {
	defer r.c.wg.Done()
	var flying sync.WaitGroup
	defer flying.Wait()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		r.mu.Lock()
		if r.c.bg.Err() != nil || (len(r.held) == 0 && len(r.flights) == 0) {
			r.running = false
			r.mu.Unlock()
			return
		}
		f, next := r.plan(time.Now())
		r.mu.Unlock()
		if f != nil {
			flying.Add(1)
			go r.fly(f, &flying)
			continue
		}
		var fire <-chan time.Time
		if !next.IsZero() {
			t.Reset(time.Until(next))
			fire = t.C
		}
		select {
		case <-fire:
		case <-r.wake:
		case <-r.c.bg.Done():
		}
	}
}

// plan returns the batch to send now, registered in flight, or else when
// to look again (zero: when a batch answers or a lease joins). r.mu is
// held.
func (r *renewer) plan(now time.Time) (*flight, time.Time) {
	var next, latest time.Time // latest: when the latest batch that holds the others back went out
	for _, f := range r.flights {
		if f.settled {
			continue
		}
		lateAt := f.sent.Add(max(2*r.rtt, f.late))
		if !now.Before(lateAt) && r.copies(f.first) >= maxRenewals {
			// Late, and sent as often as it may be: wait for an answer.
			if f.sent.After(latest) {
				latest = f.sent
			}
			continue
		}
		if !now.Before(lateAt) {
			f.settled = true
			if b := r.batch(now, f.first, false); b != nil {
				return b, time.Time{}
			}
			continue
		}
		if f.sent.After(latest) {
			latest = f.sent
		}
		next = earliest(next, lateAt)
	}
	// While a batch is in flight no other is sent, but for a lease that is
	// in none and was ripe already when the latest went out (it joined
	// later, after an acquisition that answered late, or its own batch
	// answered just after): it must not wait a round trip behind a batch it
	// is not in. One that was younger can: it is due within lease/3 of its
	// last send, and its own renewal, sent when the batch answers, answers
	// by lease/18 + 2 round trips after its last, within its deadline while
	// the round trip is under 0.4 of the lease.
	for l := range r.held {
		if !latest.IsZero() && (l.flying > 0 || l.lastOK.Add(ripe(l)).After(latest)) {
			continue
		}
		at := l.lastOK.Add(l.lease / 3)
		if l.retryAt.After(at) {
			at = l.retryAt
		}
		if !now.Before(at) {
			return r.batch(now, nil, !latest.IsZero()), time.Time{}
		}
		next = earliest(next, at)
	}
	return nil, next
}

// batch registers in flight, and returns, a batch of every held lease
// that is ripe, of those in no batch in flight if free, a copy of first if that is
// not nil; nil if there is none. r.mu is held.
func (r *renewer) batch(now time.Time, first *flight, free bool) *flight {
	var f *flight
	for l := range r.held {
		if now.Before(l.lastOK.Add(ripe(l))) || (free && l.flying > 0) || l.flying >= maxRenewals {
			continue
		}
		if f == nil {
			f = &flight{sent: now, late: l.lease / 12, first: first}
			if first == nil {
				f.first = f
			}
		}
		f.leases = append(f.leases, l)
		f.late = min(f.late, l.lease/12)
		l.flying++
	}
	if f != nil {
		f.late = max(f.late, time.Millisecond)
		r.flights = append(r.flights, f)
	}
	return f
}

// copies returns how many copies of first are in flight. r.mu is held.
func (r *renewer) copies(first *flight) int {
	n := 0
	for _, f := range r.flights {
		if f.first == first {
			n++
		}
	}
	return n
}

// ripe is how long after its last successful send a lease joins a batch:
// a sixth of its renewal interval (see renewer's arithmetic).
func ripe(l *Lease) time.Duration { return l.lease / 18 }

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// fly sends f and applies its replies: a lease renewed counts from the
// batch's send time; one found gone or another owner's is lost; one whose
// renewal failed is tried again lease/12 later. The request is bounded by
// the time its success could still count for.
func (r *renewer) fly(f *flight, flying *sync.WaitGroup) {
	defer flying.Done()
	rs := make([]renewing, len(f.leases))
	sent := time.Now()
	shortest := f.leases[0].lease
	for i, l := range f.leases {
		rs[i] = renewing{kind: l.kind, k: l.k, owner: l.owner, lease: l.lease, sent: sent}
		shortest = min(shortest, l.lease)
	}
	ctx, cancel := context.WithDeadline(r.c.bg, sent.Add(safeTime(shortest)))
	r.c.be.renewAll(ctx, rs)
	cancel()
	now := time.Now()

	var ok []int // the leases whose deadline moves: their index
	var lost []*Lease
	r.mu.Lock()
	for i, o := range r.flights {
		if o == f {
			r.flights = append(r.flights[:i], r.flights[i+1:]...)
			break
		}
	}
	for _, o := range r.flights {
		// The copies of a late batch still in flight hold nothing back
		// once one has answered: the next batch goes out when it is due.
		if o.first == f.first {
			o.settled = true
		}
	}
	for i, l := range f.leases {
		l.flying--
		switch {
		case rs[i].err != nil:
			l.retryAt = now.Add(max(l.lease/12, time.Millisecond))
		case !rs[i].ok:
			lost = append(lost, l)
		default:
			r.rtt = now.Sub(rs[i].sent)
			if rs[i].sent.After(l.lastOK) {
				l.lastOK, l.retryAt = rs[i].sent, time.Time{}
				ok = append(ok, i)
			}
		}
	}
	r.answers.Broadcast()
	r.mu.Unlock()
	r.poke()

	for _, i := range ok {
		l := f.leases[i]
		l.extend(rs[i].sent.Add(safeTime(l.lease)))
	}
	tel, log := r.c.tel, r.c.log
	for i, l := range f.leases {
		switch {
		case rs[i].err != nil:
			tel.renewed(l.k.name, "error")
			log.Warn("lease renewal failed", "lock", l.k.name, "owner", l.owner, "error", rs[i].err)
		case !rs[i].ok:
			tel.renewed(l.k.name, "lost")
		default:
			tel.renewed(l.k.name, "ok")
		}
	}
	for _, l := range lost {
		l.lose(fmt.Errorf("%w: renewal found %q gone or held by another owner", ErrLockLost, l.k.lock))
	}
}

// close stops the timer and keeps leases from joining: Client.Close has
// released every lease; the loop ends on the Client's bg.
func (r *renewer) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.timer != nil {
		r.timer.Stop()
	}
}
