package scheduler

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultShutdownTimeout bounds the graceful stop that Run makes when its
// ctx ends.
const DefaultShutdownTimeout = 30 * time.Second

// finishTimeout bounds the Finish (record and unlock) of one run.
const finishTimeout = 5 * time.Second

// An Option configures a Scheduler.
type Option func(*options)

type options struct {
	logger          hclog.Logger
	tracer          trace.TracerProvider
	meter           metric.MeterProvider
	replica         string
	location        *time.Location
	clock           Clock
	shutdownTimeout time.Duration
	historyKeep     int
	historyMaxAge   time.Duration
	redact          func(string) string
	onRun           func(Run)
	onRunningLong   func(Run)
	fallback        time.Duration
	memberTTL       time.Duration
}

// WithLogger sets the logger; the Scheduler logs under its sub-logger
// "scheduler". By default (neither WithLogger nor WithSlog) the Scheduler
// writes its warnings and errors (failed runs, lost locks, ticks missed)
// to os.Stderr, as net/http's server does; pass hclog.NewNullLogger() for
// silence. The last of WithLogger and WithSlog wins.
func WithLogger(l hclog.Logger) Option { return func(o *options) { o.logger = l } }

// WithSlog sends the Scheduler's logs to l, a log/slog logger, at l's own
// levels: the same messages and key-value pairs as WithLogger's, with the
// sub-logger's name under the key "logger". The last of WithLogger and
// WithSlog wins.
func WithSlog(l *slog.Logger) Option {
	return func(o *options) {
		if l == nil {
			o.logger = nil // refused by New
			return
		}
		o.logger = slogLogger(l)
	}
}

// WithTracerProvider sets where spans go. Default otel.GetTracerProvider().
// Give the lock.Client the same provider, so that its lock.wait spans nest
// under the scheduler's job.tick spans.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(o *options) { o.tracer = tp } }

// WithMeterProvider sets where metrics go. Default otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option { return func(o *options) { o.meter = mp } }

// WithReplicaID names this replica in logs, spans and jobs.Info. Default the
// lock.Client's ID. It must be unique across the fleet, and for a job that
// runs on every replica (ReplicasAll) stable across restarts: such a job's
// record of the ticks run is per replica id, so two replicas that share an
// id share one record and run each tick once between them (once per
// fleet, not once per replica), without an error; and a process that
// restarts under a new id runs again what its predecessor ran.
func WithReplicaID(id string) Option { return func(o *options) { o.replica = id } }

// WithLocation sets the time zone of schedules that name none (no CRON_TZ=
// and no Job.Location). Default UTC, so that replicas whose machines are
// set to different zones agree on every tick.
func WithLocation(loc *time.Location) Option { return func(o *options) { o.location = loc } }

// WithClock replaces the clock that ticks are taken from and waited on.
// Default SystemClock.
func WithClock(c Clock) Option { return func(o *options) { o.clock = c } }

// WithShutdownTimeout bounds the graceful stop Run makes when its ctx ends.
// Default DefaultShutdownTimeout.
func WithShutdownTimeout(d time.Duration) Option {
	return func(o *options) { o.shutdownTimeout = d }
}

// WithHistory sets the retention of every job's run history, for jobs that
// set none of their own (Job.HistoryKeep, Job.HistoryMaxAge): the latest
// keep entries, none older than maxAge. A zero keeps the default
// (DefaultHistoryKeep, DefaultHistoryMaxAge).
func WithHistory(keep int, maxAge time.Duration) Option {
	return func(o *options) {
		if keep != 0 {
			o.historyKeep = keep
		}
		if maxAge != 0 {
			o.historyMaxAge = maxAge
		}
	}
}

// WithRedact sets a function that removes secrets from a run's error text
// before it is kept in the run history or passed to WithOnRun. Default
// none: the text is kept as the job returned it.
func WithRedact(f func(string) string) Option { return func(o *options) { o.redact = f } }

// WithOnRun sets a function called with each run this replica records in
// the history (a finished run, ticks found missed, or a tick skipped: busy,
// paused, excluded, past its deadline): once per run or skipped tick across
// the fleet (a skipped tick coalesced into the history's newest entry is
// heard alone, without Count). The Run has no ID (the store gives it one).
// It is also called with an event that is no history entry: a Run of
// OutcomeAutoPaused, after the finished run whose failure paused its job
// (Job.PauseAfterFailures; Error is the pause's note), once across the
// fleet, by the replica whose finish paused it. (A run going past its
// AlertAfter goes to WithOnRunningLong, not here.) It is called on the
// run's goroutine (or the scheduler's) after the lock is released, and
// must not block: hand slow work (a webhook, a write to a store) to a
// goroutine or a queue of its own.
func WithOnRun(f func(Run)) Option { return func(o *options) { o.onRun = f } }

// WithOnRunningLong sets a function called once for each run of this
// replica that goes on past its job's AlertAfter: once per run across the
// fleet, as only the replica that runs it knows it. The Run is the run so
// far (no End; Duration is how long it has gone; Outcome
// OutcomeRunningLong). It is called on a goroutine of the run while the
// job still runs, and must not block: hand slow work to a goroutine or a
// queue of its own.
func WithOnRunningLong(f func(Run)) Option { return func(o *options) { o.onRunningLong = f } }

// WithClaimFallback sets how long a replica that is not first in rank for
// a tick waits for the tick to be done before it claims it itself: the
// second in rank waits d, the third 2d, and so on (see "Who claims" in the
// package doc). Default DefaultClaimFallback. Zero or less turns the
// ranking off: every replica claims every tick at once, as a lone replica
// does, at N times the cost in store commands.
func WithClaimFallback(d time.Duration) Option { return func(o *options) { o.fallback = d } }

// WithMemberTTL sets how long this replica counts as a member of the fleet
// after its last heartbeat: a replica that dies stops being ranked first
// within it (its ticks wait for the fallback meanwhile). It heartbeats
// every third of it. Default DefaultMemberTTL; at least 30ms.
func WithMemberTTL(d time.Duration) Option { return func(o *options) { o.memberTTL = d } }

func buildOptions(opts []Option) (options, error) {
	o := options{
		logger:          defaultLogger(),
		location:        time.UTC,
		clock:           SystemClock{},
		shutdownTimeout: DefaultShutdownTimeout,
		historyKeep:     DefaultHistoryKeep,
		historyMaxAge:   DefaultHistoryMaxAge,
		fallback:        DefaultClaimFallback,
		memberTTL:       DefaultMemberTTL,
	}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.logger == nil:
		return o, fmt.Errorf("scheduler: WithLogger(nil) or WithSlog(nil): %w", ErrInvalid)
	case o.location == nil:
		return o, fmt.Errorf("scheduler: WithLocation(nil): %w", ErrInvalid)
	case o.clock == nil:
		return o, fmt.Errorf("scheduler: WithClock(nil): %w", ErrInvalid)
	case o.historyKeep < 0 || o.historyMaxAge < 0:
		return o, fmt.Errorf("scheduler: WithHistory(%d, %v): must not be negative: %w", o.historyKeep, o.historyMaxAge, ErrInvalid)
	case o.memberTTL < 30*time.Millisecond:
		return o, fmt.Errorf("scheduler: WithMemberTTL(%v): must be at least 30ms: %w", o.memberTTL, ErrInvalid)
	case o.shutdownTimeout <= 0:
		return o, fmt.Errorf("scheduler: WithShutdownTimeout(%v): must be positive: %w", o.shutdownTimeout, ErrInvalid)
	}
	if o.tracer == nil {
		o.tracer = otel.GetTracerProvider()
	}
	if o.meter == nil {
		o.meter = otel.GetMeterProvider()
	}
	return o, nil
}

// defaultLogger is the logger of a Scheduler given none: warnings and
// errors to os.Stderr.
func defaultLogger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "lockcron", Level: hclog.Warn, Output: os.Stderr})
}

// slogLogger is an hclog.Logger that hands each message to l: hclog's
// InterceptLogger, writing nowhere itself, with a sink that logs to l. Its
// level is the lowest that l is enabled for, so that IsDebug and the like
// tell the truth.
func slogLogger(l *slog.Logger) hclog.Logger {
	level := hclog.Off
	for _, lv := range []hclog.Level{hclog.Error, hclog.Warn, hclog.Info, hclog.Debug, hclog.Trace} {
		if l.Enabled(context.Background(), slogLevel(lv)) {
			level = lv
		}
	}
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{Level: level, Output: io.Discard})
	il.RegisterSink(slogSink{l})
	return il
}

// slogSink is the hclog.SinkAdapter of slogLogger.
type slogSink struct{ l *slog.Logger }

// Accept logs the message to the slog.Logger, with the hclog logger's name
// under "logger".
func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	lv := slogLevel(level)
	ctx := context.Background()
	if !s.l.Enabled(ctx, lv) {
		return
	}
	if name != "" {
		args = append(args, "logger", name)
	}
	s.l.Log(ctx, lv, msg, args...)
}

// slogLevel is the slog level of an hclog level (Trace is below Debug).
func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Info:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	}
	return slog.LevelError
}
