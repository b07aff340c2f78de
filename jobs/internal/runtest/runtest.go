// Package runtest holds what the tests of the exec and http jobs share: the
// run's Info they run with, and a ctx with a span as the scheduler's
// job.run span would put there.
package runtest

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/lockcron/lockcron/jobs"
)

// Info is the Info the exec and http tests run with.
var Info = jobs.Info{
	Job:     "backup",
	Tick:    time.Date(2025, 3, 1, 5, 0, 0, 0, time.FixedZone("CET", 3600)),
	Lock:    "job:backup",
	Token:   1740798300000042,
	Attempt: 2,
	Replica: "replica-1",
}

// Tick is Info.Tick in UTC, RFC 3339.
const Tick = "2025-03-01T04:00:00Z"

// Span returns a ctx with Info and a span context, with a tracestate
// "vendor=abc", as the scheduler's job.run span would put there; and that
// span's traceparent.
func Span(t *testing.T) (context.Context, string) {
	t.Helper()
	ts, err := trace.ParseTraceState("vendor=abc")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		TraceState: ts,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	return jobs.WithInfo(ctx, Info), "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
}

// Safety bounds every test that waits for a run to end, so that a broken
// run fails the test instead of hanging it.
const Safety = 30 * time.Second
