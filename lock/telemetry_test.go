package lock_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/lockcron/lockcron/internal/oteltest"
	"github.com/lockcron/lockcron/lock"
)

func TestTelemetry(t *testing.T) {
	spans := oteltest.NewTracerProvider()
	tp := spans
	reader := oteltest.NewMeterProvider()
	mp := reader
	var logs bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Name: "app", Level: hclog.Debug, Output: &logs})
	c, err := lock.NewMemory(lock.WithTracerProvider(tp), lock.WithMeterProvider(mp),
		lock.WithLeaseTime(300*time.Millisecond), lock.WithClientID("replica-1"), lock.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	lease, err := c.Mutex("tel").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Let the watchdog renew at least once.
	deadline := time.Now().Add(5 * time.Second)
	for total(t, reader, "lockcron.lock.renewals") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no renewal counted")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Mutex("tel").TryLock(lease.Context()); err == nil {
		t.Fatal("TryLock on a released lease's context succeeded")
	}
	lost, err := c.Mutex("tel2").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ForceUnlock(ctx, "tel2"); err != nil {
		t.Fatal(err)
	}
	<-lost.Done()

	want := map[string]string{"lock.wait": "acquired", "lock.hold": "released"}
	found := map[string]bool{}
	for _, s := range spans.Ended() {
		attrs := map[attribute.Key]attribute.Value{}
		for _, a := range s.Attributes() {
			attrs[a.Key] = a.Value
		}
		if attrs["lockcron.lock"].AsString() != "tel" || want[s.Name()] == "" {
			continue
		}
		found[s.Name()] = true
		if got := attrs["lockcron.outcome"].AsString(); got != want[s.Name()] {
			t.Errorf("%s outcome %q, want %q", s.Name(), got, want[s.Name()])
		}
		if attrs["lockcron.owner"].AsString() != lease.Owner() || attrs["lockcron.token"].AsInt64() != lease.Token() {
			t.Errorf("%s owner/token %v/%v, want %s/%d", s.Name(), attrs["lockcron.owner"], attrs["lockcron.token"], lease.Owner(), lease.Token())
		}
		if attrs["lockcron.client"].AsString() != "replica-1" {
			t.Errorf("%s client %v", s.Name(), attrs["lockcron.client"])
		}
	}
	for name := range want {
		if !found[name] {
			t.Errorf("no %s span for lock tel", name)
		}
	}
	var lostHold bool
	for _, s := range spans.Ended() {
		for _, a := range s.Attributes() {
			if s.Name() == "lock.hold" && a.Key == "lockcron.outcome" && a.Value.AsString() == "lost" {
				lostHold = true
			}
		}
	}
	if !lostHold {
		t.Error("no lock.hold span with outcome lost")
	}

	for _, name := range []string{"lockcron.lock.wait.duration", "lockcron.lock.hold.duration"} {
		if total(t, reader, name) == 0 {
			t.Errorf("histogram %s recorded nothing", name)
		}
	}
	if n := total(t, reader, "lockcron.lock.lost"); n != 1 {
		t.Errorf("lockcron.lock.lost = %d, want 1", n)
	}
	for _, want := range []string{"app.lock: lock acquired", "app.lock: lock released", "app.lock: lock lost"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no %q in the logs:\n%s", want, logs.String())
		}
	}
}

// total is a metric's sum over its data points: the value of a counter,
// the number of recordings of a histogram.
func total(t *testing.T, mp *oteltest.MeterProvider, name string) int64 {
	t.Helper()
	var n int64
	for _, dp := range mp.Collect(name) {
		switch dp.Kind {
		case oteltest.Counter:
			if !dp.Int {
				t.Fatalf("metric %s is not an int64 counter", name)
			}
			n += int64(dp.Value)
		case oteltest.Histogram:
			n += int64(dp.Count)
		}
	}
	return n
}
