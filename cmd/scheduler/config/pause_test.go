package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/scheduler"
)

// pause_after_failures: absent or 0 is off, N pauses after N failed runs
// in a row; a negative or non-number value is refused with its place.
// auto_paused may be named in a notify block and is in its default on.
func TestPauseAfterFailures(t *testing.T) {
	t.Parallel()
	flaky := func(extra string) string {
		return `
job "flaky" {
  schedule = "@every 1m"
  ` + extra + `
  exec {
    command = ["true"]
  }
}
`
	}
	for _, c := range []struct {
		extra string
		want  int
	}{{"", 0}, {"pause_after_failures = 0", 0}, {"pause_after_failures = 3", 3}} {
		cfg := mustLoad(t, flaky(c.extra))
		if n := cfg.Jobs[0].PauseAfterFailures; n != c.want {
			t.Errorf("%q: PauseAfterFailures %d, want %d", c.extra, n, c.want)
		}
	}
	for _, c := range []struct{ extra, want string }{
		{"pause_after_failures = -1", "pause_after_failures: -1 is negative"},
		{`pause_after_failures = "three"`, "pause_after_failures"},
		{"pause_after_failures = 1.5", "pause_after_failures"},
	} {
		_, _, err := load(t, flaky(c.extra))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.extra, err, c.want)
		}
	}
	if !slices.Contains(mustLoad(t, `
notify "ops" {
  url = "https://hooks.example.com/a"
  on  = ["auto_paused"]
}
`+flaky("pause_after_failures = 2")).Notify[0].On, string(scheduler.OutcomeAutoPaused)) {
		t.Errorf("a notify block may not name auto_paused")
	}
}
