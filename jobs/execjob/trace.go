package execjob

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/propagation"
)

// traceEnvNames are the environment variables of an exec job's trace
// context.
var traceEnvNames = []string{"TRACEPARENT", "TRACESTATE"}

// traceEnv is the W3C trace context of the span in ctx, the scheduler's
// job.run span, as "NAME=value" environment variables (OpenTelemetry's
// convention for environment variables as carriers), so that the job's
// own spans join the run's trace; none without a valid span context.
func traceEnv(ctx context.Context) []string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	var env []string
	for _, k := range c.Keys() {
		env = append(env, strings.ToUpper(k)+"="+c.Get(k))
	}
	return env
}
