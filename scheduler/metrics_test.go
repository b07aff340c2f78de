package scheduler_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/lockcron/lockcron/internal/oteltest"
	"github.com/lockcron/lockcron/scheduler"
)

// meter collects what one replica's Scheduler reports, for tests to read
// at any time.
type meter struct {
	mp *oteltest.MeterProvider
}

func newMeter() *meter {
	return &meter{mp: oteltest.NewMeterProvider()}
}

// option gives the meter to a Scheduler.
func (m *meter) option() scheduler.Option { return scheduler.WithMeterProvider(m.mp) }

// data returns the points of every metric called name.
func (m *meter) data(t *testing.T, name string) []oteltest.Point {
	t.Helper()
	return m.mp.Collect(name)
}

// counter is the sum of an int64 counter's data points whose attributes
// include every one of attrs.
func (m *meter) counter(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	var n int64
points:
	for _, dp := range m.data(t, name) {
		if dp.Kind != oteltest.Counter || !dp.Int {
			t.Fatalf("metric %s is not an int64 counter: %+v", name, dp)
		}
		for _, a := range attrs {
			if v, ok := dp.Attributes.Value(a.Key); !ok || v != a.Value {
				continue points
			}
		}
		n += int64(dp.Value)
	}
	return n
}

// histogramCount is the number of recordings of the float64 histogram name
// with attribute job=job.
func (m *meter) histogramCount(t *testing.T, name, job string) uint64 {
	t.Helper()
	var n uint64
	for _, dp := range m.data(t, name) {
		if dp.Kind != oteltest.Histogram || dp.Int {
			t.Fatalf("metric %s is not a float64 histogram: %+v", name, dp)
		}
		if v, ok := dp.Attributes.Value("lockcron.job"); ok && v.AsString() == job {
			n += dp.Count
		}
	}
	return n
}

// runs is lockcron.job.runs of job with the given outcome.
func (m *meter) runs(t *testing.T, job string, outcome scheduler.Outcome) int64 {
	t.Helper()
	return m.counter(t, "lockcron.job.runs", attribute.String("lockcron.job", job), attribute.String("lockcron.outcome", string(outcome)))
}

// outcomes is lockcron.job.runs of job by outcome; outcomes never counted
// are absent.
func (m *meter) outcomes(t *testing.T, job string) map[scheduler.Outcome]int64 {
	t.Helper()
	out := map[scheduler.Outcome]int64{}
	for _, o := range []scheduler.Outcome{
		scheduler.OutcomeRan, scheduler.OutcomeFailed, scheduler.OutcomeSkippedDone,
		scheduler.OutcomeSkippedBusy, scheduler.OutcomeLostLock, scheduler.OutcomeInterrupted,
		scheduler.OutcomeHandedOff, scheduler.OutcomeMissed, scheduler.OutcomeError, scheduler.OutcomeDeadlineMissed,
	} {
		if n := m.runs(t, job, o); n != 0 {
			out[o] = n
		}
	}
	return out
}

// runsOf sums lockcron.job.runs of job with the given outcome over meters.
func runsOf(t *testing.T, job string, outcome scheduler.Outcome, meters ...*meter) int64 {
	t.Helper()
	var n int64
	for _, m := range meters {
		n += m.runs(t, job, outcome)
	}
	return n
}

// statusOf is s's Status of job.
func statusOf(t *testing.T, s *scheduler.Scheduler, job string) scheduler.Status {
	t.Helper()
	for _, st := range s.Status() {
		if st.Job == job {
			return st
		}
	}
	t.Fatalf("no status of job %q", job)
	return scheduler.Status{}
}
