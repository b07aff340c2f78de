package testkit_test

import (
	"testing"

	"github.com/lockcron/lockcron/internal/testkit"
)

func TestMetric(t *testing.T) {
	const text = `# HELP go_goroutines Number of goroutines.
go_goroutines 12
go_goroutines_max 99
lockcron_job_runs_total{lockcron_job="quick",lockcron_outcome="ran"} 3
lockcron_job_runs_total{lockcron_job="quick",lockcron_outcome="failed"} 1
lockcron_job_runs_total{lockcron_job="quicker",lockcron_outcome="ran"} 5
lockcron_job_run_duration_seconds_count{lockcron_job="quick",lockcron_outcome="ran"} 3
`
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
		found  bool
	}{
		{"go_goroutines", nil, 12, true},
		{"lockcron_job_runs_total", nil, 9, true},
		{"lockcron_job_runs_total", []string{`lockcron_job="quick"`}, 4, true},
		{"lockcron_job_runs_total", []string{`lockcron_job="quick"`, `lockcron_outcome="ran"`}, 3, true},
		{"lockcron_job_runs_total", []string{`lockcron_outcome="lost_lock"`}, 0, false},
		{"lockcron_job_run", nil, 0, false}, // a prefix of other names
	} {
		if got, found := testkit.Metric(text, tc.name, tc.labels...); got != tc.want || found != tc.found {
			t.Errorf("Metric(%s, %q) = %v, %v; want %v, %v", tc.name, tc.labels, got, found, tc.want, tc.found)
		}
	}
}
