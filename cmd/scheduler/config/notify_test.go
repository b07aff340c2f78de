package config_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/jobs/execjob"
)

func TestNotifyBlocks(t *testing.T) {
	const hook = "https://hooks.example.com/services/T0/B0/s3cr3t-hook"
	cfg := mustLoad(t, `
notify "ops" {
  url_env = "OPS_HOOK"
}
notify "chat" {
  url     = "`+hook+`"
  format  = "slack"
  on      = ["failed", "ran"]
  jobs    = ["x"]
  timeout = "2s"
  retries = 0
}
`+job, "OPS_HOOK=http://127.0.0.1:8080/hook")
	if len(cfg.Notify) != 2 {
		t.Fatalf("%d notify blocks, want 2", len(cfg.Notify))
	}
	ops, chat := cfg.Notify[0], cfg.Notify[1]
	if ops.Name != "ops" || ops.URL.Value() != "http://127.0.0.1:8080/hook" || ops.URLEnv != "OPS_HOOK" || ops.Format != config.NotifyJSON ||
		!slices.Equal(ops.On, config.DefaultNotifyOn) || ops.Jobs != nil || ops.Timeout != config.DefaultNotifyTimeout || ops.Retries != config.DefaultNotifyRetries {
		t.Errorf("ops: %+v", ops)
	}
	if chat.Name != "chat" || chat.URL.Value() != hook || chat.Format != config.NotifySlack || !slices.Equal(chat.On, []string{"failed", "ran"}) ||
		!slices.Equal(chat.Jobs, []string{"x"}) || chat.Timeout != 2*time.Second || chat.Retries != 0 {
		t.Errorf("chat: %+v", chat)
	}
	// The URL is a secret: not printed, redacted, and url_env's variable
	// is not given to exec jobs.
	for _, f := range []string{"%v", "%+v", "%#v"} {
		if s := fmt.Sprintf(f, cfg); strings.Contains(s, "s3cr3t-hook") {
			t.Errorf("%s of Config shows the webhook URL", f)
		}
	}
	if got := cfg.Redact("POST " + hook + ": 500"); strings.Contains(got, "s3cr3t") {
		t.Errorf("Redact = %q", got)
	}
	if d := chat.Describe(); strings.Contains(d, "s3cr3t") || !strings.Contains(d, "hooks.example.com") {
		t.Errorf("Describe = %q", d)
	}
	js, err := cfg.SchedulerJobs(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ex := js[0].Run.(*execjob.Exec); !slices.Contains(ex.Unset, "OPS_HOOK") {
		t.Errorf("exec jobs inherit OPS_HOOK: Unset = %v", ex.Unset)
	}
}

func TestNotifyErrors(t *testing.T) {
	_, places, err := load(t, `notify "both" {
  url = "https://a.example/x"
  @@url_env = "A"
}
@@notify "none" {
  format = "json"
}
notify "scheme" {
  @@url = "ftp://files.example/hook-s3cr3t"
}
notify "bad" {
  url = "https://a.example/x"
  @@format = "xml"
  @@on = ["failed", "exploded"]
  @@jobs = ["x", "nope"]
  @@retries = 11
}
notify "unset" {
  @@url_env = "LOCKCRON_TEST_UNSET_HOOK"
}
@@notify "bad" {
  url = "https://a.example/y"
}
`+job, "A=https://a.example/y")
	checkErrors(t, err, places, []want{
		{mark: 1, field: "notify.both.url_env", msg: "both set"},
		{mark: 2, field: "notify.none.url", msg: "missing: give the webhook's URL"},
		{mark: 3, field: "notify.scheme.url", msg: `scheme "ftp"`},
		{mark: 4, field: "notify.bad.format", msg: `"xml"`},
		{mark: 5, field: "notify.bad.on", msg: `"exploded" is not an outcome`},
		{mark: 6, field: "notify.bad.jobs", msg: `"nope" is not a job of this file`},
		{mark: 7, field: "notify.bad.retries", msg: "give 0 to 10"},
		{mark: 8, field: "notify.unset.url_env", msg: "is not set"},
		{mark: 9, field: "notify.bad", msg: "is at line 11 already"},
	})
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("an error shows the URL: %v", err)
	}
}

// A skipped tick's outcome is refused in on with why: a webhook per tick
// (the history coalesces skips; notify would not).
func TestNotifyRefusesSkippedTicks(t *testing.T) {
	for _, out := range []string{"skipped_busy", "paused", "excluded"} {
		_, places, err := load(t, `notify "skips" {
  url = "https://a.example/x"
  @@on = ["failed", "`+out+`"]
}
`+job)
		checkErrors(t, err, places, []want{
			{mark: 1, field: "notify.skips.on", msg: `"` + out + `" is a skipped tick's outcome, which notify does not send`},
		})
	}
}
