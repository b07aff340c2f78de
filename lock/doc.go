// Package lock provides distributed locks kept in Redis, in the manner of
// Redisson's RLock, with an in-memory backend of the same semantics.
//
//	c, err := lock.New(rdb)                 // or lock.NewMemory()
//	defer c.Close()
//	lease, err := c.Mutex("billing").Lock(ctx)
//	if err != nil { ... }
//	defer lease.Unlock(context.WithoutCancel(ctx))
//	work(lease.Context())                   // ends if the lock is lost
//
// # How a lock is kept
//
// A lock named n is a hash at prefix:{n} mapping its owner id to a hold
// count, and <owner id>:token to its lease's fencing token, with a TTL;
// prefix:{n}:token holds the last fencing token issued for the name, by a
// lease of any kind (the counter that every kind of lock of the name
// shares). Lua scripts (internal/core/scripts/*.lua, run
// by EVALSHA with EVAL on NOSCRIPT) take, renew and release it; they are
// idempotent, so a go-redis retry after a lost reply changes nothing twice.
// All keys of one lock share the hash tag {n}, so they live in one Cluster
// slot.
//
// A lease taken without WithLease is renewed every lease/3 by its Client's
// watchdog, one goroutine per Client that renews the Client's leases
// together, in one batch (one pipeline on Redis); Unlock stops the lease's
// renewals, and waits until no batch that holds it is in flight, before it
// sends the unlock. A lease joins the watchdog lease/6 after the
// acquisition was sent, from one timer per Client: a lease released before
// then (a short run under a 30s lease) costs no goroutine and no timer of
// its own.
// If a renewal finds the lock gone or another's, or none succeeds by
// 9/10 of the lease after the last success was sent (measured on Go's
// monotonic clock), the lease's context is cancelled with cause ErrLockLost
// and Done is closed, before the key could expire in Redis.
//
// Both the renewal schedule and that deadline count from when each
// successful request was sent, not from when its reply came: a batch is
// due when one of its leases is, lease/3 after its last successful renewal
// was sent, and it holds every lease at least a sixth of that interval
// old, so that the leases align. While a batch is in flight no other goes
// out (but for a lease that was not in it and is already due: it does not
// wait a round trip behind a batch it was not in), so the connection the
// go-redis pool has warm carries the renewals: a new connection pays its
// handshake first (three round trips with go-redis's defaults on Redis 7).
// The pipeline runs on a connection of the client's main pool, which the
// Client keeps from batch to batch (and takes anew after one fails), not
// on go-redis's pool for pipelines, which dials when it has none idle. A
// lease whose acquisition took so long that less than lease/3 of it is
// sure to be left (the send time counts from before a new connection's
// dial and handshake) is renewed before Lock returns it, so that its
// deadline counts from that renewal. A batch that is late (no reply after
// twice the last round trip, and at least lease/12) is sent again at once,
// on another connection, a lease in up to three in flight: before the
// deadline, not after it, so that a reply held up on one connection (a
// stalled link, a server that answers late) does not cost the leases; the
// deadline counts from whichever succeeded last. A lone renewal is sent
// whole (EVAL), and a batch sends each script whole once, before its other
// renewals by SHA, so that a batch takes one round trip even when the
// server has lost its script cache; an acquisition that the server
// answered NOSCRIPT counts from the EVAL that followed. So a lease is kept
// while round trips stay under 0.4 of the lease, with a lease of a second
// as with longer ones, whether it was taken on the slow network or the
// network turned slow while it was held (bench/README.md, "Lock faults").
// On a slow network, lengthen the lease, not the renewal period. Once the
// last Unlock is under way, its reply, not the local deadline, ends the
// lease.
//
// When ctx ends, the Lease's Context ends too, but the lock stays held and
// renewed until Unlock: clean-up code still runs under the lock. Always
// Unlock (deferred); Client.Close releases whatever is left.
//
// # Reentrancy
//
// Reentrancy goes through the context, not the goroutine: Lock on a context
// that descends from a Lease's Context, on the same Client and lock name,
// adds a hold to that Lease and returns it, with the same token. Each
// Unlock drops one hold; the last frees the lock. Any other context is
// another owner, even in the same goroutine. A re-entry keeps the lease's
// time as it is (it does not extend a fixed lease).
//
// # Waiting
//
// Waiters do not poll. The last Unlock publishes on prefix:{n}:channel;
// each Client has one Pub/Sub connection for all lock names, subscribed to
// a name while one of its goroutines waits for it (and for a second after,
// in case it waits again). A Client wakes its own waiters when it unlocks,
// without waiting for its own message to come back. A waiter tries again
// after its subscription is confirmed (so no unlock is missed), after each
// reconnect of that connection, at each unlock message, and when the
// holder's TTL runs out (a crashed holder publishes nothing); it never
// sleeps longer than that TTL. A Lock rides out failures to reach the
// store (a restart, a failover, a network cut), from its first attempt
// on, until its ctx ends or WithWait passes (then ErrLocked, wrapping the
// last failure). The waiters of a Client that retry on their timers go one
// at a time (the probe), and the others wait for its outcome: while the
// store does not answer, the probe is a PING on the Pub/Sub connection, 25ms
// doubling up to 250ms apart, and an attempt only once that is answered;
// every waiter tries again at once at the first reply, at an unlock
// message, or when the Pub/Sub connection comes back (go-redis reconnects
// it every 100ms). go-redis's pool, once it has failed to dial as many
// times as its size (it never lowers that count otherwise), dials again
// only once a second; waiters that each retried through it made it do so
// within a second or two of an outage, and took the lock up to a second
// after the store was back. With go-redis's defaults, a waiter takes the
// lock within tens of milliseconds of an empty restart.
// TryLock returns the failure. A goroutine whose first attempt goes out
// while the subscription lingers counts the unlocks that arrive until it
// has joined the queue, and tries again at once if one did.
//
// Within one Client, waiters for a name queue first come, first served, and
// only the head of the queue talks to Redis: an unlock costs one attempt
// per Client, not one per waiting goroutine, and a goroutine that has just
// unlocked does not barge ahead of those already waiting. TryLock makes its
// one attempt at once. Between Clients there is no order.
//
// # Read-write locks
//
// Client.RWMutex(n) is a read-write lock, as Redisson's RReadWriteLock:
// many readers (RLocker) or one writer (Locker) hold it at a time. It is a
// lock of its own, apart from the Mutex named n. Its keys: prefix:{n}:rw, a
// hash with the write lease's owner id and deadline and, for each lease,
// its holds and fencing token; prefix:{n}:rw:readers, the readers'
// deadlines (a sorted set, in Redis time); prefix:{n}:rw:writers, the
// marks of waiting writers (the same); and the name's token key, shared
// with every kind. Unlocks are published on prefix:{n}:rw:channel. Each
// read Lock of a new owner is a lease of its own, with its own token and
// watchdog: a reader whose process dies stops counting at its own deadline
// (every script drops the leases past theirs), while the other readers
// keep the lock. The hash lives as long as the longest lease.
//
// Writers come first. A writer that waits leaves a mark that it renews at
// each attempt, at least every WithWaiterTTL/3; while a mark is live, new
// readers wait, though readers that hold may re-enter. The mark goes when
// its writer acquires or gives up, and lapses within WithWaiterTTL if the
// writer dies. The holder of the write lock may take the read lock on a
// context of its write lease, and keep it after it releases the write
// lock (a downgrade; pass context.WithoutCancel(writeLease.Context()) so
// that the read lease's Context outlives the write lease's). A holder of a
// read lock that asks for the write lock gets ErrUpgrade at once, as it
// would wait for itself; release the read lock and then take the write lock.
//
// # Fencing tokens
//
// Each new lease gets a token that is strictly greater than every earlier
// token of its lock name: a counter at prefix:{n}:token, one more per
// lease (INCR), seeded from the server's clock in microseconds (TIME) when
// the key is new, and kept for a day after it was seeded (then seeded
// again). Tokens therefore keep growing after Redis restarts empty or
// fails over, and after the key expires, as long as the server's clock does
// not go back: no lock name is taken a million times a second, so the
// counter never runs ahead of the clock.
//
// # Fair locks
//
// Client.FairMutex is the reentrant lock whose waiters acquire it first
// come, first served across every Client, after Redisson's RFairLock: a
// list at prefix:{n}:queue holds the waiting owner ids in order and a
// sorted set at prefix:{n}:timeout their deadlines, in the server's time
// (TIME), never a client's. A waiter's deadline is WithWaiterTTL (3s) ahead
// and it renews it every third of that; places whose deadline passed are
// dropped from the head of the queue by whichever script comes next, so a
// waiter that died delays the next by at most WithWaiterTTL (and one
// further back, which renews its place every third of it, by at most four
// thirds of it). A waiter
// whose ctx ends, whose WithWait passes or whose Client closes leaves the
// queue at once. The last Unlock publishes a message addressed to the head
// of the queue ("fair\n<releaser>\n<head>"): only that waiter tries again,
// so handing the lock on costs the release and one attempt, whatever the
// number of waiters. The second in line also wakes when the head's place
// would expire, and the head when the holder's TTL runs out. The lock hash
// itself is the Mutex's: the two kinds exclude each other, but only
// FairMutex waiters keep the order, and a FairMutex's unlock wakes only its
// queue's head: a Mutex waiter of the same name waits for the holder's TTL
// or its next wake-up. Use one kind per name.
//
// # Semaphores
//
// Client.Semaphore(n, permits) lets up to permits owners hold it at once,
// after Redisson's RPermitExpirableSemaphore: each Lock takes a permit
// that is a Lease of its own, with its own owner id, fencing token (from
// the same prefix:{n}:token as every kind of lock named n) and watchdog, so
// a crashed holder's permit comes back one lease after its last renewal.
// A sorted set at prefix:{n}:sem maps each permit's owner id to its
// deadline in the server's time (TIME, ms); hashes at prefix:{n}:sem:holds
// and prefix:{n}:sem:tokens keep its hold count and token. Every script
// (internal/core/scripts/sem*.lua) first drops the permits whose deadline
// passed, and the keys live as long as the longest permit, then go with
// the last. Giving a
// permit back publishes on prefix:{n}:sem:channel; a waiter otherwise
// sleeps until the earliest permit's deadline. The count is not stored:
// every acquisition checks the count it was given, so all Clients must use
// the same count for a name. A Semaphore and a Mutex of the same name are
// separate locks; ForceUnlock(n) deletes both.
//
// # Composite locks
//
// Multi holds several locks, of any kind and on any Clients, all or none:
// it takes them in an order every process computes alike (by name, kind
// and store), so two Multi locks over the same locks never deadlock, and
// gives back what it took when one cannot be had. Its lease is lost when
// any part is. RedLock runs the Redlock algorithm over independent servers:
// it holds the lock when a majority of them granted it within the lease's
// validity (lease − time spent − 1% drift − 2ms), retries after random
// pauses, and releases everywhere on failure; its lease is lost when fewer
// than a majority of its parts hold. See the README's "How safe is it?".
//
// # Replica acknowledgement
//
// WithReplicaAck(n, timeout) sends WAIT n timeout after each acquisition
// and renewal, in one pipeline with the script, so on the same connection;
// an acquisition that fewer than n replicas acknowledged is undone and
// fails with ErrNoAck (fail closed). WithAOFAck uses Redis 7.2's WAITAOF
// instead, and fails with errors.ErrUnsupported on older servers. A lock
// taken this way survives the failover of its primary to an acknowledged
// replica; without it, a failover can lose a lock taken just before.
//
// # Failures
//
// A key at prefix:{n} that is not a hash, or a hash without a TTL, is not
// one of our locks: calls return ErrBadKey naming the key and leave it as
// it is. Configure the redis client with ContextTimeoutEnabled so that ctx
// deadlines bound each command even when the server hangs; the lease's
// local deadline holds either way. Errors wrap the sentinels of this
// package and the lock's name; match them with errors.Is.
//
// Every script may run twice: go-redis sends a command again when its
// connection fails after the request went out. The scripts are idempotent,
// and a release that frees a lock leaves a mark (prefix:{n}:released:<owner>
// for a mutex, kept 30s) so that its repeat answers "released" again
// instead of "not held": an Unlock whose reply was lost succeeds.
//
// go-redis stops dialling a server after PoolSize failed dials and then
// probes it once a second, so a Client may learn a second late that the
// server is back. Set DialerRetries high and DialerRetryTimeout short on
// the client (for example 1000 and 20ms: a dial keeps trying every 20ms,
// bounded by the command's ctx) and waiters take their lock within tens
// of milliseconds of the server's return; the scheduler command does so.
//
// # Telemetry
//
// Each Lock or TryLock records a "lock.wait" span and each lease a
// "lock.hold" span (attributes lockcron.lock, lockcron.client,
// lockcron.owner, lockcron.token, lockcron.outcome; error.type when it
// failed: the error's Go type, or "lost"), the histograms lockcron.lock.wait.duration and lockcron.lock.hold.duration,
// and the counters lockcron.lock.renewals and lockcron.lock.lost. Debug
// logs go to the "lock" sub-logger.
//
// Without WithTracerProvider and WithMeterProvider the Client uses
// OpenTelemetry's global providers; while no SDK is installed in them, and
// with a no-op provider (trace/noop, metric/noop), Lock and Unlock build
// no span, attribute or measurement at all. An SDK installed in the global
// providers after New is used from then on.
package lock
