package config_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// digests maps each job of cfg to its Digest.
func digests(cfg *config.Config) map[string]string {
	out := make(map[string]string, len(cfg.Jobs))
	for _, j := range cfg.Jobs {
		out[j.Name] = j.Digest
	}
	return out
}

func TestJobDigest(t *testing.T) {
	const base = `
job "a" {
  schedule = "@every 1m"
  timeout  = "10s"
  exec {
    command = ["sh", "-c", "echo a"]
    env     = { X = "1", Y = "2" }
  }
}
job "b" {
  schedule = "@hourly"
  func     = "cleanup"
}
job "c" {
  schedule = "*/5 * * * *"
  http { url = "https://example.com/hook" }
}
`
	// The same jobs in another order, with comments, other spacing and
	// their keys in another order.
	const reordered = `
# comments and blank lines do not count

job "c" {
  http { url = "https://example.com/hook" }   # the hook
  schedule = "*/5 * * * *"
}

job "b" {
      func = "cleanup"
  schedule   =   "@hourly"
}

job "a" {
  exec {
    env     = { Y = "2", X = "1" }
    command = ["sh", "-c", "echo a"]
  }
  timeout  = "10s"
  schedule = "@every 1m"
}
`
	want := digests(mustLoad(t, base))
	if len(want) != 3 {
		t.Fatalf("digests: %v", want)
	}
	seen := map[string]bool{}
	for name, d := range want {
		if len(d) != 16 || strings.Trim(d, "0123456789abcdef") != "" {
			t.Errorf("job %s: digest %q is not 16 hex digits", name, d)
		}
		if seen[d] {
			t.Errorf("two jobs share the digest %s", d)
		}
		seen[d] = true
	}
	if got := digests(mustLoad(t, reordered)); !equalMaps(got, want) {
		t.Errorf("the same jobs, reordered and reformatted: %v, want %v", got, want)
	}

	// One change to one job changes its digest, and only its.
	for _, tc := range []struct{ job, from, to string }{
		{"a", `timeout  = "10s"`, `timeout  = "20s"`},
		{"a", `env     = { X = "1", Y = "2" }`, `env     = { X = "1", Y = "3" }`},
		{"a", `command = ["sh", "-c", "echo a"]`, `command = ["sh", "-c", "echo A"]`},
		{"b", `schedule = "@hourly"`, `schedule = "@daily"`},
		{"c", `http { url = "https://example.com/hook" }`, `http {
    url    = "https://example.com/hook"
    method = "POST"
  }`},
	} {
		got := digests(mustLoad(t, strings.Replace(base, tc.from, tc.to, 1)))
		for name, d := range got {
			if changed := d != want[name]; changed != (name == tc.job) {
				t.Errorf("%s → %s: job %s changed %v", tc.from, tc.to, name, changed)
			}
		}
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// The digests never depend on the secrets the config reads from the
// environment: only their variables' names are in the file.
func TestDigestIgnoresSecretValues(t *testing.T) {
	src := `
redis {
  url          = "redis://127.0.0.1:6379"
  password_env = "REDIS_PW"
}
admin { token_env = "ADMIN_TOKEN" }
notify "ops" {
  url_env = "HOOK_URL"
}
job "a" {
  schedule = "@every 1m"
  exec { command = ["true"] }
}
`
	path, _ := writeConfig(t, src, 0o600)
	one, err := config.Load(path, config.WithEnviron([]string{"REDIS_PW=first-secret", "ADMIN_TOKEN=token-one", "HOOK_URL=https://hooks.example/one"}))
	if err != nil {
		t.Fatal(err)
	}
	two, err := config.Load(path, config.WithEnviron([]string{"REDIS_PW=second-secret", "ADMIN_TOKEN=token-two", "HOOK_URL=https://hooks.example/two"}))
	if err != nil {
		t.Fatal(err)
	}
	if one.Digest != two.Digest || !equalMaps(digests(one), digests(two)) {
		t.Errorf("the digests depend on the secrets' values: %s %v, %s %v", one.Digest, digests(one), two.Digest, digests(two))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if one.Digest != hex.EncodeToString(sum[:]) {
		t.Errorf("Digest = %s, want the file's SHA-256 %x", one.Digest, sum)
	}
	// The secrets did change, and they are settings that need a restart.
	if got := two.RestartNeeded(one); !slices.Equal(got, []string{"redis", "admin.token", "notify"}) {
		t.Errorf("RestartNeeded with other secrets = %v", got)
	}
}

func TestRevisionIsTheJobDigest(t *testing.T) {
	reg := testRegistry(t)
	cfg := mustLoad(t, job+`
job "y" {
  schedule = "@hourly"
  func     = "cleanup"
}
`)
	js, err := cfg.SchedulerJobs(reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range js {
		if j.Revision == "" || j.Revision != cfg.Jobs[i].Digest {
			t.Errorf("job %s: Revision %q, want its Digest %q", j.Name, j.Revision, cfg.Jobs[i].Digest)
		}
	}
}

func TestRestartNeeded(t *testing.T) {
	const base = `
replica_id       = "r1"
shutdown_timeout = "20s"
fleet { claim_fallback = "250ms" }
redis { url = "redis://127.0.0.1:6379" }
lock { lease = "30s" }
admin {
  listen = "127.0.0.1:9090"
  token  = "tok-one"
}
telemetry { metrics = "prometheus" }
log { level = "info" }
history { keep = 100 }
notify "ops" {
  url = "https://hooks.example/one"
}
job "x" {
  schedule = "@every 1m"
  exec { command = ["true"] }
}
`
	running := mustLoad(t, base)
	for _, tc := range []struct {
		name string
		repl []string // pairs: from, to
		env  []string
		want []string
	}{
		{"nothing", nil, nil, nil},
		{"a job", []string{`schedule = "@every 1m"`, `schedule = "@every 2m"`}, nil, nil},
		{"a job added before notify", []string{`notify "ops"`, "job \"new\" {\n  schedule = \"@hourly\"\n  exec { command = [\"true\"] }\n}\nnotify \"ops\""}, nil, nil},
		{"the same value written otherwise", []string{`lease = "30s"`, `lease = "30000ms"`}, nil, nil},
		{"replica_id", []string{`replica_id       = "r1"`, `replica_id = "r2"`}, nil, []string{"replica_id"}},
		{"shutdown_timeout", []string{`"20s"`, `"25s"`}, nil, []string{"shutdown_timeout"}},
		{"watch", []string{`replica_id       = "r1"`, "replica_id = \"r1\"\nwatch = true"}, nil, []string{"watch"}},
		{"fleet", []string{`"250ms"`, `"500ms"`}, nil, []string{"fleet"}},
		{"redis", []string{`redis://127.0.0.1:6379`, `redis://127.0.0.1:6380`}, nil, []string{"redis"}},
		{"redis from the environment", nil, []string{"REDIS_URL=redis://127.0.0.1:6381"}, []string{"redis"}},
		{"lock", []string{`lease = "30s"`, `lease = "15s"`}, nil, []string{"lock"}},
		{"admin.listen", []string{`127.0.0.1:9090`, `127.0.0.1:9091`}, nil, []string{"admin.listen"}},
		{"admin.token", []string{`tok-one`, `tok-two`}, nil, []string{"admin.token"}},
		{"a token block added", []string{`token  = "tok-one"`, "token  = \"tok-one\"\n  token \"ops\" {\n    scope = \"operate\"\n    value_env = \"OPS_TOK\"\n  }"}, []string{"OPS_TOK=ops"}, []string{"admin.tokens"}},
		{"admin.public_read", []string{`token  = "tok-one"`, "token  = \"tok-one\"\n  public_read = true"}, nil, []string{"admin.public_read"}},
		{"telemetry", []string{`metrics = "prometheus"`, `metrics = "none"`}, nil, []string{"telemetry"}},
		{"log", []string{`level = "info"`, `level = "debug"`}, nil, []string{"log"}},
		{"history", []string{`keep = 100`, `keep = 50`}, nil, []string{"history"}},
		{"notify", []string{`hooks.example/one`, `hooks.example/two`}, nil, []string{"notify"}},
		{"several, and a job", []string{
			`tok-one`, `tok-two`,
			`127.0.0.1:9090`, `127.0.0.1:9091`,
			`redis://127.0.0.1:6379`, `redis://127.0.0.1:6380`,
			`schedule = "@every 1m"`, `schedule = "@every 2m"`,
		}, nil, []string{"redis", "admin.listen", "admin.token"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := base
			for i := 0; i < len(tc.repl); i += 2 {
				if !strings.Contains(src, tc.repl[i]) {
					t.Fatalf("%q is not in the config", tc.repl[i])
				}
				src = strings.Replace(src, tc.repl[i], tc.repl[i+1], 1)
			}
			if got := mustLoad(t, src, tc.env...).RestartNeeded(running); !slices.Equal(got, tc.want) {
				t.Errorf("RestartNeeded = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWatchSetting(t *testing.T) {
	if cfg := mustLoad(t, job); cfg.Watch {
		t.Errorf("watch is on by default")
	}
	if cfg := mustLoad(t, "watch = true\n"+job); !cfg.Watch {
		t.Errorf("watch = true: Watch false")
	}
	if cfg := mustLoad(t, job, "LOCKCRON_WATCH=true"); !cfg.Watch {
		t.Errorf("LOCKCRON_WATCH=true: Watch false")
	}
	_, places, err := load(t, "@@watch = \"yes\"\n"+job)
	es := errorList(t, err)
	if len(es) != 1 || !strings.HasPrefix(es[0].Error(), places[0]+": watch: ") {
		t.Errorf("watch = \"yes\": %v", err)
	}
}

// A job's digest never depends on a literal secret in its block: the
// values of exec env variables and http headers named as secrets, and
// the password and query values of an http job's URL. Other values count.
func TestJobDigestWithoutSecretValues(t *testing.T) {
	const base = `
job "e" {
  schedule = "@every 1m"
  exec {
    command = ["true"]
    env     = { API_TOKEN = "tok-one", DB_PASSWORD = "pw-one", LOG_LEVEL = "info" }
  }
}
job "h" {
  schedule = "@every 1m"
  http {
    url     = "https://app:pw-one@api.example.com/close?token=tok-one"
    headers = { Authorization = "Bearer tok-one", "X-Api-Key" = "key-one", Accept = "application/json" }
  }
}
`
	want := digests(mustLoad(t, base))
	for _, tc := range []struct {
		from, to string
		changes  bool
	}{
		{`API_TOKEN = "tok-one"`, `API_TOKEN = "tok-two"`, false},
		{`DB_PASSWORD = "pw-one"`, `DB_PASSWORD = "pw-two"`, false},
		{`app:pw-one@`, `app:pw-two@`, false},
		{`?token=tok-one`, `?token=tok-two`, false},
		{`Authorization = "Bearer tok-one"`, `Authorization = "Bearer tok-two"`, false},
		{`"X-Api-Key" = "key-one"`, `"X-Api-Key" = "key-two"`, false},
		{`LOG_LEVEL = "info"`, `LOG_LEVEL = "debug"`, true},
		{`Accept = "application/json"`, `Accept = "text/plain"`, true},
		{`api.example.com/close`, `api.example.com/open`, true},
	} {
		got := digests(mustLoad(t, strings.Replace(base, tc.from, tc.to, 1)))
		if changed := !equalMaps(got, want); changed != tc.changes {
			t.Errorf("%s → %s: the digests changed %v, want %v", tc.from, tc.to, changed, tc.changes)
		}
	}
}
