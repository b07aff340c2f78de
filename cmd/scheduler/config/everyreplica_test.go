package config_test

import (
	"testing"

	"github.com/lockcron/lockcron/scheduler"
)

// TestReplicasAll: replicas = "all" reaches the job; a bad value, and
// the settings that need a fleet-wide lock or count, are refused at their
// places.
func TestReplicasAll(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, `
job "cache" {
  schedule = "@every 1m"
  replicas = "all"
  exec { command = ["true"] }
}
job "report" {
  schedule = "@every 1m"
  exec { command = ["true"] }
}
`)
	if j := cfg.Jobs[0]; j.Replicas != scheduler.ReplicasAll || j.OnShutdown != scheduler.ShutdownAbandon {
		t.Errorf("cache: replicas %q, on_shutdown %q; want all, abandon", j.Replicas, j.OnShutdown)
	}
	if j := cfg.Jobs[1]; j.Replicas != scheduler.ReplicasOne {
		t.Errorf("report: replicas %q, want one", j.Replicas)
	}
	_, places, err := load(t, `
job "cache" {
  schedule = "@every 1m"
  @@replicas = "some"
  exec { command = ["true"] }
}
job "warm" {
  schedule = "@every 1m"
  replicas = "all"
  @@max_concurrency = 2
  @@pause_after_failures = 3
  @@on_shutdown = "handoff"
  exec { command = ["true"] }
}
`)
	checkErrors(t, err, places, []want{
		{mark: 1, job: "cache", field: "replicas", msg: `"some" is not one of "one", "all"`},
		{mark: 2, job: "warm", field: "max_concurrency", msg: `with replicas "all"`},
		{mark: 3, job: "warm", field: "pause_after_failures", msg: `with replicas "all"`},
		{mark: 4, job: "warm", field: "on_shutdown", msg: `with replicas "all"`},
	})
}
