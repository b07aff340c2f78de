package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"
)

// closeTimeout bounds how long Close spends releasing the leases still held.
const closeTimeout = 5 * time.Second

// cleanupTimeout bounds a background release after a failed attempt.
const cleanupTimeout = 5 * time.Second

// backend is where locks live: Redis, or this process's memory. Its replies
// follow the Lua scripts in scripts/; the Client does everything else.
// Each kind of lock and the fleet's store add their part (fairBackend,
// rwBackend, semBackend, ledgerBackend, eventBackend, inspectBackend,
// memberBackend, replicaBackend); both backends have every part.
type backend interface {
	fairBackend
	rwBackend
	semBackend
	ledgerBackend
	eventBackend
	inspectBackend
	memberBackend
	freezeBackend
	replicaBackend
	backfillBackend

	// acquire runs acquire.lua: holds is 0 for a new lease.
	acquire(ctx context.Context, k *keys, owner string, lease time.Duration, holds int) (acquireReply, error)
	// renew runs renew.lua: false when owner no longer holds the lock.
	renew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error)
	// renewAll renews each lease of rs as its kind does (renew, rwRenew,
	// semRenew) and sets its ok and err; the Redis backend sends them in
	// one pipeline. ctx bounds the call.
	renewAll(ctx context.Context, rs []renewing)
	// release runs release.lua. The unlock message it publishes (the
	// owner id) wakes the waiters of every other Client; the releasing
	// Client wakes its own (Client.release).
	release(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error)
	// forceUnlock runs forceunlock.lua.
	forceUnlock(ctx context.Context, k *keys) (int64, error)
	// subscribe adds a reference to k's unlock channel. The channel it
	// returns is closed once the subscription is in place, so that an
	// attempt made after it cannot miss the next unlock.
	subscribe(k *keys) <-chan struct{}
	// unsubscribe drops a reference taken by subscribe.
	unsubscribe(k *keys)
	// subscribed returns the ready channel of k's subscription if it is in
	// place and confirmed now (it lingers a while after its last waiter
	// left), else nil. The channel identifies that subscription.
	subscribed(k *keys) <-chan struct{}
	close() error
	// transient reports whether err, from one of the calls above, is a
	// failure to reach the store that may pass (a waiter tries again).
	transient(err error) bool
	// storeID names the store, as far as the backend can tell; Multi
	// orders its parts by it.
	storeID() string
	// ping checks that the store answers.
	ping(ctx context.Context) error
	// reachable checks that the store answers, without adding to the
	// connection pool's count of failed dials (outage).
	reachable(ctx context.Context) error
}

// ledgerBackend is the tick ledgers' part of a backend (Ledger).
type ledgerBackend interface {
	// claim runs claim.lua with the ledger at key ledger.
	claim(ctx context.Context, k *keys, ledger, owner string, lease time.Duration, tick int64, ca claimArgs) (claimReply, error)
	// finish runs finish.lua on the ledger at lg: it records how owner's
	// claim of tick ended and appends f.entry to lg's history. Like
	// release, it does not wake this Client's own waiters.
	finish(ctx context.Context, k *keys, lg ledgerRef, owner string, holds int, tick int64, f finishArgs) (int64, error)
	// ledgerPass runs pass.lua: 1 passed, 0 passed already (or the
	// store's clock not settled past upTo), or a type error's status.
	ledgerPass(ctx context.Context, lg ledgerRef, upTo int64, settled time.Duration, entry map[string]string) (int64, error)
	// history reads lg's history stream, newest first: of its latest
	// lg.keep entries, those not older than lg.maxAge (the scripts trim
	// both approximately, so the stream may hold more).
	history(ctx context.Context, lg ledgerRef, limit int, before string) ([]Entry, error)
	// ledgerPause runs pause.lua: it sets a ledger's pause with p, or
	// clears it (and the failures in a row). It reports false, changing
	// nothing, for a p.until not after the store's clock.
	ledgerPause(ctx context.Context, key string, paused bool, p pauseArgs) (bool, error)
	// ledgerTrigger runs trigger.lua: it adds one to the triggers field
	// of the ledger at key, records the request under that number in the
	// ledger at runs, ordered with params (JSON) unless params is "", and
	// returns it; a retry of request id returns the same number.
	ledgerTrigger(ctx context.Context, key, runs, id, params string) (int64, error)
	// ledgerParams reads the record trigger.lua kept for request n ("" none).
	ledgerParams(ctx context.Context, key string, n int64) (string, error)
	// ledger reads a ledger's fields (empty if there is none; an error
	// wrapping ErrBadKey if the key is not a hash) and whether k is held.
	ledger(ctx context.Context, k *keys, key string) (map[string]string, bool, error)
	// chainRuns reads the chain record of the ledger at key (finish.lua's
	// KEYS[7]): its runs after tick after, oldest first, at most
	// maxChainRuns.
	chainRuns(ctx context.Context, key string, after int64) ([]ChainRun, error)
	// chainFloor sets the ledger's field chainsince to now if it has
	// none, and reads it (chainfloor.lua).
	chainFloor(ctx context.Context, key string) (int64, error)
	// ledgerReplace reads the ledger's field replace (0 if none).
	ledgerReplace(ctx context.Context, key string) (int64, error)
}

// ledgerRef is where a ledger lives in the store and how its history is
// kept, as plain values (Ledger.ref).
type ledgerRef struct {
	id      string        // the ledger's id, named in a finish's message
	key     string        // the ledger hash
	history string        // its history stream
	fair    bool          // its claims wait in the FairMutex's queue
	keep    int           // history entries kept
	maxAge  time.Duration // history entries' lifetime
}

// ledgerRenew is how often a claim or a finish renews its ledger's
// lifetime: only once this has passed since the last renewal (the
// ledger's field renewed), to ledgerLife, so that a ledger outlives its
// last claim or finish by LedgerTTL at least, and most claims and finishes
// spare the PEXPIRE (claim.lua, finish.lua).
const (
	ledgerRenew = 24 * time.Hour
	ledgerLife  = LedgerTTL + ledgerRenew
)

// historyRenew is how often a finish drops the entries of lg's history
// older than lg.maxAge and renews the stream's lifetime (to maxAge and
// this), rather than at every append: a 16th of maxAge, at most an hour.
// Readers hide the entries older than maxAge that are left meanwhile.
func (lg ledgerRef) historyRenew() time.Duration { return min(lg.maxAge/16, time.Hour) }

// finishArgs are how a claimed tick ended (Record), as finish.lua takes
// them.
type finishArgs struct {
	done    bool
	outcome string
	tries   int
	seen    int64
	entry   map[string]string
	// streak: streakFailed, streakReset or streakKeep; pauseAfter,
	// pauseBy and pauseNote: the pause a failure sets (Record.PauseAfter).
	streak             string
	pauseAfter         int
	pauseBy, pauseNote string
	chain              bool // add a done tick to the ledger's chain record (Record.Chain)
}

// pauseArgs are a pause as pause.lua takes it (PauseInfo): until in ms on
// the store's clock, 0 for none.
type pauseArgs struct {
	by, note string
	until    int64
}

type acquireReply struct {
	status int64 // see acquire.lua
	value  int64 // token, pttl or holds, by status
}

const (
	acqAcquired  = 1
	acqHeld      = 0
	acqGone      = -1
	acqWrongType = -2
	acqNoTTL     = -3
	acqTokenType = -4
	acqMismatch  = -5

	relReleased = 1
	relDropped  = 2
	relNotHeld  = 0
	relMismatch = -5
)

// Client hands out locks kept in one backend. Create it with New (Redis) or
// NewMemory (this process only), and Close it to release every lease it
// still holds. A Client is safe for concurrent use; one per process is the
// usual shape, shared by all its goroutines.
type Client struct {
	be    backend
	opt   options
	log   hclog.Logger
	tel   *telemetry
	owner string // clientID:instance, the prefix of every owner id
	seq   atomic.Uint64

	done chan struct{} // closed by Close

	// bg bounds background clean-ups; Close cancels it.
	bg       context.Context
	bgCancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	queues  map[string][]*queue // waiters by channel: one queue per kind of lease waited for
	leases  map[*Lease]struct{}
	watches map[string]*watch      // unlocks seen by channel, for first attempts on a lingering subscription
	fair    map[string]*fairWaiter // waiters for fair locks, by owner id

	ticks tickBoard // the ticks heard finished (Ledger.Watch)
	gate  claimGate // claims held back from shards found unreachable
	out   outage    // the store did not answer the waiters' last attempts

	renew renewer // renews the leases taken without WithLease (the watchdog)

	wg sync.WaitGroup // the renewer's loop and clean-ups
}

// New returns a Client that keeps locks in Redis. rdb may be a standalone,
// Sentinel (failover) or Cluster client; the Client does not close it.
//
// Give rdb ContextTimeoutEnabled: true so that a ctx deadline also bounds a
// command to a server that has stopped answering; without it go-redis waits
// for its ReadTimeout. Renewal deadlines are kept either way.
//
// New sends nothing to Redis. It returns ErrInvalid for bad options.
func New(rdb redis.UniversalClient, opts ...Option) (*Client, error) {
	if rdb == nil {
		return nil, fmt.Errorf("lock: New: nil redis client: %w", ErrInvalid)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	c := newClient(o)
	be := newRedisBackend(rdb, c.wake, c.wakeFair, c.heard, c.owner+":", c.log)
	be.ack = o.ack
	be.lease, be.leaseMS = o.leaseTime, o.leaseTime.Milliseconds()
	c.setBackend(be)
	return c, nil
}

// setBackend makes be the Client's backend.
func (c *Client) setBackend(be backend) {
	c.be = be
}

func newClient(o options) *Client {
	c := &Client{
		opt:     o,
		log:     o.logger.Named("lock"),
		owner:   o.clientID + ":" + randomID(),
		done:    make(chan struct{}),
		queues:  make(map[string][]*queue),
		leases:  make(map[*Lease]struct{}),
		watches: make(map[string]*watch),
		fair:    make(map[string]*fairWaiter),
	}
	c.bg, c.bgCancel = context.WithCancel(context.Background())
	c.renew.init(c)
	c.tel = newTelemetry(o, c.log)
	return c
}

// Waiting is how many goroutines of this Client wait in Lock for a lock
// with the given name now, of any kind. A waiter for a fair lock counts
// once it has its place in the lock's queue.
func (c *Client) Waiting(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, qs := range c.queues {
		for _, q := range qs {
			if q.k.name == name {
				n += len(q.waiters)
			}
		}
	}
	for _, w := range c.fair {
		if w.k.name == name && w.queued {
			n++
		}
	}
	return n
}

// ID is the Client's id, as set by WithClientID.
func (c *Client) ID() string { return c.opt.clientID }

// Mutex returns the reentrant lock with the given name, in the manner of
// Redisson's RLock. A bad name (empty, or with { or }) gives a Locker whose
// every call returns ErrInvalid and sends nothing.
func (c *Client) Mutex(name string) Locker {
	if err := validName(name); err != nil {
		return invalidLocker{name: name, err: err}
	}
	return newMutex(c, name)
}

// ForceUnlock deletes the lock with the given name whoever holds it, of
// every kind (Mutex and FairMutex, RWMutex, Semaphore), and wakes its
// waiters; the holder learns it lost the lock at its next renewal.
// It reports whether there was a lock. It is for operators (Redisson's
// forceUnlock); it returns ErrBadKey if the key is not a lock, and leaves
// such a key as it is.
func (c *Client) ForceUnlock(ctx context.Context, name string) (bool, error) {
	if err := validName(name); err != nil {
		return false, err
	}
	if c.isClosed() {
		return false, fmt.Errorf("lock %q: %w", name, ErrClosed)
	}
	found := false
	var errs []error
	for _, f := range []struct {
		what  string
		k     *keys
		force func(context.Context, *keys) (int64, error)
	}{
		{"lock", newKeys(c.opt.prefix, name), c.be.forceUnlock},
		{"read-write lock", rwKeys(c.opt.prefix, name), c.be.rwForceUnlock},
		{"semaphore", semKeys(c.opt.prefix, name), c.be.semForceUnlock},
	} {
		n, err := f.force(ctx, f.k)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("lock %q: force unlock: %w", name, err))
		case n == acqWrongType:
			errs = append(errs, fmt.Errorf("lock %q: force unlock of its %s: key %q, or one beside it, holds another type (left as it is): %w", name, f.what, f.k.lock, ErrBadKey))
		}
		found = found || n == 1
	}
	if found {
		c.log.Info("lock force-unlocked", "lock", name)
	}
	return found, errors.Join(errs...)
}

// Close releases every lease the Client still holds (each lease's context
// is cancelled with ErrReleased and ErrClosed), makes waiting Lock calls
// return ErrClosed, stops the watchdog and closes the Pub/Sub connection.
// It returns once all of that is done, or the first error from releasing.
// It does not close the redis client given to New. A second Close returns
// nil.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	leases := make([]*Lease, 0, len(c.leases))
	for l := range c.leases {
		leases = append(leases, l)
	}
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	for _, l := range leases {
		if err := l.releaseAll(ctx, fmt.Errorf("%w: %w", ErrReleased, ErrClosed)); err != nil {
			errs = append(errs, err)
		}
	}
	c.bgCancel()
	c.renew.close()
	c.wg.Wait()
	errs = append(errs, c.be.close())
	return errors.Join(errs...)
}

func (c *Client) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *Client) newOwner() string {
	var buf [64]byte // one allocation, the string, for a usual client id
	return string(strconv.AppendUint(append(append(buf[:0], c.owner...), ':'), c.seq.Add(1), 10))
}

// track registers a new lease so that Close can release it. It reports
// false when the Client was closed meanwhile.
func (c *Client) track(l *Lease) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.leases[l] = struct{}{}
	return true
}

func (c *Client) untrack(l *Lease) {
	c.mu.Lock()
	delete(c.leases, l)
	c.mu.Unlock()
}

// cleanup releases, in the background, a lease that a failed Lock call may
// have taken although it saw an error (a lost reply, a ctx that ended
// mid-call). The owner id is unique to that call, and no attempt of it
// comes after the clean-up, so this touches no one else's lock. It gives up
// after within, or at Close; the lock, if it was taken, then expires within
// its lease. After Close it releases at once, on the caller's goroutine.
func (c *Client) cleanup(kd kind, k *keys, owner string, within time.Duration) {
	within = min(within, cleanupTimeout)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), min(within, time.Second))
		defer cancel()
		_, _ = kd.release(ctx, k, owner, 1, 1)
		return
	}
	c.wg.Add(1) // under c.mu: Close's Wait starts after closed is set
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.bg, within)
		defer cancel()
		if _, err := kd.release(ctx, k, owner, 1, 1); err != nil && c.log.IsDebug() {
			c.log.Debug("clean-up after failed attempt", "lock", k.name, "owner", owner, "error", err)
		}
	}()
}

// release runs the release script. When it frees the lock (or may have),
// it wakes this Client's own waiters at once: the backend does not echo a
// Client's own unlocks back to it, which spares the Pub/Sub round trip and
// a second wake-up.
func (c *Client) release(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error) {
	n, err := c.be.release(ctx, k, owner, holds, drop)
	if err != nil || n == relReleased {
		c.wake(k.channel)
	}
	return n, err
}

// A queue holds the goroutines of this Client that wait for one lock name,
// first come first served. Only its head talks to Redis: one unlock wakes
// one attempt, and a goroutine that has just unlocked cannot barge ahead of
// those already waiting here. Across Clients there is no order.
type queue struct {
	k         *keys
	shared    bool // when the head acquires, the next tries at once
	waiters   []*waiter
	ready     <-chan struct{} // the subscription is in place
	readySeen bool            // a head has already attempted after ready
}

type waiter struct {
	turn chan struct{} // closed when the waiter becomes the head
	wake chan struct{} // an unlock message (buffer of one)

	// Set before turn is closed, by the waiter that left the head.
	attemptNow bool          // the previous head gave up: try at once
	sleep      time.Duration // the previous head acquired: the lock's TTL
}

// A watch counts the unlocks of one lock name while goroutines make a
// first attempt outside the queue on a lingering subscription: an unlock
// that lands between that attempt and the goroutine joining the queue wakes
// no one, and the count tells the goroutine to try again at once.
type watch struct {
	n      int    // goroutines watching
	unlock uint64 // unlocks seen on the channel
}

// lingering is what a goroutine knows of k's subscription before its first
// attempt: if it was in place (ready is not nil), the unlocks it had seen.
type lingering struct {
	ready <-chan struct{}
	seen  uint64
}

// watchLingering returns k's subscription if it is in place now, and starts
// counting k's unlocks if so, until enqueue or unwatch.
func (c *Client) watchLingering(k *keys) lingering {
	ready := c.be.subscribed(k)
	if ready == nil {
		return lingering{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.watches[k.channel]
	if w == nil {
		w = &watch{}
		c.watches[k.channel] = w
	}
	w.n++
	return lingering{ready: ready, seen: w.unlock}
}

// unwatch ends a watch of channel started by watchLingering and reports
// whether an unlock came since. c.mu is held.
func (c *Client) unwatch(channel string, lg lingering) bool {
	if lg.ready == nil {
		return false
	}
	w := c.watches[channel]
	missed := w.unlock != lg.seen
	if w.n--; w.n == 0 {
		delete(c.watches, channel)
	}
	return missed
}

// endWatch is unwatch for a goroutine that does not wait.
func (c *Client) endWatch(channel string, lg lingering) {
	if lg.ready == nil {
		return
	}
	c.mu.Lock()
	c.unwatch(channel, lg)
	c.mu.Unlock()
}

// queueOf returns the queue of waiters for k's kind of lease, or nil. c.mu
// is held.
func (c *Client) queueOf(k *keys) *queue {
	for _, q := range c.queues[k.channel] {
		if q.k.id == k.id {
			return q
		}
	}
	return nil
}

// enqueue adds a waiter for k at the tail of its queue, subscribing to k's
// channel if the queue is new, and returns the waiter and its queue. It
// ends lg's watch; if an unlock came since and the waiter is the head, it
// tries at once.
func (c *Client) enqueue(k *keys, shared bool, lg lingering) (*waiter, *queue, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	missed := c.unwatch(k.channel, lg)
	if c.closed {
		return nil, nil, ErrClosed
	}
	q := c.queueOf(k)
	if q == nil {
		q = &queue{k: k, shared: shared}
		q.ready = c.be.subscribe(k)
		c.queues[k.channel] = append(c.queues[k.channel], q)
	}
	w := &waiter{turn: make(chan struct{}), wake: make(chan struct{}, 1)}
	q.waiters = append(q.waiters, w)
	if len(q.waiters) == 1 {
		w.attemptNow = missed
		close(w.turn)
	}
	return w, q, nil
}

// dequeue removes w. If w was the head, the next waiter gets its turn:
// acquired tells it whether w took the lock (then it sleeps for sleep, the
// lock's TTL, or until an unlock, unless the lock is shared) or gave up
// (then it tries at once, in case w swallowed a wake-up).
func (c *Client) dequeue(q *queue, w *waiter, acquired bool, sleep time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if i == 0 && len(q.waiters) > 0 {
			next := q.waiters[0]
			next.attemptNow = !acquired || q.shared
			next.sleep = sleep
			close(next.turn)
		}
		break
	}
	if len(q.waiters) == 0 {
		qs := c.queues[q.k.channel]
		for i, x := range qs {
			if x == q {
				qs = append(qs[:i], qs[i+1:]...)
				break
			}
		}
		if len(qs) == 0 {
			delete(c.queues, q.k.channel)
		} else {
			c.queues[q.k.channel] = qs
		}
		c.be.unsubscribe(q.k)
	}
}

// takeReady returns the queue's ready channel for a new head, or nil when an
// earlier head already attempted after it fired.
func (c *Client) takeReady(q *queue) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q.readySeen {
		return nil
	}
	return q.ready
}

func (c *Client) sawReady(q *queue) {
	c.mu.Lock()
	q.readySeen = true
	c.mu.Unlock()
}

// wake is called by the backend when a lock's channel says it was unlocked
// (also while the subscription only lingers), or the subscription was
// re-established after a reconnect, and by release: the head of each queue
// on the channel tries again, watches count it, and the fair waiters on the
// channel try again.
func (c *Client) wake(channel string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w := c.watches[channel]; w != nil {
		w.unlock++
	}
	for _, q := range c.queues[channel] {
		if len(q.waiters) > 0 {
			poke(q.waiters[0].wake)
		}
	}
	for _, w := range c.fair {
		if w.k.channel == channel {
			poke(w.wake)
		}
	}
}

// poke sends on a wake-up channel with a buffer of one, unless one is
// pending already.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// leaseKey finds, in a lease's context, the lease of one lock of one Client
// (by keys.id): reentrancy goes through the context.
type leaseKey struct {
	c  *Client
	id string
}

// invalidLocker is the Locker for a bad name: every call fails the same way.
type invalidLocker struct {
	name string
	err  error
}

func (l invalidLocker) Name() string { return l.name }
func (l invalidLocker) Lock(context.Context, ...AcquireOption) (*Lease, error) {
	return nil, l.err
}
func (l invalidLocker) TryLock(context.Context, ...AcquireOption) (*Lease, error) {
	return nil, l.err
}

// randomID returns 12 random hex digits: what tells this Client's owner ids
// from those of another Client with the same client id.
func randomID() string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go 1.24 and later)
	return hex.EncodeToString(b[:])
}
