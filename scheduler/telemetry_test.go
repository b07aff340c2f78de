package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// observed is one replica on Redis whose spans, metrics and logs a test
// reads: the lock.Client and the Scheduler share one tracer provider, and
// the Scheduler logs at Debug level under the root logger "app".
type observed struct {
	*replica
	spans *tracetest.SpanRecorder
	m     *meter
	logs  *lockedWriter
	j     *journal
}

func newObserved(t *testing.T) *observed {
	t.Helper()
	srv := redistest.Start(t)
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	logs := &lockedWriter{w: &strings.Builder{}}
	log := hclog.New(&hclog.LoggerOptions{Name: "app", Level: hclog.Debug, Output: logs})
	m := newMeter()
	r := newRedisReplica(t, srv, "r1", []lock.Option{lock.WithTracerProvider(tp)},
		m.option(), scheduler.WithTracerProvider(tp), scheduler.WithLogger(log))
	return &observed{replica: r, spans: spans, m: m, logs: logs, j: newJournal()}
}

// tickSpan is the ended job.tick span of job's tick.
func (o *observed) tickSpan(t *testing.T, job string, tick time.Time) sdktrace.ReadOnlySpan {
	t.Helper()
	want := tick.UTC().Format(time.RFC3339)
	for _, s := range o.spans.Ended() {
		attrs := attribute.NewSet(s.Attributes()...)
		if s.Name() == "job.tick" && attrString(attrs, "job") == job && attrString(attrs, "tick") == want {
			return s
		}
	}
	t.Fatalf("no job.tick span of job %s, tick %s; spans: %s", job, want, spanNames(o.spans.Ended()))
	return nil
}

// childOf is the ended span named name whose parent is parent.
func (o *observed) childOf(t *testing.T, name string, parent sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range o.spans.Ended() {
		if s.Name() == name && s.Parent().SpanID() == parent.SpanContext().SpanID() &&
			s.Parent().TraceID() == parent.SpanContext().TraceID() {
			return s
		}
	}
	t.Fatalf("no %s span under job.tick %v; spans: %s", name, parent.SpanContext().SpanID(), spanNames(o.spans.Ended()))
	return nil
}

// logLine is the first line of the logs that holds msg, e.g.
// "[DEBUG] app.scheduler: job ran", and each of fields.
func (o *observed) logLine(t *testing.T, msg string, fields ...string) string {
	t.Helper()
lines:
	for _, line := range strings.Split(o.logs.String(), "\n") {
		if !strings.Contains(line, msg) {
			continue
		}
		for _, f := range fields {
			if !strings.Contains(line, f) {
				continue lines
			}
		}
		return line
	}
	t.Errorf("no log line with %q and %q in:\n%s", msg, fields, o.logs.String())
	return ""
}

func attrString(s attribute.Set, key attribute.Key) string {
	v, _ := s.Value(key)
	return v.Emit()
}

func spanNames(spans []sdktrace.ReadOnlySpan) string {
	names := make([]string, 0, len(spans))
	for _, s := range spans {
		names = append(names, s.Name())
	}
	return strings.Join(names, " ")
}

// One tick on one replica, with a tracer provider shared by the lock.Client
// and the Scheduler: a job.tick span with the run's attributes, the lock's
// lock.wait span and a job.run span under it, the job metrics, and the
// "job ran" debug line with job and tick.
func TestTelemetryOfARun(t *testing.T) {
	o := newObserved(t)
	const job = "report"
	o.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Run: o.j.fn(nil)})
	o.start()
	x := o.j.awaitStart(t, 10*time.Second)
	eventually(t, 10*time.Second, "outcome ran", func() bool { return o.m.runs(t, job, scheduler.OutcomeRan) >= 1 })
	o.stop(t)

	tick := o.tickSpan(t, job, x.info.Tick)
	attrs := attribute.NewSet(tick.Attributes()...)
	want := map[attribute.Key]string{
		"job":     job,
		"tick":    x.info.Tick.UTC().Format(time.RFC3339),
		"lock":    job,
		"replica": "r1",
		"token":   attribute.Int64Value(x.info.Token).Emit(),
		"attempt": "1",
		"outcome": scheduler.OutcomeRan,
	}
	for k, v := range want {
		if got, ok := attrs.Value(k); !ok || got.Emit() != v {
			t.Errorf("job.tick attribute %s = %q (present %v), want %q", k, got.Emit(), ok, v)
		}
	}
	if _, err := time.Parse(time.RFC3339, attrString(attrs, "tick")); err != nil {
		t.Errorf("job.tick attribute tick: %v", err)
	}
	if tick.Status().Code == codes.Error {
		t.Errorf("job.tick status %+v for a run that returned nil", tick.Status())
	}

	wait := o.childOf(t, "lock.wait", tick)
	if v := attrString(attribute.NewSet(wait.Attributes()...), "lock"); v != job {
		t.Errorf("lock.wait attribute lock = %q, want %q", v, job)
	}
	run := o.childOf(t, "job.run", tick)
	runAttrs := attribute.NewSet(run.Attributes()...)
	if v := attrString(runAttrs, "attempt"); v != "1" {
		t.Errorf("job.run attribute attempt = %q, want 1", v)
	}
	if v := attrString(runAttrs, "outcome"); v != scheduler.OutcomeRan {
		t.Errorf("job.run attribute outcome = %q, want ran", v)
	}

	if n := o.m.runs(t, job, scheduler.OutcomeRan); n < 1 {
		t.Errorf("lockcron.job.runs{job=%s,outcome=ran} = %d, want ≥ 1", job, n)
	}
	for _, name := range []string{"lockcron.job.wait.duration", "lockcron.job.run.duration", "lockcron.job.lateness"} {
		if n := o.m.histogramCount(t, name, job); n == 0 {
			t.Errorf("%s{job=%s} has no data point", name, job)
		}
	}

	o.logLine(t, "[DEBUG] app.scheduler: job ran", "job="+job+" ", "tick="+x.info.Tick.UTC().Format(time.RFC3339))
}

// A job that returns an error: its job.tick span has status Error and
// outcome failed, and "job failed" is logged at error level with job, tick
// and error.
func TestTelemetryOfAFailure(t *testing.T) {
	o := newObserved(t)
	const job = "flaky"
	errBoom := errors.New("boom")
	o.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Run: o.j.fn(func(context.Context) error { return errBoom })})
	o.start()
	x := o.j.awaitStart(t, 10*time.Second)
	eventually(t, 10*time.Second, "outcome failed", func() bool { return o.m.runs(t, job, scheduler.OutcomeFailed) >= 1 })
	o.stop(t)

	tick := o.tickSpan(t, job, x.info.Tick)
	if tick.Status().Code != codes.Error || !strings.Contains(tick.Status().Description, errBoom.Error()) {
		t.Errorf("job.tick status %+v, want Error with %q", tick.Status(), errBoom)
	}
	if v := attrString(attribute.NewSet(tick.Attributes()...), "outcome"); v != scheduler.OutcomeFailed {
		t.Errorf("job.tick attribute outcome = %q, want failed", v)
	}
	run := o.childOf(t, "job.run", tick)
	if run.Status().Code != codes.Error {
		t.Errorf("job.run status %+v, want Error", run.Status())
	}
	o.logLine(t, "[ERROR] app.scheduler: job failed", "job="+job+" ",
		"tick="+x.info.Tick.UTC().Format(time.RFC3339), "error="+errBoom.Error())
}
