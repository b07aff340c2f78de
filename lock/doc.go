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
// count, with a TTL; prefix:{n}:token holds the fencing token of its
// current or last lease. Lua scripts (scripts/*.lua,
// run by EVALSHA with EVAL on NOSCRIPT) take, renew and release it; they are
// idempotent, so a go-redis retry after a lost reply changes nothing twice.
// All keys of one lock share the hash tag {n}, so they live in one Cluster
// slot.
//
// A lease taken without WithLease is renewed every lease/3 by a watchdog
// goroutine that Unlock stops, and waits for, before it sends the unlock.
// If a renewal finds the lock gone or another's, or none succeeds by
// 9/10 of the lease after the last success was sent (measured on Go's
// monotonic clock), the lease's context is cancelled with cause ErrLockLost
// and Done is closed, before the key could expire in Redis.
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
// sleeps longer than that TTL. A goroutine whose first attempt goes out
// while the subscription lingers counts the unlocks that arrive until it
// has joined the queue, and tries again at once if one did.
//
// Within one Client, waiters for a name queue first come, first served, and
// only the head of the queue talks to Redis: an unlock costs one attempt
// per Client, not one per waiting goroutine, and a goroutine that has just
// unlocked does not barge ahead of those already waiting. TryLock makes its
// one attempt at once. Between Clients there is no order.
//
// # Fencing tokens
//
// Each new lease gets a token that is strictly greater than every earlier
// token of its lock name: the larger of the server's clock in microseconds
// (TIME) and the last token plus one, kept at prefix:{n}:token for a day
// after its last use. Tokens therefore keep growing after Redis restarts
// empty or fails over, as long as the server's clock does not go back.
//
// # Ledgers: once per tick
//
// A Ledger (Client.Ledger) keeps, beside a lock at prefix:{n}:ledger:id,
// the ticks of a recurring task: the latest done, the latest claimed
// (seen), the one running with its owner and tries, and the last outcome.
// Ledger.Claim checks the ledger and takes the lock in one script
// (claim.lua), so that each tick is done once whatever the claimants'
// clocks say: it returns ErrDone for a tick done (or overtaken by a later
// one), waits while another owner runs the same tick and returns ErrDone
// when that one finishes, and takes the tick over, with its try count
// going on, when the owner gives it back or dies. Claim.Finish records the
// outcome and releases the lock in one script (finish.lua). The scheduler
// package is built on it.
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
// # Telemetry
//
// Each Lock, TryLock or Claim records a "lock.wait" span and each lease a
// "lock.hold" span (attributes lock, client, owner, token, outcome), the
// histograms lockcron.lock.wait.duration and lockcron.lock.hold.duration,
// and the counters lockcron.lock.renewals and lockcron.lock.lost. Debug
// logs go to the "lock" sub-logger.
package lock
