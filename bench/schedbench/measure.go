package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

// inScripts are the commands our Lua scripts run (internal/core/scripts/*.lua).
// INFO commandstats counts those calls too, under their own names (and
// their time again inside the EVALSHA's usec). Some of these names are also
// sent by clients: the lock package pipelines HGETALL and EXISTS to read a
// ledger, HSET, HDEL and PEXPIRE to pause one, PUBLISH for the scheduler's
// control messages. splitCommands tells them apart with the counts of the
// replicas' go-redis hooks.
var inScripts = map[string]bool{
	"del": true, "exists": true, "get": true, "hdel": true, "hexists": true, "hget": true, "hgetall": true, "hincrby": true, "hkeys": true,
	"hmget": true, "incr": true, "hset": true, "hsetnx": true, "lindex": true, "lpop": true, "lrange": true, "lrem": true, "pexpire": true,
	"pttl": true, "publish": true, "rpush": true, "set": true, "time": true, "type": true, "xadd": true,
	"xdel": true, "xrevrange": true, "xtrim": true, "zadd": true, "zcard": true, "zcount": true, "zrange": true, "zrangebyscore": true, "zrem": true,
	"zremrangebyrank": true, "zremrangebyscore": true, "zscore": true,
}

// snapshot is what the benchmark reads at each edge of the measured window.
type snapshot struct {
	// INFO commandstats and cpu (none on the in-memory backend); ProcCPU is
	// the CPU time of this process and every replica process (a killed one:
	// as read just before the kill), not the hog's; Machine that of all CPUs.
	benchutil.Snapshot
	at      time.Time
	load    string
	metrics []replicaMetrics // per replica, cumulative; Outcomes nil: not read (killed)
	// nodes is each server's commandstats calls (each primary's, on a
	// Cluster, in the order of the row's primaries).
	nodes []map[string]int64
}

// takeSnapshot reads the replicas' metrics, the servers' counters on ctls
// (none: no Redis; several: a Cluster's primaries, whose counters and CPU
// are summed) and the processes' CPU time. Reading a replica's metrics
// runs its gauges' callbacks, which read every job's ledger (two commands a
// job): a cost of each metrics scrape, not of the ticks. So that the
// window's counts leave them out, the server's counters are read after the
// replicas' answers at the window's start (serverFirst false) and before
// the questions at its end (serverFirst true). The one INFO call of a
// snapshot that falls inside a before/after pair is left out of the counts
// by dropping "info" altogether.
func takeSnapshot(ctx context.Context, ctls []*redis.Client, replicas []*proc, serverFirst bool) (snapshot, error) {
	s := snapshot{at: time.Now(), load: benchutil.Loadavg()}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	server := func() error {
		if len(ctls) == 0 {
			s.Snapshot = benchutil.Snapshot{ProcCPU: benchutil.ProcessCPU(), Machine: benchutil.MachineCPU()}
			return nil
		}
		for i, ctl := range ctls {
			n, err := benchutil.TakeSnapshot(ctx, ctl)
			if err != nil {
				return err
			}
			s.nodes = append(s.nodes, n.Calls)
			if i == 0 {
				s.Snapshot = n
				// The sums must not write into the first node's counts.
				s.Calls, s.Usec = maps.Clone(n.Calls), maps.Clone(n.Usec)
				continue
			}
			s.add(n.InfoStats)
		}
		return nil
	}
	if serverFirst {
		if err := server(); err != nil {
			return s, err
		}
	}
	for _, p := range replicas {
		if !p.killed() {
			if err := p.send("metrics"); err != nil {
				return s, err
			}
		}
	}
	for _, p := range replicas {
		var m replicaMetrics
		if !p.killed() {
			var err error
			if m, err = p.metrics(ctx); err != nil {
				return s, err
			}
		}
		s.metrics = append(s.metrics, m)
	}
	if !serverFirst {
		if err := server(); err != nil {
			return s, err
		}
	}
	for _, p := range replicas {
		s.ProcCPU += p.cpu()
	}
	return s, nil
}

// add adds another server's counters and CPU to s.
func (s *snapshot) add(o benchutil.InfoStats) {
	for k, v := range o.Calls {
		s.Calls[k] += v
	}
	for k, v := range o.Usec {
		s.Usec[k] += v
	}
	s.RedisCPU += o.RedisCPU
	s.MainCPU += o.MainCPU
	s.HasMain = s.HasMain && o.HasMain
}

// splitCommands splits a commandstats delta into the commands clients sent
// and those Lua scripts ran; the benchmark's own INFO calls are dropped,
// and so is REPLCONF, which a Cluster's replicas send their primary. A
// name no script runs is the clients'; of a name scripts run, the clients
// sent as many as the replicas' hooks counted (sent, at most the server's
// count), and the rest ran inside scripts. both lists the names that
// clients and scripts both ran in the window.
func splitCommands(delta, sent map[string]int64) (client, lua map[string]int64, both []string) {
	client, lua = map[string]int64{}, map[string]int64{}
	for k, v := range delta {
		switch {
		case k == "info", k == "replconf":
		case inScripts[k]:
			c := min(v, sent[k])
			if c > 0 {
				client[k] = c
			}
			if v > c {
				lua[k] = v - c
			}
			if c > 0 && v > c {
				both = append(both, k)
			}
		default:
			client[k] = v
		}
	}
	slices.Sort(both)
	return client, lua, both
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
	Counts []uint64
	Sum    float64
	N      uint64
}

func (h hist) minus(o hist) hist {
	d := hist{Counts: make([]uint64, len(h.Counts)), Sum: h.Sum - o.Sum, N: h.N - o.N}
	for i := range h.Counts {
		d.Counts[i] = h.Counts[i]
		if i < len(o.Counts) {
			d.Counts[i] -= o.Counts[i]
		}
	}
	return d
}

func (h hist) add(o hist) hist {
	if h.Counts == nil {
		h.Counts = make([]uint64, len(o.Counts))
	}
	for i := range o.Counts {
		h.Counts[i] += o.Counts[i]
	}
	h.Sum += o.Sum
	h.N += o.N
	return h
}

func (h hist) mean() time.Duration {
	if h.N == 0 {
		return 0
	}
	return time.Duration(h.Sum / float64(h.N) * float64(time.Second))
}

// bound returns the upper bound of the bucket that holds the p-th
// percentile (a histogram knows no more), or -1 past the last bound.
func (h hist) bound(p float64) time.Duration {
	if h.N == 0 {
		return 0
	}
	rank := uint64(float64(h.N)*p/100 + 0.999999)
	var seen uint64
	for i, c := range h.Counts {
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
	for i, c := range h.Counts {
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
	Outcomes map[string]int64 // lockcron.job.runs by outcome
	Wait     map[string]hist  // lockcron.job.wait.duration by outcome
	Sent     map[string]int64 // commands its go-redis client sent, by name (sentCounter)
}

func collect(ctx context.Context, r *sdkmetric.ManualReader) (replicaMetrics, error) {
	m := replicaMetrics{Outcomes: map[string]int64{}, Wait: map[string]hist{}}
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
						m.Outcomes[o.AsString()] += p.Value
					}
				}
			case metricWait:
				if d, ok := met.Data.(metricdata.Histogram[float64]); ok {
					for _, p := range d.DataPoints {
						o, _ := p.Attributes.Value("lockcron.outcome")
						m.Wait[o.AsString()] = hist{Counts: slices.Clone(p.BucketCounts), Sum: p.Sum, N: p.Count}
					}
				}
			}
		}
	}
	return m, nil
}

// minus is m − o: what happened between two snapshots.
func (m replicaMetrics) minus(o replicaMetrics) replicaMetrics {
	d := replicaMetrics{Outcomes: benchutil.StatsDelta(o.Outcomes, m.Outcomes), Wait: map[string]hist{}, Sent: benchutil.StatsDelta(o.Sent, m.Sent)}
	for k, h := range m.Wait {
		d.Wait[k] = h.minus(o.Wait[k])
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
