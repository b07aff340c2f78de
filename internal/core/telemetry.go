package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// instrumentation is the name of the tracer and the meter.
const instrumentation = "github.com/lockcron/lockcron/lock"

// Outcomes, as the lockcron.outcome attribute of spans and metrics.
const (
	outcomeAcquired = "acquired"
	outcomeLocked   = "locked"   // ErrLocked: the wait was over
	outcomeCanceled = "canceled" // the ctx ended
	outcomeDone     = "done"     // ErrDone: a ledger's tick needs no run
	outcomePaused   = "paused"   // ErrPaused: a paused ledger runs nothing
	outcomeError    = "error"
	outcomeReleased = "released"
	outcomeLost     = "lost"
)

// Metric names.
const (
	metricWait     = "lockcron.lock.wait.duration"
	metricHold     = "lockcron.lock.hold.duration"
	metricRenewals = "lockcron.lock.renewals"
	metricLost     = "lockcron.lock.lost"
)

type telemetry struct {
	clientID string
	tracer   trace.Tracer
	wait     metric.Float64Histogram
	hold     metric.Float64Histogram
	renewals metric.Int64Counter
	lostN    metric.Int64Counter

	// spans and metrics tell whether the providers record anything: when
	// they do not, the hot path builds no span and no attribute.
	spans, metrics dropping

	zeroed sync.Map // lock names whose counters zero has set to 0
}

// waitSpan and holdSpan hold a span, or nil when no span was started.
type waitSpan struct{ span trace.Span }
type holdSpan struct{ span trace.Span }

// A dropping tells, without an allocation, whether a provider drops what
// it is given: a no-op provider (trace/noop, metric/noop), or OpenTelemetry's
// global provider while no SDK is installed in it, which is the default.
// otel.SetTracerProvider or otel.SetMeterProvider may install one after
// New; the global provider's tracers and instruments that the Client took
// then forward to it, so for a global provider the check is made on each
// call: one atomic load (otel.GetTracerProvider) and a comparison.
type dropping struct {
	noop   bool
	global any        // the global provider without an SDK, as it was at New; else nil
	now    func() any // the global provider now
}

// on reports whether the provider records now.
func (d dropping) on() bool {
	if d.global != nil {
		return d.now() != d.global
	}
	return !d.noop
}

func tracesDropped(tp trace.TracerProvider) dropping {
	if _, ok := tp.(tracenoop.TracerProvider); ok {
		return dropping{noop: true}
	}
	if isGlobal(tp) {
		return dropping{global: tp, now: func() any { return otel.GetTracerProvider() }}
	}
	return dropping{}
}

func metricsDropped(mp metric.MeterProvider) dropping {
	if _, ok := mp.(metricnoop.MeterProvider); ok {
		return dropping{noop: true}
	}
	if isGlobal(mp) {
		return dropping{global: mp, now: func() any { return otel.GetMeterProvider() }}
	}
	return dropping{}
}

// isGlobal reports whether p is OpenTelemetry's global provider before an
// SDK was installed in it (otel.GetTracerProvider, otel.GetMeterProvider):
// a type of go.opentelemetry.io/otel/internal/global, known by its name
// only. Were it renamed in a later release of otel, the Client would
// record as it does with any provider: correct, only not as cheap.
func isGlobal(p any) bool {
	switch fmt.Sprintf("%T", p) {
	case "*global.tracerProvider", "*global.meterProvider":
		return true
	}
	return false
}

func newTelemetry(o options, log hclog.Logger) *telemetry {
	t := &telemetry{clientID: o.clientID, tracer: o.tracer.Tracer(instrumentation),
		spans: tracesDropped(o.tracer), metrics: metricsDropped(o.meter)}
	m := o.meter.Meter(instrumentation)
	var errs []error
	var err error
	t.wait, err = m.Float64Histogram(metricWait, metric.WithUnit("s"), secondBuckets,
		metric.WithDescription("Time from a Lock or TryLock call to its result, by outcome."))
	errs = append(errs, err)
	t.hold, err = m.Float64Histogram(metricHold, metric.WithUnit("s"), secondBuckets,
		metric.WithDescription("Time a lease held its lock, by outcome (released or lost)."))
	errs = append(errs, err)
	t.renewals, err = m.Int64Counter(metricRenewals, metric.WithUnit("{renewal}"),
		metric.WithDescription("Watchdog renewals, by outcome (ok, error, lost)."))
	errs = append(errs, err)
	t.lostN, err = m.Int64Counter(metricLost, metric.WithUnit("{lease}"),
		metric.WithDescription("Leases that lost their lock without Unlock."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		// The instruments returned alongside are no-ops: telemetry is
		// degraded, locking is not.
		log.Warn("lock metrics unavailable", "error", err)
	}
	return t
}

// Attribute keys of the spans and metrics, under the lockcron. namespace:
// no semantic convention covers locks yet. A failed span has error.type
// too (OpenTelemetry's semantic convention): the Go type of the error, or
// "lost" for a lease that lost its lock.
const (
	attrLock      = attribute.Key("lockcron.lock")
	attrClient    = attribute.Key("lockcron.client")
	attrOwner     = attribute.Key("lockcron.owner")
	attrToken     = attribute.Key("lockcron.token")
	attrOutcome   = attribute.Key("lockcron.outcome")
	attrErrorType = attribute.Key("error.type")
)

// errorType is the error.type of err: the Go type of the innermost error
// that is not a mere wrapper (fmt.Errorf's), such as "*net.OpError".
func errorType(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil || !isWrapper(err) {
			return fmt.Sprintf("%T", err)
		}
		err = u
	}
}

// isWrapper reports whether err only adds text to the error it wraps.
func isWrapper(err error) bool {
	t := fmt.Sprintf("%T", err)
	return t == "*fmt.wrapError" || t == "*fmt.wrapErrors"
}

func (t *telemetry) startWait(ctx context.Context, name string) waitSpan {
	if !t.spans.on() {
		return waitSpan{}
	}
	_, span := t.tracer.Start(ctx, "lock.wait", trace.WithAttributes(
		attrLock.String(name), attrClient.String(t.clientID)))
	return waitSpan{span}
}

func (t *telemetry) endWait(w waitSpan, name string, d time.Duration, l *Lease, err error) {
	record := t.metrics.on()
	if w.span == nil && !record {
		return
	}
	outcome := outcomeAcquired
	switch {
	case err == nil:
	case errors.Is(err, ErrLocked):
		outcome = outcomeLocked
	case errors.Is(err, ErrDone):
		outcome = outcomeDone
	case errors.Is(err, ErrPaused):
		outcome = outcomePaused
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		outcome = outcomeCanceled
	default:
		outcome = outcomeError
	}
	if w.span != nil {
		if w.span.IsRecording() {
			attrs := []attribute.KeyValue{attrOutcome.String(outcome)}
			if l != nil {
				attrs = append(attrs, attrOwner.String(l.owner), attrToken.Int64(l.token))
			}
			w.span.SetAttributes(attrs...)
			if outcome == outcomeError {
				w.span.RecordError(err)
				w.span.SetStatus(codes.Error, err.Error())
				w.span.SetAttributes(attrErrorType.String(errorType(err)))
			}
		}
		w.span.End()
	}
	if record {
		t.wait.Record(context.Background(), d.Seconds(), metric.WithAttributes(
			attrLock.String(name), attrOutcome.String(outcome)))
	}
}

func (t *telemetry) startHold(ctx context.Context, l *Lease) holdSpan {
	if !t.spans.on() {
		return holdSpan{}
	}
	_, span := t.tracer.Start(ctx, "lock.hold", trace.WithAttributes(
		attrLock.String(l.k.name), attrClient.String(t.clientID),
		attrOwner.String(l.owner), attrToken.Int64(l.token)))
	return holdSpan{span}
}

func (t *telemetry) endHold(h holdSpan, l *Lease, d time.Duration, outcome string) {
	if h.span != nil {
		h.span.SetAttributes(attrOutcome.String(outcome))
		if outcome == outcomeLost {
			h.span.SetStatus(codes.Error, "lock lost")
			h.span.SetAttributes(attrErrorType.String(outcomeLost))
		}
		h.span.End()
	}
	if !t.metrics.on() {
		return
	}
	t.hold.Record(context.Background(), d.Seconds(), metric.WithAttributes(
		attrLock.String(l.k.name), attrOutcome.String(outcome)))
}

func (t *telemetry) renewed(name, outcome string) {
	if !t.metrics.on() {
		return
	}
	t.renewals.Add(context.Background(), 1, metric.WithAttributes(
		attrLock.String(name), attrOutcome.String(outcome)))
}

// zero makes the counters of the lock name (renewals by outcome, leases
// lost) exist at 0, once per name, so that a rate or increase() over them
// sees the first event: a counter that appears at 1 has no increase to
// show. It is called when a ledger of the name is made: a scheduler's job,
// whose lock names are few and known at start (a lock made alone, whose
// names may be many, gets its series at its first renewal or loss).
func (t *telemetry) zero(name string) {
	if !t.metrics.on() {
		return
	}
	if _, done := t.zeroed.LoadOrStore(name, struct{}{}); done {
		return
	}
	ctx, lock := context.Background(), attrLock.String(name)
	t.lostN.Add(ctx, 0, metric.WithAttributes(lock))
	for _, o := range []string{"ok", "error", "lost"} {
		t.renewals.Add(ctx, 0, metric.WithAttributes(lock, attrOutcome.String(o)))
	}
}

func (t *telemetry) lost(name string) {
	if !t.metrics.on() {
		return
	}
	t.lostN.Add(context.Background(), 1, metric.WithAttributes(attrLock.String(name)))
}

// secondBuckets are the histograms' bucket bounds, in seconds: the SDK's
// default bounds are meant for milliseconds.
var secondBuckets = metric.WithExplicitBucketBoundaries(
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
