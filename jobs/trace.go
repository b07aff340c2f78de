package jobs

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
)

// The run's trace continues into its job, by the W3C trace context of the
// span in the run's ctx (the scheduler's "job.run" span): an http job sends
// the traceparent and tracestate headers, and an exec job gets TRACEPARENT
// and TRACESTATE in its environment (OpenTelemetry's convention for
// environment variables as carriers), so that the job's own spans join the
// run's trace. Without a span in ctx (tracing off) nothing is sent, and an
// exec job does not inherit the daemon's own TRACEPARENT or TRACESTATE.
var traceContext propagation.TraceContext

// traceEnvNames are the environment variables of an exec job's trace
// context.
var traceEnvNames = []string{"TRACEPARENT", "TRACESTATE"}

// injectTraceHeaders sets the trace context of ctx on h.
func injectTraceHeaders(ctx context.Context, h http.Header) {
	traceContext.Inject(ctx, propagation.HeaderCarrier(h))
}

// traceEnv is the trace context of ctx as "NAME=value" environment
// variables; none without a valid span context.
func traceEnv(ctx context.Context) []string {
	c := propagation.MapCarrier{}
	traceContext.Inject(ctx, c)
	var env []string
	for _, k := range c.Keys() {
		env = append(env, strings.ToUpper(k)+"="+c.Get(k))
	}
	return env
}
