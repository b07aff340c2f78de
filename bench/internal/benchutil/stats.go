package benchutil

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Durations is a sample of latencies.
type Durations []time.Duration

// Pct returns the p-th percentile (0 < p ≤ 100) by nearest rank, or 0 for
// an empty sample; ds must be sorted.
func (ds Durations) Pct(p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	i := int(float64(len(ds))*p/100+0.999999) - 1
	i = max(0, min(i, len(ds)-1))
	return ds[i]
}

// Max returns the largest duration of the sample, or 0 if it is empty.
func (ds Durations) Max() time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

// Mean returns the arithmetic mean of the sample, or 0 if it is empty.
func (ds Durations) Mean() time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum / time.Duration(len(ds))
}

// StatsDelta is after − before, per key (per command name of INFO
// commandstats), without zero entries.
func StatsDelta(before, after map[string]int64) map[string]int64 {
	d := map[string]int64{}
	for k, v := range after {
		if v -= before[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}

// Sum is the sum of the values of m.
func Sum(m map[string]int64) int64 {
	var s int64
	for _, v := range m {
		s += v
	}
	return s
}

// FormatCounts renders a per-command count map as "name=count ...",
// largest first (ties by name). When per > 0 each count is followed by
// count/per, to prec decimals, in parentheses: "evalsha=300(1.50)".
func FormatCounts(m map[string]int64, per float64, prec int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return int(m[b] - m[a])
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" ")
		}
		if per > 0 {
			fmt.Fprintf(&b, "%s=%d(%.*f)", k, m[k], prec, float64(m[k])/per)
		} else {
			fmt.Fprintf(&b, "%s=%d", k, m[k])
		}
	}
	return b.String()
}
