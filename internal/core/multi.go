package core

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"
)

// groupTimeout bounds each Unlock of a part when a composite lock rolls
// back a failed acquisition.
const groupTimeout = 5 * time.Second

// A group is what makes a Lease composite: the leases of its parts, of
// which at least quorum must hold for the group to hold.
type group struct {
	parts     []*Lease
	quorum    int
	timer     *time.Timer // RedLock with WithLease: the end of its validity; set before the group is published
	releasing bool        // the last Unlock is releasing the parts: their ends are not losses; under the lease's mu
}

// groupKey finds a composite lease in its context, for re-entry: the same
// parts of the same Clients, in any order.
type groupKey struct{ id string }

// identity names a part for re-entry: the lock of one Client.
func identity(l Locker) string {
	if pk, ok := l.(partKeyed); ok {
		c, k := pk.lockKeys()
		return fmt.Sprintf("%p\x00%s", c, k.id)
	}
	return fmt.Sprintf("%T\x00%s", l, l.Name())
}

// partKeyed is a Locker of this package that can say which lock it is.
type partKeyed interface{ lockKeys() (*Client, *keys) }

func (m *mutex) lockKeys() (*Client, *keys)     { return m.c, m.k }
func (f *fairMutex) lockKeys() (*Client, *keys) { return f.c, f.k }

// orderKey orders the parts of a composite lock the same way in every
// process: by lock name, then kind, then the store's address.
func orderKey(l Locker) string {
	pk, ok := l.(partKeyed)
	if !ok {
		return l.Name()
	}
	c, k := pk.lockKeys()
	return k.name + "\x00" + k.id + "\x00" + c.storeID()
}

// storeID names the store a Client keeps its locks in, as far as it can
// tell: the server addresses, or the MemoryStore.
func (c *Client) storeID() string { return c.be.storeID() }

// composite is Multi and RedLock.
type composite struct {
	name    string
	id      string
	parts   []Locker
	order   []int // indexes of parts, in acquisition order (Multi)
	redlock bool
	err     error // a bad argument: every call returns it
}

func newComposite(what string, redlock bool, lockers []Locker) *composite {
	m := &composite{redlock: redlock, parts: lockers}
	names := make([]string, 0, len(lockers))
	keys := make([]string, 0, len(lockers))
	ids := make([]string, 0, len(lockers))
	for i, l := range lockers {
		switch l.(type) {
		case nil:
			m.err = fmt.Errorf("lock: %s: locker %d is nil: %w", what, i, ErrInvalid)
			return m
		case *composite:
			m.err = fmt.Errorf("lock: %s: locker %d (%q) is itself a Multi or RedLock; list its parts instead: %w", what, i, l.Name(), ErrInvalid)
			return m
		}
		id := identity(l)
		if slices.Contains(ids, id) {
			m.err = fmt.Errorf("lock: %s: locker %d (%q) is given twice; it would wait for itself: %w", what, i, l.Name(), ErrInvalid)
			return m
		}
		ids = append(ids, id)
		if !slices.Contains(names, l.Name()) {
			names = append(names, l.Name())
		}
		keys = append(keys, orderKey(l))
	}
	m.name = strings.Join(names, ",")
	switch {
	case len(lockers) == 0:
		m.err = fmt.Errorf("lock: %s: no lockers: %w", what, ErrInvalid)
		return m
	case redlock && len(lockers) < 3:
		m.err = fmt.Errorf("lock %q: RedLock over %d servers: it needs at least 3 independent ones, for a majority to survive one failure: %w", m.name, len(lockers), ErrInvalid)
		return m
	}
	m.order = make([]int, len(lockers))
	for i := range m.order {
		m.order[i] = i
	}
	slices.SortStableFunc(m.order, func(a, b int) int { return strings.Compare(keys[a], keys[b]) })
	slices.Sort(ids)
	kind := "multi"
	if redlock {
		kind = "redlock"
	}
	m.id = kind + "\x00" + strings.Join(ids, "\x01")
	return m
}

// Multi returns a Locker that holds every one of lockers at once, or none,
// in the manner of Redisson's RedissonMultiLock. The lockers may be of any
// kind, on any Clients and stores.
//
// Lock takes the parts one by one in an order that every process computes
// the same way (by lock name, then kind, then store), so two Multi locks
// over the same locks, given in different orders, never deadlock. If a part
// cannot be had (its wait or the ctx ends, or an error), Lock releases the
// parts it took and returns that error. WithWait bounds the whole Lock;
// WithLease applies to each part. TryLock tries each part once.
//
// The Lease it returns holds the parts' leases (Lease.Parts). Its Token is
// the first locker's; its Context ends, and Done closes with ErrLockLost,
// as soon as any part is lost. Unlock releases every part. Lock on a
// context of a Multi lease over the same lockers adds a hold to each part.
// No lockers, or a nil one, gives a Locker whose every call returns
// ErrInvalid. It is safe for concurrent use.
func Multi(lockers ...Locker) Locker { return newComposite("Multi", false, lockers) }

// RedLock returns a Locker that runs the Redlock algorithm over lockers of
// one name on independent Redis servers (three or more, one Client each):
// it holds the lock when it holds a majority of them.
//
// Lock tries every server at once, each attempt bounded by a short timeout
// (redlockTry, 200ms). It succeeds when a majority acquired and time is
// left of the shortest lease after the time spent and an allowance for
// clock drift (1% of the lease plus 2ms); else it releases what it took on
// every server, pauses for a random 10–50ms, and tries again, until
// WithWait passes (ErrLocked) or ctx ends. TryLock makes one such round.
//
// The Lease holds the parts it acquired (Lease.Parts), each renewed by its
// own watchdog unless WithLease is given. It is lost when fewer than a
// majority of its parts still hold, or, with WithLease, when the validity
// computed at acquisition runs out. Its Token is the largest of its parts':
// tokens of independent servers are comparable only as far as their clocks
// agree, so RedLock gives no strict fencing. See the README's "How safe is
// it?" for when to use it, and why Redisson deprecated it.
//
// Fewer than three lockers, or a nil one, gives a Locker whose every call
// returns ErrInvalid. It is safe for concurrent use.
func RedLock(lockers ...Locker) Locker { return newComposite("RedLock", true, lockers) }

func (m *composite) Name() string { return m.name }

func (m *composite) Lock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.acquire(ctx, false, opts)
}

func (m *composite) TryLock(ctx context.Context, opts ...AcquireOption) (*Lease, error) {
	return m.acquire(ctx, true, opts)
}

func (m *composite) acquire(ctx context.Context, try bool, opts []AcquireOption) (*Lease, error) {
	if m.err != nil {
		return nil, m.err
	}
	o, err := buildAcquireOptions(m.name, opts)
	if err != nil {
		return nil, err
	}
	if err := ctxErr(ctx, m.name); err != nil {
		return nil, err
	}
	if g, ok := ctx.Value(groupKey{m.id}).(*Lease); ok {
		return g.groupReenter(ctx)
	}
	if o.hasWait && o.wait == 0 {
		try = true
	}
	if m.redlock {
		return m.redlockAcquire(ctx, o, try)
	}
	return m.multiAcquire(ctx, o, try)
}

// partOptions are the options each part gets: the lease, and what is left
// of the wait.
func partOptions(o acquireOptions, start time.Time) []AcquireOption {
	var opts []AcquireOption
	if o.hasLease {
		opts = append(opts, WithLease(o.lease))
	}
	if o.hasWait {
		opts = append(opts, WithWait(max(o.wait-time.Since(start), 0)))
	}
	return opts
}

func (m *composite) multiAcquire(ctx context.Context, o acquireOptions, try bool) (*Lease, error) {
	start := time.Now()
	leases := make([]*Lease, len(m.parts))
	for _, i := range m.order {
		var l *Lease
		var err error
		if try {
			l, err = m.parts[i].TryLock(ctx, partOptions(o, start)...)
		} else {
			l, err = m.parts[i].Lock(ctx, partOptions(o, start)...)
		}
		if err != nil {
			releaseParts(ctx, leases)
			return nil, fmt.Errorf("lock %q: part %q: %w", m.name, m.parts[i].Name(), err)
		}
		leases[i] = l
	}
	return m.newGroupLease(ctx, leases, len(leases), leases[0].token, time.Time{})
}

// redlockTry bounds each server's attempt in a RedLock round.
const redlockTry = 200 * time.Millisecond

func (m *composite) redlockAcquire(ctx context.Context, o acquireOptions, try bool) (*Lease, error) {
	start := time.Now()
	quorum := len(m.parts)/2 + 1
	var partOpts []AcquireOption
	if o.hasLease {
		partOpts = append(partOpts, WithLease(o.lease))
	}
	for {
		t0 := time.Now()
		leases, errs := m.redlockRound(ctx, partOpts)
		var held []*Lease
		minLease := time.Duration(0)
		token := int64(0)
		for _, l := range leases {
			if l != nil {
				held = append(held, l)
				if minLease == 0 || l.lease < minLease {
					minLease = l.lease
				}
				token = max(token, l.token)
			}
		}
		drift := minLease/100 + 2*time.Millisecond
		validity := minLease - time.Since(t0) - drift
		if len(held) >= quorum && validity > 0 {
			var deadline time.Time
			if o.hasLease {
				deadline = t0.Add(minLease - drift)
			}
			return m.newGroupLease(ctx, leases, quorum, token, deadline)
		}
		releaseParts(ctx, leases)
		why := fmt.Errorf("lock %q: acquired %d of %d servers, need %d: %w", m.name, len(held), len(m.parts), quorum, ErrLocked)
		if len(held) >= quorum {
			why = fmt.Errorf("lock %q: acquiring took %v, longer than the lease %v allows: %w", m.name, time.Since(t0), minLease, ErrLocked)
		}
		if errs != nil {
			why = fmt.Errorf("%w; failures: %w", why, errs)
		}
		if try {
			return nil, why
		}
		pause := time.Duration(10+rand.IntN(41)) * time.Millisecond
		if o.hasWait && time.Since(start)+pause >= o.wait {
			return nil, fmt.Errorf("not acquired within %v: %w", o.wait, why)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctxErr(ctx, m.name)
		}
	}
}

// redlockRound tries every server once, at the same time, and returns the
// leases it got (nil where it got none) and the failures that were not
// ErrLocked.
func (m *composite) redlockRound(ctx context.Context, opts []AcquireOption) ([]*Lease, error) {
	leases := make([]*Lease, len(m.parts))
	errs := make([]error, len(m.parts))
	var wg sync.WaitGroup
	for i, p := range m.parts {
		wg.Go(func() {
			tctx, cancel := context.WithTimeout(ctx, redlockTry)
			defer cancel()
			l, err := p.TryLock(tctx, opts...)
			if err != nil {
				if !errors.Is(err, ErrLocked) {
					errs[i] = err
				}
				return
			}
			// The part's lease must outlive the attempt's timeout.
			leases[i] = l
		})
	}
	wg.Wait()
	return leases, errors.Join(errs...)
}

// releaseParts unlocks the leases that are not nil, at the same time, on a
// context that outlives ctx.
func releaseParts(ctx context.Context, leases []*Lease) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
	defer cancel()
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, l := range leases {
		if l != nil {
			wg.Go(func() { errs[i] = l.Unlock(ctx) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// newGroupLease makes the composite lease over leases (nil where a RedLock
// server was not acquired).
func (m *composite) newGroupLease(ctx context.Context, leases []*Lease, quorum int, token int64, deadline time.Time) (*Lease, error) {
	var parts []*Lease
	for _, l := range leases {
		if l != nil {
			parts = append(parts, l)
		}
	}
	g := &Lease{
		k:     &keys{name: m.name, id: m.id},
		owner: parts[0].owner,
		token: token,
		done:  make(chan struct{}),
		holds: 1,
		start: time.Now(),
		group: &group{parts: parts, quorum: quorum},
	}
	gctx := context.WithValue(ctx, groupKey{m.id}, g)
	for _, p := range parts {
		gctx = context.WithValue(gctx, leaseKey{p.c, p.k.id}, p) // Lock of one part re-enters it
	}
	g.ctx, g.cancel = context.WithCancelCause(gctx)
	if !deadline.IsZero() {
		g.mu.Lock() // the timer may fire at once
		g.group.timer = time.AfterFunc(time.Until(deadline), func() {
			g.endGroup(fmt.Errorf("%w: the RedLock's validity is over", ErrLockLost))
		})
		g.mu.Unlock()
	}
	for _, p := range parts {
		p.mu.Lock()
		if p.err == nil {
			p.groups = append(p.groups, g)
		}
		p.mu.Unlock()
	}
	if err := g.groupErr(); err != nil { // a part may have ended already
		releaseParts(ctx, leases)
		return nil, fmt.Errorf("lock %q: %w", m.name, err)
	}
	return g, nil
}

// Parts returns the leases a Multi or RedLock lease is made of (for
// RedLock, those of the servers it acquired), or nil for any other lease.
// Watch the composite lease's Context rather than the parts': a RedLock
// part's own Context ends with the attempt that took it.
func (l *Lease) Parts() []*Lease {
	if l.group == nil {
		return nil
	}
	return slices.Clone(l.group.parts)
}

// partEnded ends the composite lease g if fewer than its quorum of parts
// still hold.
func (g *Lease) partEnded(*Lease) {
	g.mu.Lock()
	releasing := g.group.releasing
	g.mu.Unlock()
	if releasing {
		return // the group's own Unlock ends it
	}
	held := 0
	var cause error
	for _, x := range g.group.parts {
		if err := x.Err(); err == nil {
			held++
		} else if cause == nil || errors.Is(err, ErrLockLost) && !errors.Is(cause, ErrLockLost) {
			cause = fmt.Errorf("part %q: %w", x.k.name, err)
		}
	}
	if held >= g.group.quorum {
		return
	}
	// A part released by Client.Close ends the group as released; any
	// other end of a part is a loss.
	if !errors.Is(cause, ErrLockLost) && !errors.Is(cause, ErrReleased) {
		cause = fmt.Errorf("%w: %w", ErrLockLost, cause)
	}
	g.endGroup(cause)
}

// endGroup moves a composite lease out of the held state once.
func (g *Lease) endGroup(cause error) {
	g.mu.Lock()
	if g.err != nil {
		g.mu.Unlock()
		return
	}
	g.err = cause
	if g.group.timer != nil {
		g.group.timer.Stop()
	}
	g.mu.Unlock()
	g.cancel(cause)
	close(g.done)
}

// groupErr is Err of a composite lease: it checks its parts first, so that
// it never says nil past a part's deadline.
func (g *Lease) groupErr() error {
	g.partEnded(nil)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// groupReenter adds a hold to every part that holds.
func (g *Lease) groupReenter(ctx context.Context) (*Lease, error) {
	g.holdMu.Lock()
	defer g.holdMu.Unlock()
	if err := g.groupErr(); err != nil {
		return nil, fmt.Errorf("lock %q: re-enter: %w", g.k.name, err)
	}
	var added []*Lease
	for _, p := range g.group.parts {
		if p.Err() != nil {
			continue // a RedLock's lost minority
		}
		if _, err := p.reenter(ctx); err != nil {
			releaseParts(ctx, added)
			return nil, fmt.Errorf("lock %q: re-enter: %w", g.k.name, err)
		}
		added = append(added, p)
	}
	g.holds++
	return g, nil
}

// groupUnlock drops one hold of every part; the last one releases them.
// A composite lease that was lost still releases the parts that hold, and
// reports ErrNotHeld.
func (g *Lease) groupUnlock(ctx context.Context) error {
	g.holdMu.Lock()
	defer g.holdMu.Unlock()
	if g.holds == 0 {
		return fmt.Errorf("lock %q: unlock: %w: %w", g.k.name, ErrNotHeld, g.groupErr())
	}
	// Each hold of the group is one hold of each part. A lost group gives
	// all of them back at once: its Unlock calls after this one find
	// nothing to do.
	lost := g.groupErr()
	drop := 1
	if lost != nil {
		drop = g.holds
	}
	g.holds -= drop
	if g.holds == 0 && lost == nil {
		g.mu.Lock()
		g.group.releasing = true
		g.mu.Unlock()
	}
	var errs []error
	for _, p := range g.group.parts {
		for range drop {
			if p.Err() != nil {
				break
			}
			if err := p.Unlock(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if lost != nil {
		return fmt.Errorf("lock %q: unlock: %w: %w", g.k.name, ErrNotHeld, lost)
	}
	if g.holds == 0 {
		g.endGroup(ErrReleased)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("lock %q: unlock: %w", g.k.name, err)
	}
	return nil
}

func (s *semaphore) lockKeys() (*Client, *keys) { return s.c, s.k }
func (rw *RWMutex) lockKeys() (*Client, *keys)  { return rw.c, rw.wk }
func (r rLocker) lockKeys() (*Client, *keys)    { return r.rw.c, r.rw.rk }
