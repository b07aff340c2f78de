package lock

import (
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockcron/lockcron/internal/core"
)

// DefaultLeaseTime is the watchdog lease of a Client without WithLeaseTime:
// 30s, as in Redisson.
const DefaultLeaseTime = core.DefaultLeaseTime

// MinLeaseTime is the shortest watchdog lease, 30ms: the watchdog renews
// every lease/3 and needs room for a round trip and a retry.
const MinLeaseTime = core.MinLeaseTime

// DefaultWaiterTTL is how long a waiter of a fair lock keeps its place
// without renewing it, unless WithWaiterTTL says otherwise: 3s.
const DefaultWaiterTTL = core.DefaultWaiterTTL

// An Option configures a Client: New, NewMemory, MemoryStore.NewClient.
type Option = core.Option

// An AcquireOption changes one Lock or TryLock call.
type AcquireOption = core.AcquireOption

// WithLeaseTime sets the watchdog lease: a lock taken without WithLease
// expires in Redis after d unless renewed, and is renewed every d/3 while
// held. Default DefaultLeaseTime (30s); at least MinLeaseTime.
func WithLeaseTime(d time.Duration) Option { return core.WithLeaseTime(d) }

// WithKeyPrefix sets the prefix of every key and channel: a lock named n
// lives at prefix:{n}. Default "lockcron".
func WithKeyPrefix(p string) Option { return core.WithKeyPrefix(p) }

// WithLogger sets the logger; the Client logs under its sub-logger "lock".
// Default hclog.NewNullLogger().
func WithLogger(l hclog.Logger) Option { return core.WithLogger(l) }

// WithTracerProvider sets where spans go. Default otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option { return core.WithTracerProvider(tp) }

// WithMeterProvider sets where metrics go. Default otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option { return core.WithMeterProvider(mp) }

// WithClientID names this Client in owner ids, logs and spans, for example
// a replica's name. Owner ids stay unique even when two Clients share an id.
// Default host name and process id ("host-1234").
func WithClientID(id string) Option { return core.WithClientID(id) }

// WithWaiterTTL sets how long a waiter keeps its place in a fair lock's
// queue (and a waiting writer its claim on an RWMutex) without renewing it.
// Waiters renew every d/3, so one that dies (a crashed process) stops
// delaying the others within d. Default DefaultWaiterTTL (3s); at least
// MinLeaseTime.
func WithWaiterTTL(d time.Duration) Option { return core.WithWaiterTTL(d) }

// WithReplicaAck makes each acquisition, and each renewal, wait until at
// least replicas replicas have acknowledged it (Redis WAIT, on the
// connection that ran the script), for at most timeout. An acquisition that
// is not acknowledged in time is undone and fails with an error wrapping
// ErrNoAck (fail closed); a renewal that is not is retried, and the lease is
// lost if none is acknowledged by its deadline. It narrows the window in
// which a failover to a replica can lose a lock: see docs/safety.md.
// replicas must be at least 1 and timeout positive. It needs the Redis
// backend: NewMemory refuses it.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return core.WithReplicaAck(replicas, timeout)
}

// WithWait bounds how long Lock waits for the lock; past it, Lock returns
// ErrLocked. WithWait(0) makes one attempt, like TryLock. Default: Lock
// waits until its ctx ends. A negative d is ErrInvalid.
func WithWait(d time.Duration) AcquireOption { return core.WithWait(d) }

// WithLease takes the lock for the fixed time d, without a watchdog
// (Redisson's lock(leaseTime)): the lease ends by itself after d, and its
// context is cancelled with ErrLockLost shortly before. d must be at least
// a millisecond (Redis's resolution). It applies to a new lease; a re-entry
// adds a hold to the lease it enters and leaves its time as it is.
func WithLease(d time.Duration) AcquireOption { return core.WithLease(d) }

// WithAOFAck is WithReplicaAck with Redis 7.2's WAITAOF: each acquisition
// and renewal waits until local (0 or 1) the primary and replicas replicas
// have written it to their append-only files. On a server without WAITAOF
// every acquisition fails with an error that says so, wrapping
// errors.ErrUnsupported.
func WithAOFAck(local, replicas int, timeout time.Duration) Option {
	return core.WithAOFAck(local, replicas, timeout)
}
