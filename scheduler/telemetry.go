package scheduler

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/lockcron/lockcron/jobs"
)

// instrumentation is the name of the tracer and the meter.
const instrumentation = "github.com/lockcron/lockcron/scheduler"

// Metric names.
const (
	metricRuns     = "lockcron.job.runs"
	metricWait     = "lockcron.job.wait.duration"
	metricHold     = "lockcron.job.run.duration"
	metricLateness = "lockcron.job.lateness"
	metricLost     = "lockcron.job.locks_lost"
	metricClaims   = "lockcron.job.claims"

	// Gauges, read when the metrics are collected, while Run runs.
	metricLastSuccess = "lockcron.job.last_success_timestamp" // Prometheus: lockcron_job_last_success_timestamp_seconds
	metricNextTick    = "lockcron.job.next_tick_timestamp"    // lockcron_job_next_tick_timestamp_seconds
	metricPaused      = "lockcron.job.paused"                 // lockcron_job_paused
	metricPeriod      = "lockcron.job.period"                 // lockcron_job_period_seconds
	metricMismatch    = "lockcron.job.definition_mismatch"    // lockcron_job_definition_mismatch
	metricRunning     = "lockcron.job.running"                // lockcron_job_running_seconds
)

// gaugeTimeout bounds the ledger reads of one collection of the gauges.
const gaugeTimeout = time.Second

type telemetry struct {
	meter    metric.Meter
	replica  string
	tracer   trace.Tracer
	runs     metric.Int64Counter
	wait     metric.Float64Histogram
	hold     metric.Float64Histogram
	lateness metric.Float64Histogram
	lost     metric.Int64Counter
	claims   metric.Int64Counter

	// sets keeps the attribute set of each (job, key, value) that a
	// measurement was made with: every replica records a few measurements
	// of every job at every tick, and building the set anew each time (a
	// sort, a hash, allocations) cost a tenth of a replica's CPU. It holds
	// jobs × outcomes entries.
	setsMu sync.RWMutex
	sets   map[attrKey]metric.MeasurementOption
	every  map[string]bool // jobs that run on every replica: their measurements carry the replica too (perReplica)
}

type attrKey struct {
	job string
	k   attribute.Key
	v   string
}

// attrs returns the measurement option of job and, when k is not empty,
// k=v too.
func (t *telemetry) attrs(job string, k attribute.Key, v string) metric.MeasurementOption {
	key := attrKey{job, k, v}
	t.setsMu.RLock()
	o, ok := t.sets[key]
	t.setsMu.RUnlock()
	if ok {
		return o
	}
	kvs := []attribute.KeyValue{attrJob.String(job)}
	if k != "" {
		kvs = append(kvs, k.String(v))
	}
	t.setsMu.Lock()
	if t.every[job] {
		kvs = append(kvs, attrReplica.String(t.replica))
	}
	o = metric.WithAttributeSet(attribute.NewSet(kvs...))
	if t.sets == nil {
		t.sets = make(map[attrKey]metric.MeasurementOption)
	}
	t.sets[key] = o
	t.setsMu.Unlock()
	return o
}

// perReplica says whether job runs on every replica (Job.Replicas
// ReplicasAll): then its measurements carry lockcron.replica besides
// lockcron.job, so that a collector that merges the replicas' metrics
// keeps each replica's outcomes apart.
func (t *telemetry) perReplica(job string, on bool) {
	t.setsMu.Lock()
	defer t.setsMu.Unlock()
	if t.every[job] == on {
		return
	}
	if t.every == nil {
		t.every = make(map[string]bool)
	}
	t.every[job] = on
	for k := range t.sets {
		if k.job == job {
			delete(t.sets, k)
		}
	}
}

func newTelemetry(o options, log hclog.Logger) *telemetry {
	t := &telemetry{replica: o.replica, tracer: o.tracer.Tracer(instrumentation)}
	m := o.meter.Meter(instrumentation)
	t.meter = m
	var errs []error
	var err error
	t.runs, err = m.Int64Counter(metricRuns, metric.WithUnit("{tick}"),
		metric.WithDescription("Ticks handled by this replica, by job and outcome."))
	errs = append(errs, err)
	t.wait, err = m.Float64Histogram(metricWait, metric.WithUnit("s"), secondBuckets,
		metric.WithDescription("Time from a tick's firing to its claim's result: the lock wait, by job and outcome."))
	errs = append(errs, err)
	t.hold, err = m.Float64Histogram(metricHold, metric.WithUnit("s"), secondBuckets,
		metric.WithDescription("Time a run held the job's lock, by job and outcome."))
	errs = append(errs, err)
	t.lateness, err = m.Float64Histogram(metricLateness, metric.WithUnit("s"), secondBuckets,
		metric.WithDescription("Start of a run minus its scheduled time, by job."))
	errs = append(errs, err)
	t.lost, err = m.Int64Counter(metricLost, metric.WithUnit("{lease}"),
		metric.WithDescription("Runs whose lock was lost while the job ran, by job."))
	errs = append(errs, err)
	t.claims, err = m.Int64Counter(metricClaims, metric.WithUnit("{tick}"),
		metric.WithDescription("Ticks this replica claimed or spared, by job and why (lockcron.claim: preferred, fallback, given_back, before_later, unknown, spared)."))
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		log.Warn("scheduler metrics unavailable", "error", err)
	}
	return t
}

// observe registers the gauges of s's jobs: the fleet's last success
// (from each job's ledger, on the store's clock), this replica's next tick,
// whether the job is paused, and how long its run under way here has gone.
// The registration it returns ends them.
func (t *telemetry) observe(s *Scheduler) (metric.Registration, error) {
	last, err1 := t.meter.Float64ObservableGauge(metricLastSuccess, metric.WithUnit("s"),
		metric.WithDescription("When a scheduled run of the job last succeeded anywhere in the fleet, in seconds since the epoch, as the job's ledger says; absent until one has."))
	next, err2 := t.meter.Float64ObservableGauge(metricNextTick, metric.WithUnit("s"),
		metric.WithDescription("The job's next tick on this replica, in seconds since the epoch."))
	paused, err3 := t.meter.Int64ObservableGauge(metricPaused,
		metric.WithDescription("1 while the job is paused fleet-wide, else 0."))
	period, err4 := t.meter.Float64ObservableGauge(metricPeriod, metric.WithUnit("s"),
		metric.WithDescription("The time between the job's next two ticks, in seconds: with the last success, says how many periods a job has gone without one."))
	mismatch, err5 := t.meter.Int64ObservableGauge(metricMismatch,
		metric.WithDescription("1 while a claim of the job by this replica found another definition of it in the ledger in the last ten minutes (another replica runs another version: a change half rolled out), else 0."))
	running, err6 := t.meter.Float64ObservableGauge(metricRunning, metric.WithUnit("s"),
		metric.WithDescription("How long the run of the job under way on this replica has gone, in seconds; 0 when none runs here (take the max over the replicas for the fleet's)."))
	if err := errors.Join(err1, err2, err3, err4, err5, err6); err != nil {
		return nil, err
	}
	return t.meter.RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, gaugeTimeout)
		defer cancel()
		for _, g := range s.gauges(ctx) {
			job := metric.WithAttributes(attrJob.String(g.job))
			if g.replica != "" {
				job = metric.WithAttributes(attrJob.String(g.job), attrReplica.String(g.replica))
			}
			if !g.next.IsZero() {
				o.ObserveFloat64(next, float64(g.next.UnixMilli())/1e3, job)
			}
			if g.period > 0 {
				o.ObserveFloat64(period, g.period.Seconds(), job)
			}
			var mm int64
			if g.mismatch {
				mm = 1
			}
			o.ObserveInt64(mismatch, mm, job)
			o.ObserveFloat64(running, g.running.Seconds(), job)
			if !g.ok {
				continue // the ledger could not be read: no figure rather than a wrong one
			}
			if !g.lastSuccess.IsZero() {
				o.ObserveFloat64(last, float64(g.lastSuccess.UnixMilli())/1e3, job)
			}
			var p int64
			if g.paused {
				p = 1
			}
			o.ObserveInt64(paused, p, job)
		}
		return nil
	}, last, next, paused, period, mismatch, running)
}

func (t *telemetry) startTick(ctx context.Context, job, lock string, tick time.Time) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, "job.tick", trace.WithAttributes(
		attrJob.String(job), attrTick.String(tick.UTC().Format(time.RFC3339Nano)),
		attrLock.String(lock), attrReplica.String(t.replica)))
}

func (t *telemetry) startRun(ctx context.Context) (context.Context, trace.Span) {
	info, _ := jobs.InfoFrom(ctx)
	return t.tracer.Start(ctx, "job.run", trace.WithAttributes(
		attrJob.String(info.Job), attrTick.String(info.Tick.UTC().Format(time.RFC3339Nano)),
		attrLock.String(info.Lock), attrAttempt.Int(info.Attempt),
		attrToken.Int64(info.Token), attrReplica.String(t.replica)))
}

// endSpan ends span with its outcome, and marks it failed with err when
// the outcome counts as an error (Outcome.failure).
func endSpan(span trace.Span, outcome Outcome, err error) {
	if span.IsRecording() {
		span.SetAttributes(attrOutcome.String(string(outcome)))
		if err != nil && outcome.failure() {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(attrErrorType.String(string(outcome)))
		}
	}
	span.End()
}

// Attribute keys of the spans and metrics, under the lockcron. namespace
// (no semantic convention covers jobs yet; as Prometheus labels,
// lockcron_job and so on, which do not clash with the scrape's own job
// label). A failed span has error.type too (OpenTelemetry's semantic
// convention): its outcome, such as "failed" or "lost_lock".
const (
	attrJob       = attribute.Key("lockcron.job")
	attrTick      = attribute.Key("lockcron.tick")
	attrLock      = attribute.Key("lockcron.lock")
	attrReplica   = attribute.Key("lockcron.replica")
	attrAttempt   = attribute.Key("lockcron.attempt")
	attrToken     = attribute.Key("lockcron.token")
	attrOutcome   = attribute.Key("lockcron.outcome")
	attrErrorType = attribute.Key("error.type")
	attrClaim     = attribute.Key("lockcron.claim")
)

// outcomes are the outcomes that lockcron.job.runs counts, each at 0 from
// the moment a job is added (zero).
var outcomes = []Outcome{OutcomeRan, OutcomeFailed, OutcomeSkippedDone, OutcomeSkippedBusy,
	OutcomeLostLock, OutcomeInterrupted, OutcomeHandedOff, OutcomeMissed, OutcomeError, OutcomePaused,
	OutcomeDeadlineMissed, OutcomeExcluded, OutcomeReplaced}

// zero makes job's counters (runs by outcome, locks lost) exist at 0, so
// that a rate or increase() over them sees the first event: a counter that
// appears at 1 has no increase to show.
func (t *telemetry) zero(job string) {
	for _, o := range outcomes {
		t.outcome(job, o, 0)
	}
	t.lost.Add(context.Background(), 0, t.attrs(job, "", ""))
}

func (t *telemetry) outcome(job string, outcome Outcome, n int64) {
	t.runs.Add(context.Background(), n, t.attrs(job, attrOutcome, string(outcome)))
}

// waited records a claim's wait: its result is an Outcome, or "acquired",
// or "stopped".
func (t *telemetry) waited(job, result string, d time.Duration) {
	t.wait.Record(context.Background(), d.Seconds(), t.attrs(job, attrOutcome, result))
}

func (t *telemetry) held(job string, outcome Outcome, d time.Duration) {
	t.hold.Record(context.Background(), d.Seconds(), t.attrs(job, attrOutcome, string(outcome)))
}

func (t *telemetry) late(job string, d time.Duration) {
	t.lateness.Record(context.Background(), max(d, 0).Seconds(), t.attrs(job, "", ""))
}

func (t *telemetry) claimed(job, why string) {
	t.claims.Add(context.Background(), 1, t.attrs(job, attrClaim, why))
}

func (t *telemetry) lostLock(job string) {
	t.lost.Add(context.Background(), 1, t.attrs(job, "", ""))
}

// secondBuckets are the histograms' bucket bounds, in seconds: the SDK's
// default bounds are meant for milliseconds.
var secondBuckets = metric.WithExplicitBucketBoundaries(
	0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
	1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)
