package scheduler_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/lockcron/lockcron/internal/oteltest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/execjob"
	"github.com/lockcron/lockcron/jobs/httpjob"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// observed is one replica on Redis whose spans, metrics and logs a test
// reads: the lock.Client and the Scheduler share one tracer provider, and
// the Scheduler logs at Debug level under the root logger "app".
type observed struct {
	*replica
	spans *oteltest.TracerProvider
	m     *meter
	logs  *lockedWriter
	j     *journal
}

func newObserved(t *testing.T, opts ...scheduler.Option) *observed {
	t.Helper()
	srv := redistest.Start(t)
	spans := oteltest.NewTracerProvider()
	tp := spans
	logs := &lockedWriter{w: &strings.Builder{}}
	log := hclog.New(&hclog.LoggerOptions{Name: "app", Level: hclog.Debug, Output: logs})
	m := newMeter()
	r := newRedisReplica(t, srv, "r1", []lock.Option{lock.WithTracerProvider(tp)},
		append([]scheduler.Option{m.option(), scheduler.WithTracerProvider(tp), scheduler.WithLogger(log)}, opts...)...)
	return &observed{replica: r, spans: spans, m: m, logs: logs, j: newJournal()}
}

// tickSpan is the ended job.tick span of job's tick.
func (o *observed) tickSpan(t *testing.T, job string, tick time.Time) *oteltest.Span {
	t.Helper()
	want := tick.UTC().Format(time.RFC3339)
	for _, s := range o.spans.Ended() {
		attrs := attribute.NewSet(s.Attributes()...)
		if s.Name() == "job.tick" && attrString(attrs, "lockcron.job") == job && attrString(attrs, "lockcron.tick") == want {
			return s
		}
	}
	t.Fatalf("no job.tick span of job %s, tick %s; spans: %s", job, want, spanNames(o.spans.Ended()))
	return nil
}

// childOf is the ended span named name whose parent is parent.
func (o *observed) childOf(t *testing.T, name string, parent *oteltest.Span) *oteltest.Span {
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

func spanNames(spans []*oteltest.Span) string {
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
	t.Parallel()
	clk := testclock.NewFake(fakeStart)
	o := newObserved(t, scheduler.WithClock(clk))
	const job = "report"
	o.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Run: o.j.fn(nil)})
	o.start()
	step(t, clk, 1)
	x := o.j.awaitStart(t, 10*time.Second)
	testkit.Eventually(t, 10*time.Second, "outcome ran", func() bool { return o.m.runs(t, job, scheduler.OutcomeRan) >= 1 })
	o.stop(t)

	tick := o.tickSpan(t, job, x.info.Tick)
	attrs := attribute.NewSet(tick.Attributes()...)
	want := map[attribute.Key]string{
		"lockcron.job":     job,
		"lockcron.tick":    x.info.Tick.UTC().Format(time.RFC3339),
		"lockcron.lock":    job,
		"lockcron.replica": "r1",
		"lockcron.token":   attribute.Int64Value(x.info.Token).Emit(),
		"lockcron.attempt": "1",
		"lockcron.outcome": string(scheduler.OutcomeRan),
	}
	for k, v := range want {
		if got, ok := attrs.Value(k); !ok || got.Emit() != v {
			t.Errorf("job.tick attribute %s = %q (present %v), want %q", k, got.Emit(), ok, v)
		}
	}
	if _, err := time.Parse(time.RFC3339, attrString(attrs, "lockcron.tick")); err != nil {
		t.Errorf("job.tick attribute tick: %v", err)
	}
	if tick.Status().Code == codes.Error {
		t.Errorf("job.tick status %+v for a run that returned nil", tick.Status())
	}

	wait := o.childOf(t, "lock.wait", tick)
	if v := attrString(attribute.NewSet(wait.Attributes()...), "lockcron.lock"); v != job {
		t.Errorf("lock.wait attribute lock = %q, want %q", v, job)
	}
	run := o.childOf(t, "job.run", tick)
	runAttrs := attribute.NewSet(run.Attributes()...)
	if v := attrString(runAttrs, "lockcron.attempt"); v != "1" {
		t.Errorf("job.run attribute attempt = %q, want 1", v)
	}
	if v := attrString(runAttrs, "lockcron.outcome"); v != string(scheduler.OutcomeRan) {
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

	// One INFO line per finished run, with what an operator asks.
	o.logLine(t, "[INFO]  app.scheduler: run finished:", "job="+job+" ", "tick="+x.info.Tick.UTC().Format(time.RFC3339),
		"replica=", "attempt=1", "duration=", "outcome=ran")
}

// A job that returns an error: its job.tick span has status Error and
// outcome failed, and "run finished: job failed" is logged at error level
// with job, tick, replica, duration, outcome and error.
func TestTelemetryOfAFailure(t *testing.T) {
	t.Parallel()
	clk := testclock.NewFake(fakeStart)
	o := newObserved(t, scheduler.WithClock(clk))
	const job = "flaky"
	errBoom := errors.New("boom")
	o.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Run: o.j.fn(func(context.Context) error { return errBoom })})
	o.start()
	step(t, clk, 1)
	x := o.j.awaitStart(t, 10*time.Second)
	testkit.Eventually(t, 10*time.Second, "outcome failed", func() bool { return o.m.runs(t, job, scheduler.OutcomeFailed) >= 1 })
	o.stop(t)

	tick := o.tickSpan(t, job, x.info.Tick)
	if tick.Status().Code != codes.Error || !strings.Contains(tick.Status().Description, errBoom.Error()) {
		t.Errorf("job.tick status %+v, want Error with %q", tick.Status(), errBoom)
	}
	if v := attrString(attribute.NewSet(tick.Attributes()...), "lockcron.outcome"); v != string(scheduler.OutcomeFailed) {
		t.Errorf("job.tick attribute outcome = %q, want failed", v)
	}
	run := o.childOf(t, "job.run", tick)
	if run.Status().Code != codes.Error {
		t.Errorf("job.run status %+v, want Error", run.Status())
	}
	o.logLine(t, "[ERROR] app.scheduler: run finished: job failed:", "job="+job+" ",
		"tick="+x.info.Tick.UTC().Format(time.RFC3339), "error="+errBoom.Error(), "replica=", "duration=", "outcome=failed")
}

// gaugeValue is the float64 or int64 gauge's value for job, and whether it
// has one.
func (m *meter) gaugeValue(t *testing.T, name, job string) (float64, bool) {
	t.Helper()
	for _, dp := range m.data(t, name) {
		if dp.Kind != oteltest.Gauge {
			t.Fatalf("metric %s is not a gauge: %+v", name, dp)
		}
		if v, ok := dp.Attributes.Value("lockcron.job"); ok && v.AsString() == job {
			return dp.Value, true
		}
	}
	return 0, false
}

// The job gauges: the fleet's last success (absent before any), the next
// tick, and paused, which follows Pause and Resume; a paused tick is not a
// lock-wait error.
func TestJobGauges(t *testing.T) {
	t.Parallel()
	clk := testclock.NewFake(fakeStart)
	o := newObserved(t, scheduler.WithClock(clk))
	ctx := testkit.Context(t)
	const job = "gauged"
	o.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Run: o.j.fn(nil)})
	o.start()
	testkit.Eventually(t, 10*time.Second, "the replica runs", o.s.Running)
	if v, ok := o.m.gaugeValue(t, "lockcron.job.last_success_timestamp", job); ok {
		t.Errorf("last success before any run: %v, want none", v)
	}
	step(t, clk, 1)
	o.j.awaitStart(t, 10*time.Second)
	testkit.Eventually(t, 10*time.Second, "last success reported", func() bool {
		_, ok := o.m.gaugeValue(t, "lockcron.job.last_success_timestamp", job)
		return ok
	})
	now := float64(time.Now().UnixMilli()) / 1e3
	last, _ := o.m.gaugeValue(t, "lockcron.job.last_success_timestamp", job)
	if last > now+1 || last < now-30 {
		t.Errorf("last success %.3f, now %.3f: want a moment ago", last, now)
	}
	settle(t, clk, 1, job, o.replica)
	waits, _ := clk.Next()
	next, ok := o.m.gaugeValue(t, "lockcron.job.next_tick_timestamp", job)
	if want := float64(waits.UnixMilli()) / 1e3; !ok || next != want {
		t.Errorf("next tick %.3f (%v), want %.3f: the tick the loop waits for", next, ok, want)
	}
	if p, ok := o.m.gaugeValue(t, "lockcron.job.paused", job); !ok || p != 0 {
		t.Errorf("paused = %v (%v), want 0", p, ok)
	}
	if p, ok := o.m.gaugeValue(t, "lockcron.job.period", job); !ok || p != 1 {
		t.Errorf("period = %v (%v), want 1 (@every 1s)", p, ok)
	}
	if err := o.s.Pause(ctx, job, true, testPause); err != nil {
		t.Fatal(err)
	}
	if p, _ := o.m.gaugeValue(t, "lockcron.job.paused", job); p != 1 {
		t.Errorf("paused = %v after Pause, want 1", p)
	}
	step(t, clk, 1)
	testkit.Eventually(t, 10*time.Second, "a paused tick", func() bool { return o.m.runs(t, job, scheduler.OutcomePaused) == 1 })
	heard := func(what string) {
		testkit.Eventually(t, 10*time.Second, "the replica logs that it heard "+what, func() bool {
			return strings.Contains(o.logs.String(), "[INFO]  app.scheduler: heard: job "+what+" fleet-wide: job="+job)
		})
	}
	heard("paused")
	if err := o.s.Pause(ctx, job, false, testPause); err != nil {
		t.Fatal(err)
	}
	if p, _ := o.m.gaugeValue(t, "lockcron.job.paused", job); p != 0 {
		t.Errorf("paused = %v after Resume, want 0", p)
	}
	heard("resumed")
	o.stop(t)
	for _, s := range o.spans.Ended() {
		attrs := attribute.NewSet(s.Attributes()...)
		if s.Name() == "job.tick" && attrString(attrs, "lockcron.outcome") == string(scheduler.OutcomePaused) && s.Status().Code == codes.Error {
			t.Errorf("a paused tick's span has status Error: %+v", s.Status())
		}
		if s.Name() == "lock.wait" && attrString(attrs, "lockcron.outcome") == "error" {
			t.Errorf("a lock.wait span with outcome error: %v", s.Status())
		}
	}
}

// The run's trace continues into its job: an exec job gets the job.run
// span as its TRACEPARENT, an http job as its traceparent header.
func TestTraceContinuesIntoJobs(t *testing.T) {
	t.Parallel()
	clk := testclock.NewFake(fakeStart)
	o := newObserved(t, scheduler.WithClock(clk))
	out := filepath.Join(t.TempDir(), "traceparent")
	o.add(t, scheduler.Job{Name: "exec", Schedule: "@every 1s", Run: &execjob.Exec{
		Command: []string{"sh", "-c", `[ -s "$OUT" ] || echo "$TRACEPARENT $LOCKCRON_TICK" > "$OUT"`},
		Env:     map[string]string{"OUT": out},
	}})
	heard := make(chan [2]string, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case heard <- [2]string{r.Header.Get("Traceparent"), r.Header.Get(jobs.HeaderTick)}:
		default:
		}
	}))
	defer srv.Close()
	o.add(t, scheduler.Job{Name: "http", Schedule: "@every 1s", Run: &httpjob.HTTP{URL: srv.URL}})
	o.start()
	step(t, clk, 2)
	var got []string
	testkit.Eventually(t, 10*time.Second, "the exec job wrote its TRACEPARENT", func() bool {
		b, err := os.ReadFile(out)
		got = strings.Fields(string(b))
		return err == nil && len(got) == 2
	})
	h := <-heard
	testkit.Eventually(t, 10*time.Second, "both ran", func() bool {
		return o.m.runs(t, "exec", scheduler.OutcomeRan) >= 1 && o.m.runs(t, "http", scheduler.OutcomeRan) >= 1
	})
	o.stop(t)
	for _, c := range []struct{ job, traceparent, tick string }{{"exec", got[0], got[1]}, {"http", h[0], h[1]}} {
		tick, err := time.Parse(time.RFC3339, c.tick)
		if err != nil {
			t.Fatalf("%s: tick %q: %v", c.job, c.tick, err)
		}
		sc := o.childOf(t, "job.run", o.tickSpan(t, c.job, tick)).SpanContext()
		if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; c.traceparent != want {
			t.Errorf("%s job: traceparent %q, want the job.run span's %q", c.job, c.traceparent, want)
		}
	}
}
