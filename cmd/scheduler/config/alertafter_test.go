package config_test

import (
	"slices"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/scheduler"
)

// alert_after reaches the job; left out, the job has none.
func TestAlertAfter(t *testing.T) {
	cfg := mustLoad(t, `
job "report" {
  schedule    = "@every 1m"
  alert_after = "45s"
  func        = "cleanup"
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
		got[j.Name] = j.AlertAfter
	}
	if got["report"] != 45*time.Second || got["plain"] != 0 {
		t.Errorf("alert_after %v, want report 45s and plain none (0)", got)
	}
}

// An alert_after that is not a positive duration is refused, with an
// error that names the job and the setting, at its place.
func TestAlertAfterErrors(t *testing.T) {
	for _, tc := range []struct{ name, value, msg string }{
		{"negative", `"-1s"`, `"-1s" is negative`},
		{"not a duration", `"abc"`, `"abc" is not a duration`},
		{"zero", `"0s"`, `"0s" is zero`},
		{"zero without unit", `"0"`, `"0" is zero`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, places, err := load(t, "job \"nightly\" {\n  schedule = \"@every 1m\"\n  @@alert_after = "+tc.value+"\n  func = \"cleanup\"\n}\n")
			checkErrors(t, err, places, []want{{mark: 1, job: "nightly", field: "alert_after", msg: tc.msg}})
		})
	}
}

// A notify block that names no outcomes reports running_long; one may
// name it alone.
func TestNotifyRunningLong(t *testing.T) {
	if !slices.Contains(config.DefaultNotifyOn, string(scheduler.OutcomeRunningLong)) {
		t.Errorf("DefaultNotifyOn = %v, want running_long in it", config.DefaultNotifyOn)
	}
	cfg := mustLoad(t, `
notify "long" {
  url = "https://hooks.example.com/b"
  on  = ["running_long"]
}
`+job)
	if on := cfg.Notify[0].On; !slices.Equal(on, []string{"running_long"}) {
		t.Errorf("on = %v, want running_long", on)
	}
}
