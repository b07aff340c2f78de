package core

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"
)

var (
	// lib.lua goes in front of the scripts that use its functions.
	//go:embed scripts/lib.lua
	libSrc string
	//go:embed scripts/acquire.lua
	acquireSrc string
	//go:embed scripts/renew.lua
	renewSrc string
	//go:embed scripts/release.lua
	releaseSrc string
	//go:embed scripts/forceunlock.lua
	forceUnlockSrc string
	//go:embed scripts/claim.lua
	claimSrc string
	//go:embed scripts/finish.lua
	finishSrc string
	//go:embed scripts/pass.lua
	passSrc string
	//go:embed scripts/pause.lua
	pauseSrc string

	// Run sends EVALSHA, and EVAL on NOSCRIPT.
	acquireScript     = redis.NewScript(libSrc + acquireSrc)
	renewScript       = redis.NewScript(renewSrc)
	releaseScript     = redis.NewScript(releaseSrc)
	forceUnlockScript = redis.NewScript(forceUnlockSrc)
	claimScript       = redis.NewScript(libSrc + claimSrc)
	finishScript      = redis.NewScript(libSrc + finishSrc)
	passScript        = redis.NewScript(libSrc + passSrc)
	pauseScript       = redis.NewScript(libSrc + pauseSrc)
)

// tokenTTL is how long a fencing token counter lives after it was seeded.
// Past it, tokens still grow: the next is seeded from the server's clock.
const tokenTTL = 24 * time.Hour

// run is script.Run (EVALSHA, then EVAL if the server answers NOSCRIPT),
// telling a send clock in ctx (withSent) when the script ran only at the
// second command.
func run(ctx context.Context, c redis.Scripter, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if renewals[script] {
		return script.Eval(ctx, c, keys, args...)
	}
	cmd := script.EvalSha(ctx, c, keys, args...)
	if err := cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") { // HasErrorPrefix allocates
		resent(ctx)
		return script.Eval(ctx, c, keys, args...)
	}
	return cmd
}

// renewals are the scripts that renew a lease. They are sent whole (EVAL),
// never by SHA first: a renewal must take one round trip, also the first
// after a restart emptied the server's script cache, or a slow network
// could cost the lease the second. They are short, and sent every lease/3.
var renewals = map[*redis.Script]bool{renewScript: true, rwRenewScript: true, semRenewScript: true}

// sentKey carries a send clock: a *time.Time that holds when the request
// that takes or renews a lease was sent, which the lease's time counts
// from.
type sentKey struct{}

// withSent returns ctx with the send clock p, which it sets to now: the
// backend moves it on when it has to send the request again before it
// runs (a script the server did not have), so that the lease's time does
// not count the round trip that ran nothing.
func withSent(ctx context.Context, p *time.Time) context.Context {
	*p = time.Now()
	return context.WithValue(ctx, sentKey{}, p)
}

// resent moves ctx's send clock, if it has one, to now. It is called on the
// goroutine that made the request, before the request is sent again.
func resent(ctx context.Context) {
	if p, ok := ctx.Value(sentKey{}).(*time.Time); ok {
		*p = time.Now()
	}
}

// releasedTTL is how long the release scripts remember that an owner
// released its lease, so that a client retry of the release after a lost
// reply (go-redis retries a command whose connection failed) reports
// success instead of "not held". It outlasts go-redis's retries.
const releasedTTL = 30 * time.Second

// subscribeTimeout bounds the write of a SUBSCRIBE or UNSUBSCRIBE command.
const subscribeTimeout = 5 * time.Second

// linger is how long a channel stays subscribed after its last waiter left,
// so that a Client that waits for the same lock again soon (a replica that
// runs the same job every tick) neither resubscribes nor waits for a
// confirmation.
const linger = time.Second

type redisBackend struct {
	rdb      redis.UniversalClient
	wake     func(channel string)
	heard    func(channel string, ev TickEvent, ledger string) // a finish's message, from another Client
	wakeFair func(owner string)                                // a fair lock's unlock addressed to one waiter
	ack      *ackOptions                                       // WithReplicaAck, WithAOFAck
	self     string                                            // the prefix of this Client's owner ids: its own unlocks
	log      hclog.Logger

	mu       sync.Mutex
	closed   bool
	ps       *redis.PubSub // one per Client, opened by the first waiter
	subs     map[string]*subscription
	handlers map[string]map[*handler]struct{} // Subscribe, by channel
	confirms map[string]bool                  // the channels of handlers: whether the server confirmed each
	ops      []subOp                          // SUBSCRIBE and UNSUBSCRIBE to send, in order
	kick     chan struct{}                    // ops were added
	stop     chan struct{}                    // closed by close
	wg       sync.WaitGroup                   // the dispatcher and the sender

	batch batch     // claims and finishes on their way (runBatched)
	conns keptConns // the connections batches run on (renewAll, sendBatch)

	lease   time.Duration // the Client's watchdog lease (WithLeaseTime), and
	leaseMS any           // it in milliseconds, boxed once: see ms
}

// ms is d in milliseconds, as a script's argument. The durations that
// every Lock and Unlock sends (the Client's lease, tokenTTL, releasedTTL)
// are boxed once: boxing an int64 above 255 costs an allocation.
func (b *redisBackend) ms(d time.Duration) any {
	switch d {
	case b.lease:
		if b.leaseMS != nil {
			return b.leaseMS
		}
	case tokenTTL:
		return int64(tokenTTL / time.Millisecond) // constants: boxed without allocation
	case releasedTTL:
		return int64(releasedTTL / time.Millisecond)
	}
	return d.Milliseconds()
}

// subOp is a SUBSCRIBE (sub) or UNSUBSCRIBE of one channel. They are sent
// by one goroutine, in the order they were asked for, so that no caller
// holds a lock across network I/O.
type subOp struct {
	sub     bool
	channel string
}

// subscription is one channel of the shared Pub/Sub connection.
type subscription struct {
	channel string
	refs    int           // this Client's queues and fair waiters that need it
	active  bool          // SUBSCRIBE sent, and no UNSUBSCRIBE since
	pending int           // SUBSCRIBE commands sent and not yet confirmed
	ready   chan struct{} // closed at the confirmation of the current SUBSCRIBE
	isReady bool
	idle    time.Time // when refs fell to 0
}

func newRedisBackend(rdb redis.UniversalClient, wake, wakeFair func(string), heard func(string, TickEvent, string), self string, log hclog.Logger) *redisBackend {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	if heard == nil {
		heard = func(string, TickEvent, string) {}
	}
	return &redisBackend{
		rdb: rdb, wake: wake, wakeFair: wakeFair, heard: heard, self: self, log: log,
		subs:     make(map[string]*subscription),
		handlers: make(map[string]map[*handler]struct{}),
		confirms: make(map[string]bool),
		kick:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
	}
}

func (b *redisBackend) acquire(ctx context.Context, k *keys, owner string, lease time.Duration, holds int) (acquireReply, error) {
	keys := []string{k.lock, k.token}
	args := []any{owner, b.ms(lease), holds, b.ms(max(tokenTTL, 2*lease))}
	var cmd *redis.Cmd
	if holds == 0 {
		cmd = b.runAcked(ctx, acquireScript, keys, args...) // a new lease; a re-entry changes only a count
	} else {
		cmd = run(ctx, b.rdb, acquireScript, keys, args...)
	}
	v, err := cmd.Int64Slice()
	if err != nil {
		return acquireReply{}, err
	}
	if len(v) != 2 {
		return acquireReply{}, fmt.Errorf("acquire: %d values in reply, want 2", len(v))
	}
	return acquireReply{status: v[0], value: v[1]}, nil
}

// acked returns script's Run, with acknowledgement as the Client asks.
func (b *redisBackend) acked(script *redis.Script) func(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return func(ctx context.Context, _ redis.Scripter, keys []string, args ...any) *redis.Cmd {
		return b.runAcked(ctx, script, keys, args...)
	}
}

func (b *redisBackend) renew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error) {
	n, err := b.runAcked(ctx, renewScript, []string{k.lock}, owner, lease.Milliseconds()).Int64()
	return n == 1, err
}

func (b *redisBackend) release(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error) {
	o := any(owner) // boxed once, sent twice
	return run(ctx, b.rdb, releaseScript, []string{k.lock, k.channel, k.released(owner)},
		o, holds, drop, o, b.ms(releasedTTL)).Int64()
}

func (b *redisBackend) forceUnlock(ctx context.Context, k *keys) (int64, error) {
	return forceUnlockScript.Run(ctx, b.rdb, []string{k.lock, k.channel}).Int64()
}

func (b *redisBackend) subscribe(k *keys) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.subs[k.channel]
	if s == nil {
		s = &subscription{channel: k.channel}
		b.subs[k.channel] = s
	}
	s.refs++
	if s.active || b.closed {
		return s.ready // confirmed already, or soon
	}
	s.active = true
	s.ready, s.isReady = make(chan struct{}), false
	b.startPubSub()
	s.pending++
	b.enqueueOp(subOp{sub: true, channel: k.channel})
	return s.ready
}

// startPubSub opens the shared Pub/Sub connection and starts its
// dispatcher and sender, once. b.mu is held.
func (b *redisBackend) startPubSub() {
	if b.ps != nil {
		return
	}
	b.ps = b.rdb.Subscribe(context.Background()) // connects lazily
	ch := b.ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	b.wg.Add(2)
	go b.dispatch(ch)
	go b.send(b.ps)
}

// enqueueOp queues a command for send. b.mu is held.
func (b *redisBackend) enqueueOp(op subOp) {
	b.ops = append(b.ops, op)
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// send writes queued SUBSCRIBE and UNSUBSCRIBE commands, and unsubscribes
// channels that have been idle for linger, until close.
func (b *redisBackend) send(ps *redis.PubSub) {
	defer b.wg.Done()
	sweep := time.NewTicker(linger / 2)
	defer sweep.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-b.kick:
		case now := <-sweep.C:
			b.unsubscribeIdle(now)
		}
		b.mu.Lock()
		ops := b.ops
		b.ops = nil
		b.mu.Unlock()
		for _, op := range ops {
			ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
			var err error
			if op.sub {
				err = ps.Subscribe(ctx, op.channel)
			} else {
				err = ps.Unsubscribe(ctx, op.channel)
			}
			cancel()
			select {
			case <-b.stop:
				return // closing: the connection goes with it
			default:
			}
			if err != nil {
				// go-redis subscribes again on its next connection to
				// what it was asked for; a waiter's TTL timer covers the
				// meantime.
				b.log.Warn("pubsub command failed", "subscribe", op.sub, "channel", op.channel, "error", err)
			}
		}
	}
}

// unsubscribeIdle queues UNSUBSCRIBE for channels without waiters for
// linger.
func (b *redisBackend) unsubscribeIdle(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch, s := range b.subs {
		if s.refs > 0 || !s.active || now.Sub(s.idle) < linger {
			continue
		}
		s.active = false
		b.enqueueOp(subOp{sub: false, channel: ch})
		if s.pending == 0 {
			delete(b.subs, ch)
		}
		// Otherwise keep the entry until its SUBSCRIBE is confirmed, so
		// that the confirmation is not taken for a later subscription's.
	}
}

func (b *redisBackend) subscribeIfReady(k *keys) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.subs[k.channel]; s != nil && s.active && s.isReady {
		s.refs++
		return s.ready
	}
	return nil
}

func (b *redisBackend) subscribed(k *keys) <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.subs[k.channel]; s != nil && s.active && s.isReady {
		return s.ready
	}
	return nil
}

func (b *redisBackend) unsubscribe(k *keys) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.subs[k.channel]
	if s == nil || s.refs == 0 {
		return
	}
	if s.refs--; s.refs == 0 {
		s.idle = time.Now() // unsubscribeIdle ends it after linger
	}
}

// dispatch reads the shared Pub/Sub connection until it is closed. go-redis
// reconnects it and subscribes again by itself; a confirmation that arrives
// with no SUBSCRIBE of ours pending is such a resubscription, after which
// the waiters retry, since unlock messages may have been missed meanwhile.
func (b *redisBackend) dispatch(ch <-chan any) {
	defer b.wg.Done()
	for m := range ch {
		var wake string
		switch m := m.(type) {
		case *redis.Message:
			b.mu.Lock()
			fns := b.handlersOf(m.Channel)
			b.mu.Unlock()
			if fns != nil {
				for _, fn := range fns {
					fn(m.Payload)
				}
				continue
			}
			if rest, ok := strings.CutPrefix(m.Payload, fairMessage); ok {
				// Addressed to one waiter: "<releaser>\n<head>", and a
				// finish's tail.
				releaser, rest, _ := strings.Cut(rest, "\n")
				head, tail, _ := strings.Cut(rest, "\n")
				own := strings.HasPrefix(releaser, b.self)
				if !own {
					b.heardTail(m.Channel, tail) // before the wake-up: the woken claim reads it
				}
				if !own && strings.HasPrefix(head, b.self) {
					b.wakeFair(head) // else: another's, or woken by our own release
				}
				continue
			}
			if strings.HasPrefix(m.Payload, b.self) {
				continue // our own unlock: Client.release woke our waiters, Finish told our listeners
			}
			if _, tail, ok := strings.Cut(m.Payload, "\n"); ok {
				b.heardTail(m.Channel, tail)
			}
			b.mu.Lock()
			if s := b.subs[m.Channel]; s != nil && s.active {
				wake = m.Channel // lingering too: a first attempt may watch it
			}
			b.mu.Unlock()
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				b.mu.Lock()
				if _, ok := b.confirms[m.Channel]; ok {
					b.confirms[m.Channel] = true
				}
				b.mu.Unlock()
				wake = b.confirmed(m.Channel)
			}
		}
		if wake != "" {
			b.wake(wake)
		}
	}
}

// confirmed counts a subscribe confirmation, and returns the channel to
// wake when it was a resubscription.
func (b *redisBackend) confirmed(channel string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.subs[channel]
	if s == nil {
		return ""
	}
	if s.pending == 0 {
		if s.active {
			return channel // a reconnect: waiters, and watches of a lingering channel, retry
		}
		return ""
	}
	s.pending--
	if s.pending > 0 {
		return ""
	}
	if !s.active {
		delete(b.subs, channel)
		return ""
	}
	if !s.isReady {
		s.isReady = true
		close(s.ready)
	}
	return ""
}

func (b *redisBackend) close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.stop)
	ps := b.ps
	b.mu.Unlock()
	var err error
	if ps != nil {
		err = ps.Close()
	}
	b.wg.Wait()
	b.conns.close()
	return err
}

// statusAndOwner reads a script's {integer, owner id} reply.
func statusAndOwner(v []any, what string) (int64, string, error) {
	if len(v) != 2 {
		return 0, "", fmt.Errorf("%s: %d values in reply, want 2", what, len(v))
	}
	n, ok1 := v[0].(int64)
	s, ok2 := v[1].(string)
	if !ok1 || !ok2 {
		return 0, "", fmt.Errorf("%s: reply %v, want an integer and a string", what, v)
	}
	return n, s, nil
}

// transient reports whether err is a failure that passes: the network (a
// dropped or refused connection, a timeout, an empty pool), a server that
// is loading, read-only (a failover under way), down or busy, or a Cluster
// node that no longer serves the key's slot (MOVED, ASK). A waiter
// tries again after it; any other error (a script error, a permission, a
// closed client) ends the wait.
func (b *redisBackend) transient(err error) bool {
	if errors.Is(err, redis.ErrClosed) {
		return false
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted):
		return true
	}
	// MOVED and ASK reach us only from one node's connection (runAcked),
	// where the cluster client follows no redirect: the command did not
	// run, and goes again once the slot map is learnt again.
	for _, p := range []string{"LOADING", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "BUSY", "NOREPLICAS", "MOVED", "ASK"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// storeID names the server or servers: the address of a single server, the
// seed addresses of a Cluster; empty when it cannot tell (a Ring, a
// Sentinel client), so that Multi orders such parts by name alone.
func (b *redisBackend) storeID() string {
	switch rdb := b.rdb.(type) {
	case *redis.Client:
		return rdb.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(rdb.Options().Addrs, ",")
	}
	return ""
}
