package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// telemetry is the daemon's tracer and meter providers, and the /metrics
// handler when metrics go to Prometheus.
type telemetry struct {
	tracer   trace.TracerProvider
	meter    metric.MeterProvider
	metrics  http.Handler // nil unless metrics = "prometheus"
	shutdown []func(context.Context) error
}

// newTelemetry sets up traces and metrics as cfg says. stdout is where
// "stdout" traces go.
func newTelemetry(ctx context.Context, cfg config.Telemetry, replica string, stdout io.Writer) (*telemetry, error) {
	t := &telemetry{tracer: tracenoop.NewTracerProvider(), meter: metricnoop.NewMeterProvider()}
	res, err := newResource(ctx, replica)
	if err != nil {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	switch {
	case !cfg.TracesNamed && os.Getenv("OTEL_TRACES_EXPORTER") != "":
		// The standard variables choose: otlp (with OTEL_EXPORTER_OTLP_*),
		// console or none.
		exp, err = autoexport.NewSpanExporter(ctx)
		if err == nil && autoexport.IsNoneSpanExporter(exp) {
			exp = nil
		}
	case cfg.Traces == config.TracesStdout:
		exp, err = stdouttrace.New(stdouttrace.WithWriter(stdout), stdouttrace.WithPrettyPrint())
	case cfg.Traces == config.TracesOTLP:
		exp, err = otlptracehttp.New(ctx, otlpTraceEndpoint(cfg.OTLPEndpoint)...)
	}
	if err != nil {
		return nil, fmt.Errorf("telemetry: traces %q: %w", tracesChoice(cfg), err)
	}
	if exp != nil {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.tracer = tp
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}
	if !cfg.MetricsNamed && os.Getenv("OTEL_METRICS_EXPORTER") != "" {
		// The standard variables choose: otlp, prometheus (on its own
		// listener, OTEL_EXPORTER_PROMETHEUS_HOST and _PORT, not on
		// /metrics), console or none.
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			return nil, fmt.Errorf("telemetry: metrics from OTEL_METRICS_EXPORTER %q: %w", os.Getenv("OTEL_METRICS_EXPORTER"), err)
		}
		if !autoexport.IsNoneMetricReader(r) {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r), sdkmetric.WithResource(res))
			t.meter = mp
			t.shutdown = append(t.shutdown, mp.Shutdown)
		}
		return t, nil
	}
	switch cfg.Metrics {
	case config.MetricsPrometheus:
		reg := prometheus.NewRegistry()
		// The Go runtime's and the process's own figures (go_goroutines,
		// process_open_fds, ...) beside lockcron's: a leak shows as growth.
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		pexp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, fmt.Errorf("telemetry: metrics %q: %w", cfg.Metrics, err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(pexp), sdkmetric.WithResource(res))
		t.meter = mp
		t.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
		t.shutdown = append(t.shutdown, mp.Shutdown)
	case config.MetricsOTLP:
		mexp, err := otlpmetrichttp.New(ctx, otlpMetricEndpoint(cfg.OTLPEndpoint)...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: metrics %q: %w", cfg.Metrics, err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp)), sdkmetric.WithResource(res))
		t.meter = mp
		t.shutdown = append(t.shutdown, mp.Shutdown)
	}
	return t, nil
}

// tracesChoice names what chose the span exporter, for errors.
func tracesChoice(cfg config.Telemetry) string {
	if !cfg.TracesNamed && os.Getenv("OTEL_TRACES_EXPORTER") != "" {
		return "from OTEL_TRACES_EXPORTER " + os.Getenv("OTEL_TRACES_EXPORTER")
	}
	return cfg.Traces
}

// newResource is the resource of the daemon's spans and metrics: service
// name "lockcron" and instance id the replica's, then what the standard
// variables say (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES), which win,
// and the SDK's own attributes.
func newResource(ctx context.Context, replica string) (*resource.Resource, error) {
	env, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource from OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	res, err := resource.Merge(resource.NewSchemaless(semconv.ServiceName("lockcron"), semconv.ServiceInstanceID(replica)), env)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	return res, nil
}

// close flushes and stops the providers.
func (t *telemetry) close(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

func otlpTraceEndpoint(ep string) []otlptracehttp.Option {
	if strings.Contains(ep, "://") {
		return []otlptracehttp.Option{otlptracehttp.WithEndpointURL(ep)}
	}
	return []otlptracehttp.Option{otlptracehttp.WithEndpoint(ep), otlptracehttp.WithInsecure()}
}

func otlpMetricEndpoint(ep string) []otlpmetrichttp.Option {
	if strings.Contains(ep, "://") {
		return []otlpmetrichttp.Option{otlpmetrichttp.WithEndpointURL(ep)}
	}
	return []otlpmetrichttp.Option{otlpmetrichttp.WithEndpoint(ep), otlpmetrichttp.WithInsecure()}
}
