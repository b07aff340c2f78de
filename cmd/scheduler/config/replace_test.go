package config_test

import (
	"io"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/scheduler"
)

// overlap = "replace" is accepted, and reaches the scheduler's job; a bad
// overlap's error lists it (TestValidate, "unknown policy values").
func TestOverlapReplaceAccepted(t *testing.T) {
	cfg := mustLoad(t, `
job "stuck" {
  schedule = "@every 1m"
  overlap = "replace"
  timeout = "5m"
  exec {
    command = ["sh", "-c", "sleep 1000"]
    grace = "5s"
  }
}
`)
	js, err := cfg.SchedulerJobs(testRegistry(t), hclog.New(&hclog.LoggerOptions{Output: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 1 || js[0].Overlap != scheduler.OverlapReplace {
		t.Fatalf("jobs %+v, want one with overlap %q", js, scheduler.OverlapReplace)
	}
}
