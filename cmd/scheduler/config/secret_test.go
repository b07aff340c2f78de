package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

const (
	pw    = "hunter2-pw-8f3a"
	token = "tok-5d1e-admin"
	urlPW = "url-pw-77c2"
)

func TestSecretPrintsRedacted(t *testing.T) {
	s := config.NewSecret(pw)
	if s.Value() != pw || !s.IsSet() {
		t.Fatalf("Value() = %q", s.Value())
	}
	type holder struct {
		S config.Secret
		p config.Secret // unexported: fmt cannot call its methods
	}
	h := holder{S: s, p: s}
	for _, f := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s"} {
		for _, v := range []any{s, &s, h, &h} {
			if out := fmt.Sprintf(f, v); strings.Contains(out, pw) || strings.Contains(out, fmt.Sprintf("%x", pw)) {
				t.Errorf("Sprintf(%q, %T) = %q shows the secret", f, v, out)
			}
		}
	}
	if got := fmt.Sprint(s); got != "[redacted]" {
		t.Errorf("Sprint = %q", got)
	}
	j, err := json.Marshal(h)
	if err != nil || strings.Contains(string(j), pw) {
		t.Errorf("json = %s, %v", j, err)
	}
	txt, _ := s.MarshalText()
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "password", s)
	if strings.Contains(string(txt), pw) || strings.Contains(buf.String(), pw) {
		t.Errorf("text %q, slog %q show the secret", txt, buf.String())
	}
	if (config.Secret{}).String() != "" || config.NewSecret("").IsSet() {
		t.Errorf("the empty Secret is not empty")
	}
}

// notShown fails the test if out holds one of the secrets.
func notShown(t *testing.T, what, out string) {
	t.Helper()
	for _, s := range []string{pw, token, urlPW} {
		if strings.Contains(out, s) {
			t.Errorf("%s shows the secret %q:\n%s", what, s, out)
		}
	}
}

func TestConfigNeverPrintsSecrets(t *testing.T) {
	path, _ := writeConfig(t, `
redis {
  url = "redis://app:`+urlPW+`@127.0.0.1:6379/0"
  password = "`+pw+`"
}
admin {
  listen = "0.0.0.0:9090"
  token = "`+token+`"
}
`+job, 0o644)
	cfg, err := config.Load(path, config.WithEnviron(nil))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		notShown(t, f+" of Config", fmt.Sprintf(f, cfg))
		notShown(t, f+" of *Config", fmt.Sprintf(f, *cfg))
		notShown(t, f+" of Redis", fmt.Sprintf(f, *cfg.Redis))
		notShown(t, f+" of Admin", fmt.Sprintf(f, cfg.Admin))
	}
	j, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	notShown(t, "json", string(j))
	notShown(t, "Describe", cfg.Redis.Describe())
	if d := cfg.Redis.Describe(); !strings.Contains(d, "127.0.0.1:6379") {
		t.Errorf("Describe = %q", d)
	}
	notShown(t, "warnings", strings.Join(cfg.Warnings, "\n"))
	if cfg.Redis.Password.Value() != pw || cfg.Admin.Token.Value() != token {
		t.Errorf("Value() does not give the secrets")
	}
}

func TestErrorsNeverShowSecrets(t *testing.T) {
	tests := []struct {
		name, src string
		env       []string
	}{
		{"bad port in url", `redis { url = "redis://app:` + urlPW + `@h:notaport/0" }`, nil},
		{"bad escape in url", `redis { url = "redis://app:` + urlPW + `%zz@h:6379/0" }`, nil},
		{"bad db in url", `redis { url = "redis://app:` + urlPW + `@h:6379/x" }`, nil},
		{"bad scheme in url", `redis { url = "http://app:` + urlPW + `@h:6379" }`, nil},
		{"url from REDIS_URL", ``, []string{"REDIS_URL=redis://app:" + urlPW + "@h:bad"}},
		{"password of the wrong type", "redis {\n url = \"redis://h:6379\"\n password = [\"" + pw + "\"]\n}", nil},
		{"token of the wrong type", "admin { token = { x = \"" + token + "\" } }", nil},
		{"password in a bad place", "redis {\n url = \"redis://h:6379\"\n password = \"" + pw + "\"\n password_env = \"X\"\n}", []string{"X=" + token}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := load(t, tt.src+"\n"+job, tt.env...)
			if err == nil {
				t.Fatal("no error")
			}
			notShown(t, "error", err.Error())
			notShown(t, "%+v of error", fmt.Sprintf("%+v %#v", err, err))
		})
	}
}
