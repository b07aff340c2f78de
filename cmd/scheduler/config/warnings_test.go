package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

func TestSecretInReadableFileWarns(t *testing.T) {
	srcs := map[string]string{
		"redis.password": "redis {\n  url = \"redis://h:6379\"\n  @@password = \"" + pw + "\"\n}\n" + job,
		"redis.url":      "redis {\n  @@url = \"redis://u:" + urlPW + "@h:6379\"\n}\n" + job,
		"admin.token":    "admin {\n  @@token = \"" + token + "\"\n}\n" + job,
	}
	for field, src := range srcs {
		for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o600, 0o400} {
			t.Run(field+"/"+mode.String(), func(t *testing.T) {
				path, places := writeConfig(t, src, mode)
				cfg, err := config.Load(path, config.WithEnviron(nil))
				if err != nil {
					t.Fatal(err)
				}
				readable := mode&0o044 != 0
				if !readable {
					if len(cfg.Warnings) != 0 {
						t.Errorf("mode %v: warnings %q", mode, cfg.Warnings)
					}
					return
				}
				if len(cfg.Warnings) != 1 {
					t.Fatalf("mode %v: warnings %q, want one", mode, cfg.Warnings)
				}
				w := cfg.Warnings[0]
				if !strings.HasPrefix(w, places[0]+": "+field+": ") || !strings.Contains(w, "other users can read") {
					t.Errorf("warning %q, want it at %s about %s", w, places[0], field)
				}
				notShown(t, "warning", w)
			})
		}
	}
}

func TestNoWarningForSecretsFromTheEnvironment(t *testing.T) {
	path, _ := writeConfig(t, "redis {\n  url = \"redis://h:6379\"\n  password_env = \"PW\"\n}\nadmin { token_env = \"TOK\" }\n"+job, 0o644)
	cfg, err := config.Load(path, config.WithEnviron([]string{"PW=" + pw, "TOK=" + token, "LOCKCRON_ADMIN__TOKEN_ENV=TOK"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings %q", cfg.Warnings)
	}
}

func TestWarnings(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"insecure tls", "redis {\n  url = \"redis://h:6379\"\n  tls {\n    @@insecure_skip_verify = true\n  }\n}\n" + job, "redis.tls.insecure_skip_verify: the server's certificate is not checked"},
		{"open admin", "admin {\n  @@listen = \"0.0.0.0:9090\"\n}\n" + job, "admin.listen: \"0.0.0.0:9090\" is reachable from other machines"},
		{"unused endpoint", "telemetry {\n  @@otlp_endpoint = \"collector:4317\"\n}\n" + job, "not used"},
		{"misfire_grace without run_once", "job \"j\" {\n  schedule = \"@every 1m\"\n  @@misfire_grace = \"5m\"\n  func = \"cleanup\"\n}", `job "j": misfire_grace: has no effect unless misfire = "run_once"`},
		{"misfire_grace longer than start_deadline", "job \"j\" {\n  schedule = \"@every 1m\"\n  misfire = \"run_once\"\n  @@misfire_grace = \"1h\"\n  start_deadline = \"10m\"\n  func = \"cleanup\"\n}", `job "j": misfire_grace: 1h0m0s is longer than start_deadline (10m0s)`},
		{"timeout longer than the period", "job \"j\" {\n  schedule = \"@every 1m\"\n  @@timeout = \"5m\"\n  func = \"cleanup\"\n}", `job "j": timeout: 5m0s is longer than the 1m0s between ticks`},
		{"CRON_TZ and time_zone", "job \"j\" {\n  schedule = \"CRON_TZ=Europe/Berlin 0 2 * * *\"\n  @@time_zone = \"UTC\"\n  func = \"cleanup\"\n}", "(CRON_TZ=), which wins over time_zone"},
		{"tls disabled with settings", "redis {\n  url = \"redis://h:6379\"\n  tls {\n    @@enabled = false\n    ca_file = \"/x\"\n  }\n}\n" + job, "the other tls settings are ignored"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, places, err := load(t, tt.src)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Warnings) != 1 {
				t.Fatalf("warnings %q, want one", cfg.Warnings)
			}
			if w := cfg.Warnings[0]; !strings.HasPrefix(w, places[0]+": ") || !strings.Contains(w, tt.want) {
				t.Errorf("warning %q, want %q at %s", w, tt.want, places[0])
			}
		})
	}
}
