package core

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/lockcron/lockcron/internal/oteltest"
)

// TestTelemetryDropping: the providers that drop everything are known as
// such (the default, OpenTelemetry's global providers without an SDK, by
// the name of their type: this test fails if a release of otel renames
// it), and any other provider records.
func TestTelemetryDropping(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    dropping
		on   bool
	}{
		{"global tracer provider", tracesDropped(otel.GetTracerProvider()), false},
		{"global meter provider", metricsDropped(otel.GetMeterProvider()), false},
		{"noop tracer provider", tracesDropped(tracenoop.NewTracerProvider()), false},
		{"noop meter provider", metricsDropped(metricnoop.NewMeterProvider()), false},
		{"tracer provider", tracesDropped(oteltest.NewTracerProvider()), true},
		{"meter provider", metricsDropped(oteltest.NewMeterProvider()), true},
	} {
		if got := tc.d.on(); got != tc.on {
			t.Errorf("%s: on() = %v, want %v", tc.name, got, tc.on)
		}
	}
	if d := tracesDropped(otel.GetTracerProvider()); d.global == nil {
		t.Errorf("the global tracer provider (%T) is not known as the global one: every Lock would start a span that goes nowhere", otel.GetTracerProvider())
	}
	if d := metricsDropped(otel.GetMeterProvider()); d.global == nil {
		t.Errorf("the global meter provider (%T) is not known as the global one: every Lock would build attributes that go nowhere", otel.GetMeterProvider())
	}
}

// TestTelemetryNoAllocationsWithoutProvider: with the default providers and
// no SDK installed, the wait and hold spans and their metrics cost nothing
// on the hot path.
func TestTelemetryNoAllocationsWithoutProvider(t *testing.T) {
	o, err := buildOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	tel := newTelemetry(o, o.logger)
	ctx := context.Background()
	l := &Lease{k: newKeys("lockcron", "alloc"), owner: "o:1", token: 1}
	n := testing.AllocsPerRun(100, func() {
		w := tel.startWait(ctx, "alloc")
		tel.endWait(w, "alloc", time.Millisecond, l, nil)
		h := tel.startHold(ctx, l)
		tel.endHold(h, l, time.Millisecond, outcomeReleased)
		tel.renewed("alloc", "ok")
	})
	if n != 0 {
		t.Errorf("%v allocations per wait, hold and renewal without a provider, want 0", n)
	}
}

// envGlobalLater runs TestTelemetryGlobalInstalledLater's own part in a
// process of its own: a global provider, once installed, stays.
const envGlobalLater = "LOCKCRON_TEST_GLOBAL_OTEL_LATER"

// TestTelemetryGlobalInstalledLater: a Client made with the default
// providers before the program installs an SDK in OpenTelemetry's global
// providers records spans and metrics from then on, as it did before the
// hot path learnt to skip them.
func TestTelemetryGlobalInstalledLater(t *testing.T) {
	if os.Getenv(envGlobalLater) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTelemetryGlobalInstalledLater$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), envGlobalLater+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the test's own process: %v\n%s", err, out)
		}
		return
	}
	c, err := NewMemory(WithLeaseTime(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	lockUnlock := func(name string) {
		t.Helper()
		l, err := c.Mutex(name).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lockUnlock("before")

	tp, mp := oteltest.NewTracerProvider(), oteltest.NewMeterProvider()
	otel.SetTracerProvider(tp)
	otel.SetMeterProvider(mp)
	lockUnlock("after")

	spans := map[string]bool{}
	for _, s := range tp.Ended() {
		for _, a := range s.Attributes() {
			if a.Key == attrLock {
				spans[s.Name()+" "+a.Value.AsString()] = true
			}
		}
	}
	for _, want := range []string{"lock.wait after", "lock.hold after"} {
		if !spans[want] {
			t.Errorf("no span %q after the global provider was installed; spans: %v", want, spans)
		}
	}
	for _, name := range []string{metricWait, metricHold} {
		var n uint64
		for _, p := range mp.Collect(name) {
			if v, ok := p.Attributes.Value(attrLock); ok && v.AsString() == "after" {
				n += p.Count
			}
			if v, ok := p.Attributes.Value(attrLock); ok && v.AsString() == "before" {
				t.Errorf("%s recorded lock %q, taken before the provider was installed", name, "before")
			}
		}
		if n != 1 {
			t.Errorf("%s: %d recordings of lock %q, want 1", name, n, "after")
		}
	}
}
