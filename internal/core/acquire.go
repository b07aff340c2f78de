package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// A kind is what a Lease needs from the kind of lock it holds: the scripts
// that add a hold, renew, and drop holds.
type kind interface {
	// reenter adds a hold to owner's lease, which has holds now; it replies
	// as acquire.lua does.
	reenter(ctx context.Context, k *keys, owner string, lease time.Duration, holds int) (acquireReply, error)
	// renew extends owner's lease: false when owner no longer holds it.
	renew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error)
	// release drops holds and replies as release.lua does. When it frees
	// the lock (or may have), it wakes this Client's own waiters.
	release(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error)
}

// mutexKind is the reentrant lock's kind (acquire, renew and release.lua).
type mutexKind struct{ c *Client }

func (m mutexKind) reenter(ctx context.Context, k *keys, owner string, lease time.Duration, holds int) (acquireReply, error) {
	return m.c.be.acquire(ctx, k, owner, lease, holds)
}

func (m mutexKind) renew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error) {
	return m.c.be.renew(ctx, k, owner, lease)
}

func (m mutexKind) release(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error) {
	return m.c.release(ctx, k, owner, holds, drop)
}

// An acquisition is one kind's part in the path that every Lock, TryLock
// and Ledger.Claim goes through (Client.acquire): options, re-entry, the
// first attempt, the wait, the clean-up after a lost reply, the wait span.
// What differs between the kinds is the attempt, and the queue a waiter
// waits in (a waitQueue): this Client's queue for the lock (localQueue), or
// the lock's own queue in the store (fairQueue: FairMutex, a fair ledger's
// claims). Both wait in one loop, Client.wait.
type acquisition struct {
	k    *keys
	kind kind // releases what a failed call may have taken
	// shared: several owners may hold the lock at once (read locks,
	// permits). When the head of the queue acquires, the next tries at once
	// instead of sleeping until an unlock.
	shared bool
	// fair: the waiters wait in the lock's queue in the store, first come,
	// first served across every Client; unlocks are addressed to the head.
	fair bool
	// claim: a Ledger.Claim. Its first attempt goes out at once, even
	// while other goroutines of this Client wait (its answer may be that
	// the tick is done, which no wait changes); it has no re-entry through
	// ctx and refuses WithLease; check runs before any attempt.
	claim bool
	check func() error
	// attempt tries once, for a new lease of at.owner: it returns the
	// lease, or how long to wait at most before the next try (the holder's
	// TTL), or an error. Every attempt of one call uses the same owner id,
	// so an attempt whose reply was lost and that took the lock is found by
	// the next one (the scripts answer such a repeat with the lease, and
	// start its time again); attempt does no clean-up itself.
	attempt func(ctx context.Context, at attemptArgs) (*Lease, time.Duration, error)
	// leaseKey, if set, is leaseKey{c, k.id} made once (Mutex): as a
	// context key it would be boxed, an allocation, on each call.
	leaseKey any
	// ownerTag ends the owner id of every attempt (a backfill's claims:
	// BackfillOwnerTag), for the store to tell its holds from others.
	ownerTag string
}

// attemptArgs are what one attempt of an acquisition asks for.
type attemptArgs struct {
	owner string
	lease time.Duration
	fixed bool // WithLease: the lease is not renewed
	once  bool // TryLock or WithWait(0): no wait follows this attempt
	queue bool // a fair waiter's attempt: it takes or keeps its place in the queue
	// until is when WithWait ends the wait (zero: it does not): an
	// attempt held back from a shard that is down (claimGate) waits no
	// longer.
	until time.Time
}

// acquire is Lock (try false), TryLock (try true) and Ledger.Claim, for
// every kind.
func (c *Client) acquire(ctx context.Context, a acquisition, try bool, opts []AcquireOption) (l *Lease, err error) {
	k := a.k
	o, l, err := c.begin(ctx, a, opts)
	if l != nil || err != nil {
		return l, err
	}
	if o.hasWait && o.wait == 0 {
		try = true
	}

	start := time.Now()
	w := c.tel.startWait(ctx, k.name)
	args := attemptArgs{owner: c.newOwner() + a.ownerTag, lease: c.opt.leaseTime, fixed: o.hasLease, once: try}
	if o.hasWait {
		args.until = start.Add(o.wait)
	}
	if o.hasLease {
		args.lease = o.lease
	}
	errored := false // an attempt failed: its script may have run
	attempt := func(queue bool) (*Lease, time.Duration, error) {
		at := args
		at.queue = queue
		l, d, err := a.attempt(ctx, at)
		if lostReply(err) {
			errored = true
		}
		return l, d, err
	}
	defer func() {
		if l == nil && errored {
			// The call failed, and a lost reply may have left the lock
			// taken under owner: no attempt of this call comes after this.
			c.cleanup(a.kind, k, args.owner, args.lease)
		}
	}()
	switch {
	case try:
		l, _, err = attempt(false)
		if l == nil && err == nil {
			err = fmt.Errorf("lock %q: %w", k.name, ErrLocked)
		}
	default:
		var q waitQueue = &localQueue{c: c, k: k, shared: a.shared, claim: a.claim, lease: args.lease}
		if a.fair {
			q = &fairQueue{c: c, k: k, owner: args.owner}
		}
		l, err = c.wait(ctx, k, o, args.lease, start, q, func() (*Lease, time.Duration, error) { return attempt(a.fair) })
	}
	return c.endAcquire(k, w, start, l, err)
}

// begin is the start that every acquisition shares: the options, the ctx,
// the Client's state, and re-entry through ctx. It returns the options, or
// the lease re-entered, or an error; with either of the last two the call
// is over.
func (c *Client) begin(ctx context.Context, a acquisition, opts []AcquireOption) (acquireOptions, *Lease, error) {
	k := a.k
	o, err := buildAcquireOptions(k.name, opts)
	if err != nil {
		return o, nil, err
	}
	if a.claim && o.hasLease {
		return o, nil, fmt.Errorf("lock %q: Claim: WithLease does not apply: %w", k.name, ErrInvalid)
	}
	if err := ctxErr(ctx, k.name); err != nil {
		return o, nil, err
	}
	if c.isClosed() {
		return o, nil, fmt.Errorf("lock %q: %w", k.name, ErrClosed)
	}
	if a.check != nil {
		if err := a.check(); err != nil {
			return o, nil, err
		}
	}
	if a.claim {
		return o, nil, nil
	}
	key := a.leaseKey
	if key == nil {
		key = leaseKey{c, k.id}
	}
	if l, ok := ctx.Value(key).(*Lease); ok {
		l, err := l.reenter(ctx)
		return o, l, err
	}
	return o, nil, nil
}

func (c *Client) endAcquire(k *keys, w waitSpan, start time.Time, l *Lease, err error) (*Lease, error) {
	c.tel.endWait(w, k.name, time.Since(start), l, err)
	if l != nil && c.log.IsDebug() {
		c.log.Debug("lock acquired", "lock", k.name, "owner", l.owner, "token", l.token, "wait", time.Since(start))
	}
	return l, err
}

// A waitQueue is where a waiter waits for its turn to try again. Client.wait
// is the one loop of every waiter; the queue says whether the first attempt
// goes out before the waiter joins it, when its turn comes, what wakes it,
// and what its leaving does.
type waitQueue interface {
	// begin comes before the first attempt: it reports whether that attempt
	// goes out at once, before the waiter joins the queue, or the waiter
	// joins at once. After an error the call is over.
	begin() (first bool, err error)
	// join adds the waiter to the queue; turn is closed when the waiter's
	// attempts begin. After an error the call is over, and join has undone
	// what begin did.
	join() (turn <-chan struct{}, err error)
	// onTurn is called once turn is closed: what wakes the waiter for
	// another attempt (an unlock; the subscription confirmed or
	// re-established), whether to try at once, and how long to sleep at
	// most if the first attempt gave no figure (0: the lease).
	onTurn() (wake, ready <-chan struct{}, now bool, sleep time.Duration)
	// sawReady: the waiter attempted after ready fired.
	sawReady()
	// end is the waiter's last call, after begin, when the first attempt
	// ended the call or after join: acquired says whether it took the lock.
	end(acquired bool)
}

// wait is the wait of every kind: a first attempt if the queue lets it go
// out at once, then the waiter joins the queue and, from its turn on, tries
// again whenever an unlock wakes it, the lock's channel is (re)subscribed,
// or the holder's TTL (or the time to renew its place) runs out. attempt
// returns a lease, or how long to sleep at most, or an error; an error that
// is not transient ends the wait, a transient one is retried after a pause
// (backoff) while ctx and WithWait last.
func (c *Client) wait(ctx context.Context, k *keys, o acquireOptions, lease time.Duration, start time.Time, q waitQueue, attempt func() (*Lease, time.Duration, error)) (*Lease, error) {
	first, err := q.begin()
	if err != nil {
		return nil, fmt.Errorf("lock %q: %w", k.name, err)
	}
	var (
		retry backoff
		sleep time.Duration
	)
	if first {
		l, pttl, err := attempt()
		c.out.record(ctx, err, false)
		if unreachable(err) {
			// A wait rides out a failure to reach the store (a failover, a
			// restart) while its ctx and wait last.
			pttl, err = retry.next(c, k, ctx, err)
		}
		if l != nil || err != nil {
			q.end(l != nil)
			return l, err
		}
		sleep = pttl
	}
	turn, err := q.join()
	if err != nil {
		return nil, fmt.Errorf("lock %q: %w", k.name, err)
	}
	acquired := false
	defer func() { q.end(acquired) }()

	var deadline <-chan time.Time
	if o.hasWait {
		t := time.NewTimer(o.wait - time.Since(start))
		defer t.Stop()
		deadline = t.C
	}
	// Until its turn the waiter only watches turn; from then on it tries
	// again at each wake-up.
	var (
		ready  <-chan struct{}
		wake   <-chan struct{}
		back   <-chan struct{} // closed when the store answers again, during an outage
		timerC <-chan time.Time
		now    bool
		timed  bool // the attempt is due to the timer, not to a wake-up
	)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		if !now {
			select {
			case <-turn:
				var turnSleep time.Duration
				turn = nil
				wake, ready, now, turnSleep = q.onTurn()
				if sleep == 0 {
					sleep = turnSleep
				}
				if sleep <= 0 {
					sleep = lease
				}
				timer.Reset(sleep)
				timerC = timer.C
				continue
			case <-ready:
				ready = nil
				q.sawReady()
			case <-wake:
			case <-back:
				back = nil
			case <-timerC:
				timed = true
			case <-ctx.Done():
				return nil, ctxErr(ctx, k.name)
			case <-deadline:
				return nil, retry.waitErr(k, o.wait)
			case <-c.done:
				return nil, fmt.Errorf("lock %q: %w", k.name, ErrClosed)
			}
		}
		now = false
		probe := false
		if timed {
			// The Client's waiters retry on their timers one at a time;
			// the others wait for the outcome.
			timed = false
			var (
				down bool
				wait time.Duration
			)
			if probe, down, wait, back = c.out.probe(); !probe {
				timer.Reset(wait)
				continue
			}
			if down {
				// The store did not answer the last attempt: ask it
				// outside the connection pool before going through it
				// (then the attempt is still the probe: if the store
				// does not answer it, only one attempt failed).
				rctx, cancel := context.WithTimeout(ctx, maxBackoff)
				err := c.be.reachable(rctx)
				cancel()
				if err != nil {
					back = c.out.record(ctx, transientError{err}, true)
					timer.Reset(c.out.pause())
					continue
				}
			}
		}
		l, pttl, err := attempt()
		back = c.out.record(ctx, err, probe)
		if err != nil {
			if pttl, err = retry.next(c, k, ctx, err); err != nil {
				return nil, err
			}
			if back != nil {
				pttl = c.out.pause()
			}
		} else {
			retry.ok()
		}
		if l != nil {
			acquired = true
			return l, nil
		}
		if pttl <= 0 {
			pttl = time.Millisecond
		}
		timer.Reset(pttl)
	}
}

// testHookBeforeQueue, if set by a test, runs after a failed first attempt
// and before the goroutine joins this Client's queue for the lock.
var testHookBeforeQueue func(name string)

// A localQueue is the wait of every kind but the fair ones: this Client's
// queue for the lock (queue), of which only the head attempts. The first
// attempt goes out at once unless goroutines of this Client already wait
// for the lock (a claim's goes out all the same: its answer may be that the
// tick is done, which no wait changes); then the goroutine queues behind
// them. If the lock's channel was subscribed before that attempt (it
// lingers after the last wait), the wait needs no second attempt at
// subscribing: an unlock after the attempt either wakes the queue, or, if
// it lands before the goroutine joins it, is counted by the watch, and the
// goroutine tries again at once. A head that never attempted and inherits
// the turn from one that acquired sleeps for the lock's TTL or until an
// unlock.
type localQueue struct {
	c      *Client
	k      *keys
	shared bool // several may hold it: when the head acquires, the next tries at once
	claim  bool
	lease  time.Duration

	lg lingering
	w  *waiter
	q  *queue
}

func (l *localQueue) begin() (bool, error) {
	if !l.claim && l.c.hasWaiters(l.k) {
		return false, nil
	}
	l.lg = l.c.watchLingering(l.k)
	return true, nil
}

func (l *localQueue) join() (<-chan struct{}, error) {
	if testHookBeforeQueue != nil {
		testHookBeforeQueue(l.k.name)
	}
	w, q, err := l.c.enqueue(l.k, l.shared, l.lg)
	if err != nil {
		return nil, err
	}
	l.w, l.q = w, q
	return w.turn, nil
}

func (l *localQueue) onTurn() (wake, ready <-chan struct{}, now bool, sleep time.Duration) {
	if ready = l.c.takeReady(l.q); ready == l.lg.ready {
		ready = nil // confirmed before the first attempt
	}
	return l.w.wake, ready, l.w.attemptNow, l.w.sleep
}

func (l *localQueue) sawReady() { l.c.sawReady(l.q) }

func (l *localQueue) end(acquired bool) {
	if l.w == nil {
		l.c.endWatch(l.k.channel, l.lg)
		return
	}
	l.c.dequeue(l.q, l.w, acquired, l.lease)
}

// A transientError is an attempt's failure to reach the store, or to have
// an acquisition acknowledged: a waiter tries again after a pause, while
// its ctx and wait last.
type transientError struct{ error }

func (e transientError) Unwrap() error { return e.error }

// transient marks err as transient if the backend says it is one (for
// Redis: a network failure, a server that is loading, read-only, down or
// busy), or if it is ErrNoAck. Any other error (a script error, a
// permission) ends a wait.
func (c *Client) transient(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNoAck) || c.be.transient(err) {
		return transientError{err}
	}
	return err
}

// unreachable reports whether err is an attempt's failure to reach the
// store (transient, but not ErrNoAck): a Lock rides it out from its first
// attempt on. A first attempt that replicas did not acknowledge fails at
// once, as the store answered; later ones are retried while the wait lasts.
func unreachable(err error) bool { return lostReply(err) && !errors.Is(err, ErrNoAck) }

// lostReply reports whether err is an attempt's transient failure: its
// script may have run although the reply did not arrive.
func lostReply(err error) bool {
	if err == nil {
		return false // no errors.As: its target would escape, an allocation per attempt
	}
	var tr transientError
	return errors.As(err, &tr)
}

// An outage is a Client's view of whether the store answers, and the gate
// through which its waiters retry on their timers. go-redis counts each
// failure to dial a new connection (never less: a success does not reset
// it), and once a pool has counted as many as its size, it dials no more
// but from a goroutine of its own, once a second. Waiters that each retried
// on their own (each failed attempt is four dials' worth, with go-redis's
// own retries) tripped that within a second or two of a restart, and then
// took the lock up to a second after the store was back. So the waiters
// whose timers fire try one at a time across the Client (the probe); the
// others wait for the probe's outcome. Once an attempt has failed to reach
// the store, the probe begins with a PING on the shared Pub/Sub connection,
// which dials outside the pool's count, a pause apart (25ms, doubling up to
// maxBackoff), and attempts only once that is answered; the first reply to
// an attempt ends the outage and wakes every waiter at once. Waiters woken by an unlock or by the Pub/Sub connection's
// resubscription (it reconnects on its own every 100ms) try at once,
// without the gate.
type outage struct {
	mu      sync.Mutex
	probing bool          // a probe is in flight
	down    bool          // the last attempt failed to reach the store
	back    chan struct{} // closed at the next reply from the store; nil if no one waits for it
	n       int           // failed attempts in a row
	next    time.Time     // while down, when the next probe may go out
}

// probe reports whether a waiter whose timer fired may go now (it is then
// the probe): when no probe is in flight and, during an outage, the pause
// since the last failure has passed; down says the store did not answer the
// last attempt. Otherwise it returns how long to wait before asking again,
// and the channel closed at the next reply from the store.
func (o *outage) probe() (ok, down bool, wait time.Duration, back <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	wait = maxBackoff
	if !o.probing {
		if wait = time.Until(o.next); !o.down || wait <= 0 {
			o.probing = true
			return true, o.down, 0, nil
		}
	}
	if o.back == nil {
		o.back = make(chan struct{})
	}
	return false, o.down, wait, o.back
}

// record takes an attempt's outcome (probe: it was the probe). A reply (err
// nil, or an error that is not a failure to reach the store) ends the
// outage and wakes every waiter that waits for it; a failure to reach the
// store starts the outage or prolongs it. While the outage lasts, record
// returns the channel closed at the next reply, else nil.
func (o *outage) record(ctx context.Context, err error, probe bool) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	if probe {
		o.probing = false
	}
	switch {
	case unreachable(err):
		o.down = true
		o.n++
		o.next = time.Now().Add(min(25*time.Millisecond<<min(o.n-1, 4), maxBackoff))
		if o.back == nil {
			o.back = make(chan struct{})
		}
		return o.back
	case err != nil && ctx.Err() != nil:
		// The waiter left: its attempt says nothing of the store.
		if o.down {
			return o.back
		}
		return nil
	}
	o.down, o.n = false, 0
	if o.back != nil {
		close(o.back)
		o.back = nil
	}
	return nil
}

// pause is how long until the next probe may go out.
func (o *outage) pause() time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return max(time.Until(o.next), time.Millisecond)
}

// maxBackoff is the longest pause of a waiter between attempts that
// failed to reach the store. It is short, so that a waiter takes the lock
// soon after the store comes back even when no reconnect wakes it.
const maxBackoff = 250 * time.Millisecond

// backoff is the pause of a waiter after its attempts failed to reach the
// store: 25ms, doubling up to maxBackoff. Its zero value is ready to use.
type backoff struct {
	n    int   // failures in a row
	last error // the last failure, while they go on
}

// next returns how long to pause after err, or err if it is not transient
// or ctx has ended. It logs the first failure of a series as a warning,
// the others at debug level.
func (b *backoff) next(c *Client, k *keys, ctx context.Context, err error) (time.Duration, error) {
	var tr transientError
	if !errors.As(err, &tr) || errors.Is(err, errors.ErrUnsupported) || ctx.Err() != nil || c.isClosed() {
		return 0, err
	}
	d := min(25*time.Millisecond<<b.n, maxBackoff)
	if d < maxBackoff {
		b.n++
	}
	if b.last == nil {
		c.log.Warn("lock attempt failed; the waiter tries again", "lock", k.name, "retry_in", d, "error", err)
	} else if c.log.IsDebug() {
		c.log.Debug("lock attempt failed again", "lock", k.name, "retry_in", d, "error", err)
	}
	b.last = err
	return d, nil
}

// ok ends a series of failures.
func (b *backoff) ok() { *b = backoff{} }

// waitErr is the error of a wait that WithWait ended: ErrLocked, with the
// last failure to reach the store if the attempts were failing.
func (b *backoff) waitErr(k *keys, wait time.Duration) error {
	if b.last != nil {
		return fmt.Errorf("lock %q: not acquired within %v: %w (the store did not answer: %w)", k.name, wait, ErrLocked, b.last)
	}
	return fmt.Errorf("lock %q: not acquired within %v: %w", k.name, wait, ErrLocked)
}

// badReply is the error for an acquire-type reply that is not a lease.
func badReply(k *keys, r acquireReply) error {
	switch r.status {
	case acqWrongType:
		return fmt.Errorf("lock %q: key %q holds another type, not a lock of this kind: %w", k.name, k.lock, ErrBadKey)
	case acqNoTTL:
		return fmt.Errorf("lock %q: key %q has no TTL, not one of our locks: %w", k.name, k.lock, ErrBadKey)
	case acqTokenType:
		return fmt.Errorf("lock %q: key %q holds another type, not a fencing token: %w", k.name, k.token, ErrBadKey)
	}
	return fmt.Errorf("lock %q: unexpected reply %d/%d from acquire", k.name, r.status, r.value)
}

// ctxErr is nil while ctx is live, else its error wrapped with the lock's
// name, and with its cause when that says more.
func ctxErr(ctx context.Context, name string) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, err) {
		return fmt.Errorf("lock %q: %w (%w)", name, err, cause)
	}
	return fmt.Errorf("lock %q: %w", name, err)
}
