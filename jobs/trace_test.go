package jobs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// runSpan puts in ctx a span context as the scheduler's job.run span
// would, with a tracestate, and returns its ctx and its traceparent.
func runSpan(t *testing.T) (context.Context, string) {
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
	return WithInfo(ctx, testInfo), "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
}

// An http job sends the run's trace context: traceparent and tracestate.
func TestHTTPTraceContext(t *testing.T) {
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer srv.Close()
	ctx, parent := runSpan(t)
	if err := (&HTTP{URL: srv.URL}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.Get("Traceparent") != parent || h.Get("Tracestate") != "vendor=abc" {
		t.Errorf("traceparent %q, tracestate %q; want %q and vendor=abc", h.Get("Traceparent"), h.Get("Tracestate"), parent)
	}
	// Without a span: no header.
	if err := (&HTTP{URL: srv.URL}).Run(WithInfo(context.Background(), testInfo)); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get("Traceparent") != "" {
		t.Errorf("traceparent %q without a span", h.Get("Traceparent"))
	}
}

// An exec job gets TRACEPARENT and TRACESTATE; without a span, not the
// daemon's own.
func TestExecTraceContext(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "env")
	e := &Exec{Command: []string{"sh", "-c", `echo "$TRACEPARENT|$TRACESTATE" > "$OUT"`}, Env: map[string]string{"OUT": out}}
	ctx, parent := runSpan(t)
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != parent+"|vendor=abc" {
		t.Errorf("TRACEPARENT|TRACESTATE = %q, want %q", got, parent+"|vendor=abc")
	}

	t.Setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if err := e.Run(WithInfo(context.Background(), testInfo)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != "|" {
		t.Errorf("without a span the job got %q, want no trace context", b)
	}
}
