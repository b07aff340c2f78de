package httpjob

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/internal/runtest"
)

// An http job sends the run's trace context: traceparent and tracestate.
func TestHTTPTraceContext(t *testing.T) {
	got := make(chan http.Header, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	defer srv.Close()
	ctx, parent := runtest.Span(t)
	if err := (&HTTP{URL: srv.URL}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	h := <-got
	if h.Get("Traceparent") != parent || h.Get("Tracestate") != "vendor=abc" {
		t.Errorf("traceparent %q, tracestate %q; want %q and vendor=abc", h.Get("Traceparent"), h.Get("Tracestate"), parent)
	}
	// Without a span: no header.
	if err := (&HTTP{URL: srv.URL}).Run(jobs.WithInfo(context.Background(), runtest.Info)); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get("Traceparent") != "" {
		t.Errorf("traceparent %q without a span", h.Get("Traceparent"))
	}
}
