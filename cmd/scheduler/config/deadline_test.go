package config_test

import (
	"slices"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/scheduler"
)

// start_deadline reaches the job; left out, the job has none.
func TestStartDeadline(t *testing.T) {
	cfg := mustLoad(t, `
job "report" {
  schedule       = "@every 1m"
  start_deadline = "90s"
  func           = "cleanup"
}
job "plain" {
  schedule = "@every 1m"
  func     = "cleanup"
}
`)
	js, err := cfg.SchedulerJobs(testRegistry(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Duration{}
	for _, j := range js {
		got[j.Name] = j.StartDeadline
	}
	if got["report"] != 90*time.Second || got["plain"] != 0 {
		t.Errorf("start deadlines %v, want report 1m30s and plain none (0)", got)
	}
}

// A start_deadline that is not a positive duration is refused, with an
// error that names the job and the setting, at its place.
func TestStartDeadlineErrors(t *testing.T) {
	for _, tc := range []struct{ name, value, msg string }{
		{"negative", `"-1s"`, `"-1s" is negative`},
		{"not a duration", `"abc"`, `"abc" is not a duration`},
		{"zero", `"0s"`, `"0s" is zero`},
		{"zero without unit", `"0"`, `"0" is zero`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, places, err := load(t, "job \"nightly\" {\n  schedule = \"@every 1m\"\n  @@start_deadline = "+tc.value+"\n  func = \"cleanup\"\n}\n")
			checkErrors(t, err, places, []want{{mark: 1, job: "nightly", field: "start_deadline", msg: tc.msg}})
		})
	}
}

// A notify block that names no outcomes reports deadline_missed with the
// other outcomes an operator must look at; one may name it.
func TestNotifyDeadlineMissed(t *testing.T) {
	if !slices.Contains(config.DefaultNotifyOn, string(scheduler.OutcomeDeadlineMissed)) {
		t.Errorf("DefaultNotifyOn = %v, want deadline_missed in it", config.DefaultNotifyOn)
	}
	cfg := mustLoad(t, `
notify "default" {
  url = "https://hooks.example.com/a"
}
notify "late" {
  url = "https://hooks.example.com/b"
  on  = ["deadline_missed"]
}
`+job)
	if on := cfg.Notify[0].On; !slices.Equal(on, []string{"failed", "lost_lock", "missed", "deadline_missed", "running_long", "auto_paused"}) {
		t.Errorf("default on = %v, want failed, lost_lock, missed, deadline_missed, running_long, auto_paused", on)
	}
	if on := cfg.Notify[1].On; !slices.Equal(on, []string{"deadline_missed"}) {
		t.Errorf("on = %v, want deadline_missed", on)
	}
}
