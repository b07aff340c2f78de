package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// The history block and a job's history_keep and history_max_age reach
// the Config and the scheduler's jobs.
func TestHistoryRetention(t *testing.T) {
	cfg := mustLoad(t, `
history {
  keep    = 500
  max_age = "168h"
}
job "a" {
  schedule = "@every 1m"
  history_keep = 20
  history_max_age = "24h"
  exec { command = ["true"] }
}
job "b" {
  schedule = "@every 1m"
  exec { command = ["true"] }
}
`)
	if cfg.History.Keep != 500 || cfg.History.MaxAge != 168*time.Hour {
		t.Errorf("History = %+v, want 500 and 168h", cfg.History)
	}
	js, err := cfg.SchedulerJobs(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if js[0].HistoryKeep != 20 || js[0].HistoryMaxAge != 24*time.Hour {
		t.Errorf("job a: keep %d, max age %v; want 20 and 24h", js[0].HistoryKeep, js[0].HistoryMaxAge)
	}
	if js[1].HistoryKeep != 0 || js[1].HistoryMaxAge != 0 {
		t.Errorf("job b: keep %d, max age %v; want the scheduler's (0)", js[1].HistoryKeep, js[1].HistoryMaxAge)
	}

	// Left out: zero, which is the scheduler's default.
	if d := mustLoad(t, job); d.History != (config.History{}) {
		t.Errorf("without a history block: %+v", d.History)
	}
}

func TestHistoryRetentionErrors(t *testing.T) {
	_, places, err := load(t, `history {
  @@keep = 0
  @@max_age = "500ms"
}
job "x" {
  schedule = "@every 1m"
  @@history_keep = -3
  @@history_max_age = "forever"
  exec { command = ["true"] }
}
`)
	checkErrors(t, err, places, []want{
		{mark: 1, field: "history.keep", msg: "keeps at least 1 run"},
		{mark: 2, field: "history.max_age", msg: "at least 1s"},
		{mark: 3, job: "x", field: "history_keep", msg: "keeps at least 1 run"},
		{mark: 4, job: "x", field: "history_max_age", msg: "forever"},
	})
}

// Redact removes every secret of the config: the Redis URL and its
// password, the password, the admin token read from the environment.
func TestRedact(t *testing.T) {
	const urlPW, pw, tok = "url-pass-1234", "redis-pass-5678", "admin-token-90ab"
	cfg := mustLoad(t, `
redis {
  url = "redis://app:`+urlPW+`@127.0.0.1:6379/0"
  password_env = "RPW"
}
admin { token_env = "TOK" }
`+job, "RPW="+pw, "TOK="+tok)
	in := "dial redis://app:" + urlPW + "@127.0.0.1:6379/0 failed; AUTH " + pw + "; Bearer " + tok + "; and " + urlPW + " alone"
	got := cfg.Redact(in)
	for _, s := range []string{urlPW, pw, tok} {
		if strings.Contains(got, s) {
			t.Errorf("Redact left %q in %q", s, got)
		}
	}
	if !strings.Contains(got, "[redacted]") || !strings.Contains(got, "AUTH [redacted]") {
		t.Errorf("Redact = %q", got)
	}
	if s := "nothing secret here"; cfg.Redact(s) != s {
		t.Errorf("Redact changed %q", s)
	}
}

// A command that only reads does not need the variables of admin.token_env
// and a notify block's url_env:
// ForReading makes it a warning; run still refuses it.
func TestForReadingDoesNotNeedTheToken(t *testing.T) {
	src := `admin {
  @@token_env = "LOCKCRON_TEST_UNSET_TOKEN"
}
notify "ops" {
  @@url_env = "LOCKCRON_TEST_UNSET_HOOK"
}
` + job
	_, places, err := load(t, src)
	checkErrors(t, err, places, []want{
		{mark: 1, field: "admin.token_env", msg: "is not set"},
		{mark: 2, field: "notify.ops.url_env", msg: "is not set"},
	})

	path, _ := writeConfig(t, src, 0o600)
	cfg, err := config.Load(path, config.WithEnviron(nil), config.WithRegistry(testRegistry(t)), config.ForReading())
	if err != nil {
		t.Fatalf("Load with ForReading: %v", err)
	}
	if cfg.Admin.Token.IsSet() {
		t.Errorf("the token is set")
	}
	if w := strings.Join(cfg.Warnings, "\n"); !strings.Contains(w, "LOCKCRON_TEST_UNSET_TOKEN") || !strings.Contains(w, "LOCKCRON_TEST_UNSET_HOOK") || !strings.Contains(w, "run does") {
		t.Errorf("warnings %q do not say that run needs the variable", w)
	}
}
