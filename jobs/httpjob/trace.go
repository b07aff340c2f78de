package httpjob

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// injectTraceHeaders sets on h the W3C trace context (traceparent,
// tracestate) of the span in ctx, the scheduler's job.run span, so that
// the receiver's spans join the run's trace. Without a span in ctx
// (tracing off) it sets nothing.
func injectTraceHeaders(ctx context.Context, h http.Header) {
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}
