package benchutil

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
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

// FormatUsecPerCall renders the server time per call of each command of
// calls, by name: "evalsha 12.3µs, get 1.0µs", usec being the µs of
// server time per command.
func FormatUsecPerCall(calls, usec map[string]int64) string {
	var s []string
	for _, k := range slices.Sorted(maps.Keys(calls)) {
		s = append(s, fmt.Sprintf("%s %.1fµs", k, float64(usec[k])/float64(calls[k])))
	}
	return strings.Join(s, ", ")
}

// Jain is Jain's fairness index (Σx)²/(n·Σx²) of the shares xs: 1 when
// every one got the same, 1/n when one got everything; 0 when all are 0.
func Jain(xs []int64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 0
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// ErrorCounts counts failed attempts (the lock not acquired within the
// wait or retry budget) and any other errors, keeping the first message of
// each. Add is safe for concurrent use; read the fields once the
// goroutines that add are done.
type ErrorCounts struct {
	mu                  sync.Mutex
	Fails, Errs         int64
	FirstFail, FirstErr string
}

// Add counts err: as a failed attempt if fail, else as an error.
func (e *ErrorCounts) Add(fail bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if fail {
		e.Fails++
		if e.FirstFail == "" {
			e.FirstFail = err.Error()
		}
		return
	}
	e.Errs++
	if e.FirstErr == "" {
		e.FirstErr = err.Error()
	}
}
