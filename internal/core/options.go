package core

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultLeaseTime is the watchdog lease of a Client without WithLeaseTime,
// as in Redisson.
const DefaultLeaseTime = 30 * time.Second

// MinLeaseTime is the shortest watchdog lease: the watchdog renews every
// lease/3 and needs room for a round trip and a retry.
const MinLeaseTime = 30 * time.Millisecond

// An Option configures a Client.
type Option func(*options)

type options struct {
	leaseTime time.Duration
	prefix    string
	logger    hclog.Logger
	tracer    trace.TracerProvider
	meter     metric.MeterProvider
	clientID  string
	waiterTTL time.Duration
	ack       *ackOptions
}

// WithLeaseTime sets the watchdog lease: a lock taken without WithLease
// expires in Redis after d unless renewed, and is renewed every d/3 while
// held. Default DefaultLeaseTime (30s); at least MinLeaseTime.
func WithLeaseTime(d time.Duration) Option { return func(o *options) { o.leaseTime = d } }

// WithKeyPrefix sets the prefix of every key and channel: a lock named n
// lives at prefix:{n}. Default "lockcron".
func WithKeyPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithLogger sets the logger; the Client logs under its sub-logger "lock".
// Default hclog.NewNullLogger().
func WithLogger(l hclog.Logger) Option { return func(o *options) { o.logger = l } }

// WithTracerProvider sets where spans go. Default otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(o *options) { o.tracer = tp }
}

// WithMeterProvider sets where metrics go. Default otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(o *options) { o.meter = mp }
}

// WithClientID names this Client in owner ids, logs and spans, for example
// a replica's name. Owner ids stay unique even when two Clients share an id.
// Default host name and process id ("host-1234").
func WithClientID(id string) Option { return func(o *options) { o.clientID = id } }

// DefaultWaiterTTL is how long a waiter of a fair lock keeps its place
// without renewing it, unless WithWaiterTTL says otherwise.
const DefaultWaiterTTL = 3 * time.Second

// WithWaiterTTL sets how long a waiter keeps its place in a fair lock's
// queue (and a waiting writer its claim on an RWMutex) without renewing it.
// Waiters renew every d/3, so one that dies (a crashed process) stops
// delaying the others within d. Default DefaultWaiterTTL (3s); at least
// MinLeaseTime.
func WithWaiterTTL(d time.Duration) Option { return func(o *options) { o.waiterTTL = d } }

func buildOptions(opts []Option) (options, error) {
	o := options{leaseTime: DefaultLeaseTime, prefix: "lockcron", waiterTTL: DefaultWaiterTTL}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger == nil {
		o.logger = hclog.NewNullLogger()
	}
	if o.tracer == nil {
		o.tracer = otel.GetTracerProvider()
	}
	if o.meter == nil {
		o.meter = otel.GetMeterProvider()
	}
	if o.clientID == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "lockcron"
		}
		o.clientID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	switch {
	case o.leaseTime < MinLeaseTime:
		return o, fmt.Errorf("lock: WithLeaseTime(%v): the watchdog lease must be at least %v, to renew every lease/3: %w", o.leaseTime, MinLeaseTime, ErrInvalid)
	case o.waiterTTL < MinLeaseTime:
		return o, fmt.Errorf("lock: WithWaiterTTL(%v): a waiter's place must last at least %v, to be renewed every third of it: %w", o.waiterTTL, MinLeaseTime, ErrInvalid)
	case strings.Contains(o.clientID, "\n"):
		return o, fmt.Errorf("lock: WithClientID(%q): a newline would break unlock messages: %w", o.clientID, ErrInvalid)
	case o.ack.check() != nil:
		return o, o.ack.check()
	case o.prefix == "":
		return o, fmt.Errorf("lock: WithKeyPrefix: empty prefix: %w", ErrInvalid)
	case strings.ContainsAny(o.prefix, "{}"):
		return o, fmt.Errorf("lock: WithKeyPrefix(%q): braces would break the key's hash tag: %w", o.prefix, ErrInvalid)
	}
	return o, nil
}

// An AcquireOption changes one Lock or TryLock call.
type AcquireOption func(*acquireOptions)

type acquireOptions struct {
	wait     time.Duration
	hasWait  bool
	lease    time.Duration
	hasLease bool
}

// WithWait bounds how long Lock waits for the lock; past it, Lock returns
// ErrLocked. WithWait(0) makes one attempt, like TryLock. Default: Lock
// waits until its ctx ends. A negative d is ErrInvalid.
func WithWait(d time.Duration) AcquireOption {
	return func(o *acquireOptions) { o.wait, o.hasWait = d, true }
}

// WithLease takes the lock for the fixed time d, without a watchdog
// (Redisson's lock(leaseTime)): the lease ends by itself after d, and its
// context is cancelled with ErrLockLost shortly before. d must be at least
// a millisecond (Redis's resolution). It applies to a new lease; a re-entry
// adds a hold to the lease it enters and leaves its time as it is.
func WithLease(d time.Duration) AcquireOption {
	return func(o *acquireOptions) { o.lease, o.hasLease = d, true }
}

func buildAcquireOptions(name string, opts []AcquireOption) (acquireOptions, error) {
	if len(opts) == 0 {
		return acquireOptions{}, nil // o would escape to the options' funcs: an allocation per call
	}
	var o acquireOptions
	for _, opt := range opts {
		opt(&o)
	}
	if o.hasWait && o.wait < 0 {
		return o, fmt.Errorf("lock %q: WithWait(%v): negative wait: %w", name, o.wait, ErrInvalid)
	}
	if o.hasLease && o.lease < time.Millisecond {
		return o, fmt.Errorf("lock %q: WithLease(%v): a lease must be at least 1ms: %w", name, o.lease, ErrInvalid)
	}
	return o, nil
}

// keys are the Redis names of one lock of one kind. Every one shares the
// hash tag {name}, so a lock's keys live in one Cluster slot.
type keys struct {
	name    string
	id      string // the kind of lease: re-entry and this Client's queues
	lock    string // the kind's main key (Mutex and FairMutex: a hash of owner -> holds, <owner>:token -> its token)
	token   string // fencing token counter, shared by every kind of one name
	channel string // Pub/Sub: unlock messages

	// FairMutex: the list of waiters in order, and a sorted set of their
	// deadlines (Redis time, ms).
	queue, timeout string
	// RWMutex: the readers' deadlines (a sorted set), and the mark of a
	// waiting writer that makes new readers wait.
	readers, writerWaiting string
	// Semaphore: the hold counts of its permits.
	holds string
}

// released is the key of owner's release mark (see release.lua): beside the
// kind's main key, in the same hash slot.
func (k *keys) released(owner string) string { return k.lock + ":released:" + owner }

// base is the prefix of every key of the lock named name.
func base(prefix, name string) string { return prefix + ":{" + name + "}" }

// newKeys are the keys of the reentrant lock (Mutex), which FairMutex
// shares: the two kinds exclude each other.
func newKeys(prefix, name string) *keys { return keysAt(name, base(prefix, name)) }

// keysAt are the keys of a reentrant lock named name whose keys start with
// b (which holds the hash tag).
func keysAt(name, b string) *keys {
	return &keys{
		name: name, id: b, lock: b, token: b + ":token", channel: b + ":channel",
		queue: b + ":queue", timeout: b + ":timeout",
	}
}

func validName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("lock: empty lock name: %w", ErrInvalid)
	case strings.ContainsAny(name, "{}"):
		return fmt.Errorf("lock %q: a name must not contain { or }, which would break the key's hash tag: %w", name, ErrInvalid)
	}
	return nil
}
