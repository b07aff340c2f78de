package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

// inScripts are the commands our Lua scripts run (as in lock/redis_test.go).
// INFO commandstats counts those calls too, but no client sends them: the
// scheduler and the lock package talk to Redis only through EVALSHA (EVAL
// on NOSCRIPT), HGETALL (a ledger's state, at start) and the Pub/Sub
// commands.
var inScripts = map[string]bool{
	"pttl": true, "get": true, "time": true, "set": true, "hset": true, "pexpire": true,
	"type": true, "hget": true, "hmget": true, "hexists": true, "del": true, "publish": true,
}

// snapshot is what the benchmark reads at each edge of the measured window.
type snapshot struct {
	benchutil.Snapshot // INFO commandstats and cpu, this process's and the machine's CPU time
	at                 time.Time
	load               string
	metrics            []replicaMetrics // per replica, cumulative
}

// takeSnapshot reads the server's counters and this process's CPU time.
// INFO is read on ctl; the one INFO call of a snapshot that falls inside a
// before/after pair is left out of the counts by dropping "info" altogether.
func takeSnapshot(ctx context.Context, ctl *redis.Client, readers []*sdkmetric.ManualReader) (snapshot, error) {
	s := snapshot{at: time.Now(), load: benchutil.Loadavg()}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var err error
	if s.Snapshot, err = benchutil.TakeSnapshot(ctx, ctl); err != nil {
		return s, err
	}
	for _, r := range readers {
		m, err := collect(ctx, r)
		if err != nil {
			return s, err
		}
		s.metrics = append(s.metrics, m)
	}
	return s, nil
}

// splitCommands splits a commandstats delta into the commands clients sent
// and those Lua scripts ran; the benchmark's own INFO calls are dropped.
func splitCommands(delta map[string]int64) (client, lua map[string]int64) {
	client, lua = map[string]int64{}, map[string]int64{}
	for k, v := range delta {
		switch {
		case k == "info":
		case inScripts[k]:
			lua[k] = v
		default:
			client[k] = v
		}
	}
	return client, lua
}

// Metrics. Each replica gets its own MeterProvider with a ManualReader, so
// that the scheduler's own counts can be read per replica. A view keeps
// only the "lockcron.outcome" attribute (the benchmark does not need 1,000 series
// per instrument, one per job, and neither should their cost be measured)
// and gives the duration histograms buckets fine enough for a 1 s
// schedule.

const (
	metricRuns = "lockcron.job.runs"          // counter, by outcome
	metricWait = "lockcron.job.wait.duration" // fire → claim result, by outcome
)

// waitBuckets are the histogram bounds in seconds.
var waitBuckets = []float64{0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 0.9, 1.1, 2, 5, 10, 30}

func newMeterProvider() (*sdkmetric.MeterProvider, *sdkmetric.ManualReader) {
	reader := sdkmetric.NewManualReader()
	view := func(inst sdkmetric.Instrument) (sdkmetric.Stream, bool) {
		s := sdkmetric.Stream{
			Name: inst.Name, Description: inst.Description, Unit: inst.Unit,
			AttributeFilter: attribute.NewAllowKeysFilter("lockcron.outcome"),
		}
		if inst.Kind == sdkmetric.InstrumentKindHistogram {
			s.Aggregation = sdkmetric.AggregationExplicitBucketHistogram{Boundaries: waitBuckets}
		}
		return s, true
	}
	return sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithView(view)), reader
}

// hist is one histogram data point: bucket counts over waitBuckets (one
// more for +Inf), their sum in seconds and their count.
type hist struct {
	counts []uint64
	sum    float64
	n      uint64
}

func (h hist) minus(o hist) hist {
	d := hist{counts: make([]uint64, len(h.counts)), sum: h.sum - o.sum, n: h.n - o.n}
	for i := range h.counts {
		d.counts[i] = h.counts[i]
		if i < len(o.counts) {
			d.counts[i] -= o.counts[i]
		}
	}
	return d
}

func (h hist) add(o hist) hist {
	if h.counts == nil {
		h.counts = make([]uint64, len(o.counts))
	}
	for i := range o.counts {
		h.counts[i] += o.counts[i]
	}
	h.sum += o.sum
	h.n += o.n
	return h
}

func (h hist) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / float64(h.n) * float64(time.Second))
}

// bound returns the upper bound of the bucket that holds the p-th
// percentile (a histogram knows no more), or -1 past the last bound.
func (h hist) bound(p float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(float64(h.n)*p/100 + 0.999999)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			if i < len(waitBuckets) {
				return time.Duration(waitBuckets[i] * float64(time.Second))
			}
			return -1
		}
	}
	return -1
}

// String renders the bucket counts: "≤1ms:3 ≤2ms:10 ... >30s:0", without
// empty buckets.
func (h hist) String() string {
	var b strings.Builder
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		if i < len(waitBuckets) {
			fmt.Fprintf(&b, "≤%s:%d", fmtDur(time.Duration(waitBuckets[i]*float64(time.Second))), c)
		} else {
			fmt.Fprintf(&b, ">%s:%d", fmtDur(time.Duration(waitBuckets[i-1]*float64(time.Second))), c)
		}
	}
	return b.String()
}

// replicaMetrics is what one replica's scheduler counted, cumulative.
type replicaMetrics struct {
	outcomes map[string]int64 // lockcron.job.runs by outcome
	wait     map[string]hist  // lockcron.job.wait.duration by outcome
}

func collect(ctx context.Context, r *sdkmetric.ManualReader) (replicaMetrics, error) {
	m := replicaMetrics{outcomes: map[string]int64{}, wait: map[string]hist{}}
	var rm metricdata.ResourceMetrics
	if err := r.Collect(ctx, &rm); err != nil {
		return m, fmt.Errorf("metrics: %w", err)
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != "github.com/lockcron/lockcron/scheduler" {
			continue
		}
		for _, met := range sm.Metrics {
			switch met.Name {
			case metricRuns:
				if d, ok := met.Data.(metricdata.Sum[int64]); ok {
					for _, p := range d.DataPoints {
						o, _ := p.Attributes.Value("lockcron.outcome")
						m.outcomes[o.AsString()] += p.Value
					}
				}
			case metricWait:
				if d, ok := met.Data.(metricdata.Histogram[float64]); ok {
					for _, p := range d.DataPoints {
						o, _ := p.Attributes.Value("lockcron.outcome")
						m.wait[o.AsString()] = hist{counts: slices.Clone(p.BucketCounts), sum: p.Sum, n: p.Count}
					}
				}
			}
		}
	}
	return m, nil
}

// minus is m − o: what happened between two snapshots.
func (m replicaMetrics) minus(o replicaMetrics) replicaMetrics {
	d := replicaMetrics{outcomes: benchutil.StatsDelta(o.outcomes, m.outcomes), wait: map[string]hist{}}
	for k, h := range m.wait {
		d.wait[k] = h.minus(o.wait[k])
	}
	return d
}

// fmtDur is benchutil.FmtDur, except that schedbench prints a zero
// duration (an empty sample's percentile, say) as "0", not "-".
func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return benchutil.FmtDur(d)
}
