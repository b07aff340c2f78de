package jobs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// runSpan starts a span as the scheduler's job.run would be, with a
// tracestate, and returns its ctx and its traceparent.
func runSpan(t *testing.T) (context.Context, string) {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "job.run")
	t.Cleanup(func() { span.End() })
	sc := span.SpanContext()
	ts, err := trace.ParseTraceState("vendor=abc")
	if err != nil {
		t.Fatal(err)
	}
	ctx = trace.ContextWithSpanContext(ctx, sc.WithTraceState(ts))
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
