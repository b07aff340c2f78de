package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// want is an error a test expects: its place (the n-th marker of the
// source, or an environment variable), job, field and a part of its
// message.
type want struct {
	mark  int
	env   string
	job   string
	field string
	msg   string
}

// checkErrors checks that err holds exactly the wanted errors, each at its
// place and naming its job and field.
func checkErrors(t *testing.T, err error, places []string, wants []want) {
	t.Helper()
	es := errorList(t, err)
	if len(es) != len(wants) {
		t.Errorf("got %d errors, want %d:\n%v", len(es), len(wants), err)
	}
	for _, w := range wants {
		var e *config.Error
		for _, c := range es {
			if c.Field == w.field && c.Job == w.job && strings.Contains(c.Msg, w.msg) {
				e = c
				break
			}
		}
		if e == nil {
			t.Errorf("no error with job %q, field %q and message %q in:\n%v", w.job, w.field, w.msg, err)
			continue
		}
		line := e.Error()
		if w.env != "" {
			if e.Env != w.env || !strings.HasPrefix(line, "env "+w.env+": ") {
				t.Errorf("%q: want it to name the variable %s", line, w.env)
			}
		} else {
			at := places[w.mark-1]
			if e.Pos.String() != at || !strings.HasPrefix(line, at+": ") {
				t.Errorf("%q: at %v, want %s", line, e.Pos, at)
			}
		}
		if w.job != "" && !strings.Contains(line, fmt.Sprintf("job %q", w.job)) {
			t.Errorf("%q does not name job %q", line, w.job)
		}
		seg := w.field[strings.LastIndex(w.field, ".")+1:]
		if !strings.Contains(line, seg) {
			t.Errorf("%q does not name the field %q", line, w.field)
		}
	}
}

func TestValidationErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		env  []string
		want []want
	}{{
		name: "bad cron spec",
		src: `job "backup" {
  @@schedule = "* * *"
  exec { command = ["true"] }
}`,
		want: []want{{mark: 1, job: "backup", field: "schedule", msg: `"* * *": expected 5 to 6 fields`}},
	}, {
		name: "bad @every",
		src: `job "backup" {
  @@schedule = "@every 1500ms"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "schedule", msg: "whole seconds"}},
	}, {
		name: "bad H",
		src: `job "backup" {
  @@schedule = "H/61 * * * *"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "schedule", msg: `minute field "H/61": step 61 is not from 1 to 60`}},
	}, {
		name: "jitter too long",
		src: `job "backup" {
  schedule = "@yearly"
  @@jitter = "9000h"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "jitter", msg: "is above MaxJitter"}},
	}, {
		name: "missing schedule",
		src: `@@job "backup" {
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "schedule", msg: "missing"}},
	}, {
		name: "unknown time zone",
		src: `job "backup" {
  schedule = "0 2 * * *"
  @@time_zone = "Mars/Olympus_Mons"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "time_zone", msg: `unknown time zone "Mars/Olympus_Mons"`}},
	}, {
		name: "Local time zone",
		src: `job "backup" {
  schedule = "0 2 * * *"
  @@time_zone = "Local"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "time_zone", msg: "differ between replicas"}},
	}, {
		name: "unknown zone in CRON_TZ",
		src: `job "backup" {
  @@schedule = "CRON_TZ=Nowhere/Land 0 2 * * *"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "schedule", msg: "Nowhere/Land"}},
	}, {
		name: "missing kind",
		src: `@@job "backup" {
  schedule = "@every 1m"
}`,
		want: []want{{mark: 1, job: "backup", field: "kind", msg: "no kind"}},
	}, {
		name: "two kinds",
		src: `job "backup" {
  schedule = "@every 1m"
  exec { command = ["true"] }
  @@func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "func", msg: "exec and func are both set"}},
	}, {
		name: "duplicate job names",
		src: job + `
@@job "x" {
  schedule = "@every 1m"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "x", field: "name", msg: `duplicate job name: a job "x" is at line 2`}},
	}, {
		name: "empty job name",
		src: `@@job "" {
  schedule = "@every 1m"
  func = "cleanup"
}`,
		want: []want{{mark: 1, field: "name", msg: "empty name"}},
	}, {
		name: "job name with braces",
		src: `@@job "a{b}" {
  schedule = "@every 1m"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "a{b}", field: "name", msg: "must not hold { or }"}},
	}, {
		name: "job without a name",
		src: `job @@{
  schedule = "@every 1m"
}`,
		want: []want{{mark: 1, field: "", msg: "Missing name for job: All job blocks must have 1 labels (name)."}},
	}, {
		name: "job with two names",
		src: `job "a" @@"b" {
  schedule = "@every 1m"
}`,
		want: []want{{mark: 1, field: "", msg: "Extraneous label for job: Only 1 labels (name) are expected for job blocks."}},
	}, {
		name: "negative duration",
		src: `job "backup" {
  schedule = "@every 1m"
  @@timeout = "-5s"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "timeout", msg: "negative"}},
	}, {
		name: "zero duration",
		src: `job "backup" {
  schedule = "@every 1m"
  @@backoff = "0s"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "backoff", msg: "zero"}},
	}, {
		name: "not a duration",
		src: `@@shutdown_timeout = "soon"
` + job,
		want: []want{{mark: 1, field: "shutdown_timeout", msg: `"soon" is not a duration`}},
	}, {
		name: "duration as a number",
		src: `lock {
  @@lease = 30
}
` + job,
		want: []want{{mark: 1, field: "lock.lease", msg: `"30" is not a duration`}},
	}, {
		name: "fleet member_ttl too short",
		src: `fleet {
  @@member_ttl = "10ms"
}
` + job,
		want: []want{{mark: 1, field: "fleet.member_ttl", msg: "at least 30ms"}},
	}, {
		name: "lease too short",
		src: `lock {
  @@lease = "900ms"
}
` + job,
		want: []want{{mark: 1, field: "lock.lease", msg: "at least 1s"}},
	}, {
		name: "redis timeout not shorter than lease/2",
		src: `redis {
  url = "redis://127.0.0.1:6379"
  timeout = "3s"
}
lock {
  @@lease = "6s"
}
` + job,
		want: []want{{mark: 1, field: "lock.lease", msg: "redis.timeout (3s) must be shorter than half the lease of 6s (3s)"}},
	}, {
		name: "redis timeout too long for the default lease",
		src: `redis {
  url = "redis://127.0.0.1:6379"
  @@timeout = "15s"
}
` + job,
		want: []want{{mark: 1, field: "redis.timeout", msg: "lock.lease"}},
	}, {
		name: "replica ack timeout counts in the renewal budget",
		src: `redis {
  url = "redis://127.0.0.1:6379"
  timeout = "2s"
}
lock {
  @@lease = "4400ms"
  replica_ack {
    replicas = 1
    timeout = "200ms"
  }
}
` + job,
		want: []want{{mark: 1, field: "lock.lease", msg: "redis.timeout (2s) plus lock.replica_ack.timeout (200ms) must be shorter than half the lease of 4.4s (2.2s)"}},
	}, {
		name: "bad redis connect_timeout",
		src: `redis {
  url = "redis://127.0.0.1:6379"
  @@connect_timeout = "soon"
}
` + job,
		want: []want{{mark: 1, field: "redis.connect_timeout", msg: `"soon" is not a duration`}},
	}, {
		name: "redis connect_timeout as a number",
		src: `redis {
  url = "redis://127.0.0.1:6379"
  @@connect_timeout = 30
}
` + job,
		want: []want{{mark: 1, field: "redis.connect_timeout", msg: `"30" is not a duration`}},
	}, {
		name: "redis connect_timeout misspelt",
		src: `redis {
  url = "redis://127.0.0.1:6379"
  @@connect_timout = "5s"
}
` + job,
		want: []want{{mark: 1, field: "redis.connect_timout", msg: `Did you mean "connect_timeout"?`}},
	}, {
		name: "replica ack without redis",
		src: `lock {
  @@replica_ack {
    replicas = 1
  }
}
` + job,
		want: []want{{mark: 1, field: "lock.replica_ack", msg: "needs redis"}},
	}, {
		name: "replica ack of no replica",
		src: `redis { url = "redis://h:6379" }
lock {
  replica_ack {
    @@replicas = 0
  }
}
` + job,
		want: []want{{mark: 1, field: "lock.replica_ack.replicas", msg: "at least 1"}},
	}, {
		name: "exec grace not shorter than shutdown_timeout",
		src: `shutdown_timeout = "10s"
job "backup" {
  schedule = "@every 1m"
  exec {
    command = ["true"]
    @@grace = "10s"
  }
}`,
		want: []want{{mark: 1, job: "backup", field: "exec.grace", msg: "must be shorter than shutdown_timeout (10s)"}},
	}, {
		name: "default exec grace against a short shutdown_timeout",
		src: `@@shutdown_timeout = "5s"
` + job,
		want: []want{{mark: 1, job: "x", field: "shutdown_timeout", msg: "exec.grace (10s) must be shorter than shutdown_timeout (5s)"}},
	}, {
		name: "unknown policy values",
		src: `job "backup" {
  schedule = "@every 1m"
  @@lock_kind = "shared"
  @@overlap = "parallel"
  @@misfire = "catch_up"
  @@on_shutdown = "wait"
  func = "cleanup"
}`,
		want: []want{
			{mark: 1, job: "backup", field: "lock_kind", msg: `"shared" is not one of "reentrant", "fair"`},
			{mark: 2, job: "backup", field: "overlap", msg: `"parallel" is not one of "skip", "queue", "replace"`},
			{mark: 3, job: "backup", field: "misfire", msg: `"catch_up" is not one of "skip", "run_once"`},
			{mark: 4, job: "backup", field: "on_shutdown", msg: `"wait" is not one of "handoff", "abandon"`},
		},
	}, {
		name: "lock, the kind's name before lock_kind",
		src: `job "backup" {
  schedule = "@every 1m"
  @@lock = "fair"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "backup", field: "lock", msg: `renamed: write lock_kind = "fair" (the lock's kind; lock_name names the lock)`}},
	}, {
		name: "func not registered",
		src: `job "report" {
  schedule = "@every 1m"
  @@func = "nightly-reprot"
}`,
		want: []want{{mark: 1, job: "report", field: "func", msg: `"nightly-reprot" is not registered (known: cleanup, nightly-report)`}},
	}, {
		name: "unknown key in a job",
		src: `job "x" {
  @@scheduel = "@every 1m"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "x", field: "scheduel", msg: `Unsupported argument: An argument named "scheduel" is not expected here. Did you mean "schedule"?`}},
	}, {
		name: "unknown keys everywhere",
		src: `@@replicaid = "a"
redis {
  url = "redis://h:6379"
  @@pasword = "x"
  tls {
    @@ca_flie = "/x"
  }
}
log {
  @@colour = true
}
job "x" {
  schedule = "@every 1m"
  exec {
    command = ["true"]
    @@envs = { A = "b" }
  }
}`,
		want: []want{
			{mark: 1, field: "replicaid", msg: `Unsupported argument: An argument named "replicaid" is not expected here. Did you mean "replica_id"?`},
			{mark: 2, field: "redis.pasword", msg: `Unsupported argument: An argument named "pasword" is not expected here. Did you mean "password"?`},
			{mark: 3, field: "redis.tls.ca_flie", msg: `Unsupported argument: An argument named "ca_flie" is not expected here. Did you mean "ca_file"?`},
			{mark: 4, field: "log.colour", msg: `Unsupported argument: An argument named "colour" is not expected here.`},
			{mark: 5, job: "x", field: "exec.envs", msg: `Unsupported argument: An argument named "envs" is not expected here. Did you mean "env"?`},
		},
	}, {
		name: "key set twice",
		src: `log {
  level = "info"
  @@level = "debug"
}
` + job,
		want: []want{{mark: 1, field: "log", msg: `Attribute redefined: The argument "level" was already set at `}},
	}, {
		name: "block given twice",
		src: `log { level = "info" }
@@log { json = true }
` + job,
		want: []want{{mark: 1, field: "log", msg: "Duplicate log block: Only one log block is allowed. Another was defined at "}},
	}, {
		name: "label on a plain block",
		src: `@@redis "main" { url = "redis://h:6379" }
` + job,
		want: []want{{mark: 1, field: "redis", msg: "Extraneous label for redis: No labels are expected for redis blocks."}},
	}, {
		name: "wrong types",
		// HCL converts a number to a string and "3" to a number; what it
		// cannot convert is an error.
		src: `job "x" {
  @@schedule = 5
  retries = "3"
  exec { @@command = "true" }
}
log {
  @@json = "yes"
}`,
		want: []want{
			{mark: 1, job: "x", field: "schedule", msg: `"5": expected 5 to 6 fields`},
			{mark: 2, job: "x", field: "exec.command", msg: "Unsuitable value: list of string required, but have string"},
			{mark: 3, field: "log.json", msg: "Unsuitable value: a bool is required"},
		},
	}, {
		name: "url and addrs both set",
		src: `redis {
  @@url = "redis://h:6379"
  addrs = ["h:6379"]
}
` + job,
		want: []want{{mark: 1, field: "redis.url", msg: "url and addrs are both set"}},
	}, {
		name: "master_name without addrs",
		src: `redis {
  url = "redis://h:6379"
  @@master_name = "mymaster"
}
` + job,
		want: []want{{mark: 1, field: "redis.master_name", msg: "needs addrs"}},
	}, {
		name: "redis without url or addrs",
		src: `@@redis {
  db = 1
}
` + job,
		want: []want{{mark: 1, field: "redis", msg: "needs url or addrs"}},
	}, {
		name: "bad addrs",
		src: `redis {
  @@addrs = ["h:6379", "nohost", "h:99999"]
}
` + job,
		want: []want{
			{mark: 1, field: "redis.addrs", msg: `"nohost" is not host:port`},
			{mark: 1, field: "redis.addrs", msg: `"h:99999": port "99999"`},
		},
	}, {
		name: "url port out of range",
		src: `redis {
  @@url = "redis://app:hunter22@h:99999/0"
}
` + job,
		want: []want{{mark: 1, field: "redis.url", msg: `"redis://app:xxxxx@h:99999/0": port "99999" is not a number in 1..65535`}},
	}, {
		name: "bad url scheme",
		src: `redis {
  @@url = "http://h:6379"
}
` + job,
		want: []want{{mark: 1, field: "redis.url", msg: `scheme "http" is not redis, rediss or unix`}},
	}, {
		name: "db on cluster",
		src: `redis {
  addrs = ["a:7000", "b:7000", "c:7000"]
  @@db = 2
}
` + job,
		want: []want{{mark: 1, field: "redis.db", msg: "Cluster has only database 0"}},
	}, {
		name: "key prefix with braces",
		src: `redis {
  url = "redis://h:6379"
  @@key_prefix = "a{b}"
}
` + job,
		want: []want{{mark: 1, field: "redis.key_prefix", msg: "brace"}},
	}, {
		name: "password and password_env",
		src: `redis {
  url = "redis://h:6379"
  password = "x"
  @@password_env = "REDIS_PASSWORD"
}
` + job,
		env:  []string{"REDIS_PASSWORD=y"},
		want: []want{{mark: 1, field: "redis.password_env", msg: "both set"}},
	}, {
		name: "password_env not set",
		src: `redis {
  url = "redis://h:6379"
  @@password_env = "REDIS_PASSWORD"
}
admin {
  @@token_env = "ADMIN_TOKEN"
}
` + job,
		want: []want{
			{mark: 1, field: "redis.password_env", msg: `"REDIS_PASSWORD" is not set`},
			{mark: 2, field: "admin.token_env", msg: `"ADMIN_TOKEN" is not set`},
		},
	}, {
		name: "client certificate without key",
		src: `redis {
  url = "redis://h:6379"
  tls {
    @@cert_file = "/etc/client.pem"
  }
}
` + job,
		want: []want{{mark: 1, field: "redis.tls.cert_file", msg: "needs key_file"}},
	}, {
		name: "bad log level",
		src: `log {
  @@level = "verbose"
}
` + job,
		want: []want{{mark: 1, field: "log.level", msg: `"verbose" is not one of "trace", "debug", "info", "warn", "error"`}},
	}, {
		name: "bad telemetry choices",
		src: `telemetry {
  @@traces = "jaeger"
  @@metrics = "statsd"
}
` + job,
		want: []want{
			{mark: 1, field: "telemetry.traces", msg: `"jaeger" is not one of "none", "stdout", "otlp"`},
			{mark: 2, field: "telemetry.metrics", msg: `"statsd" is not one of "prometheus", "otlp", "none"`},
		},
	}, {
		name: "otlp without endpoint",
		src: `telemetry {
  @@metrics = "otlp"
}
` + job,
		want: []want{{mark: 1, field: "telemetry.metrics", msg: "needs otlp_endpoint"}},
	}, {
		name: "bad otlp endpoint",
		src: `telemetry {
  traces = "otlp"
  @@otlp_endpoint = "ftp://collector"
}
` + job,
		want: []want{{mark: 1, field: "telemetry.otlp_endpoint", msg: `scheme "ftp"`}},
	}, {
		name: "bad admin listen",
		src: `admin {
  @@listen = "9090"
}
` + job,
		want: []want{{mark: 1, field: "admin.listen", msg: "not host:port"}},
	}, {
		name: "bad http job",
		src: `job "ping" {
  schedule = "@every 1m"
  http {
    @@url = "ftp://example.com/x"
    @@method = "GE T"
    @@headers = { "Lockcron-Job" = "x" }
    @@expect_status = [200, 700]
  }
}`,
		want: []want{
			{mark: 1, job: "ping", field: "http.url", msg: `scheme "ftp" is not http or https`},
			{mark: 2, job: "ping", field: "http.method", msg: "not a valid method"},
			{mark: 3, job: "ping", field: `http.headers["Lockcron-Job"]`, msg: "Lockcron-"},
			{mark: 4, job: "ping", field: "http.expect_status[1]", msg: "700 is not in 100..599"},
		},
	}, {
		name: "http job without url",
		src: `job "ping" {
  schedule = "@every 1m"
  @@http {
    method = "POST"
  }
}`,
		want: []want{{mark: 1, job: "ping", field: "http.url", msg: "missing"}},
	}, {
		name: "http job with an empty url",
		src: `job "ping" {
  schedule = "@every 1m"
  http {
    @@url = ""
  }
}`,
		want: []want{{mark: 1, job: "ping", field: "http.url", msg: "empty"}},
	}, {
		name: "bad exec job",
		src: `job "run" {
  schedule = "@every 1m"
  exec {
    @@command = []
    @@env = { LOCKCRON_JOB = "x" }
  }
}`,
		want: []want{
			{mark: 1, job: "run", field: "exec.command", msg: "empty"},
			{mark: 2, job: "run", field: `exec.env["LOCKCRON_JOB"]`, msg: "LOCKCRON_"},
		},
	}, {
		name: "bad counts",
		src: `job "a" {
  schedule = "@every 1m"
  @@retries = -1
  @@max_concurrency = 0
  func = "cleanup"
}
job "b" {
  schedule = "@every 1m"
  @@concurrency_group = "g"
  func = "cleanup"
}`,
		want: []want{
			{mark: 1, job: "a", field: "retries", msg: "-1 is negative"},
			{mark: 2, job: "a", field: "max_concurrency", msg: "at least 1"},
			{mark: 3, job: "b", field: "concurrency_group", msg: "needs max_concurrency"},
		},
	}, {
		name: "a group with two limits",
		src: `job "a" {
  schedule = "@every 1m"
  max_concurrency = 2
  concurrency_group = "reports"
  func = "cleanup"
}
job "b" {
  schedule = "@every 1m"
  @@max_concurrency = 3
  concurrency_group = "reports"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "b", field: "max_concurrency", msg: `job "a" gives 2 for the same concurrency group "reports"`}},
	}, {
		name: "one lock, two kinds",
		src: `job "a" {
  schedule = "@every 1m"
  lock_kind = "fair"
  lock_name = "shared"
  func = "cleanup"
}
job "b" {
  schedule = "@every 1m"
  @@lock_kind = "reentrant"
  lock_name = "shared"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "b", field: "lock_kind", msg: `job "a" takes the same lock "shared" as "fair"`}},
	}, {
		name: "name of a ledger of manual runs",
		src: `@@job "x!manual" {
  schedule = "@every 1m"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "x!manual", field: "name", msg: `must not end with "!manual"`}},
	}, {
		name: "lock name with braces",
		src: `job "a" {
  schedule = "@every 1m"
  @@lock_name = "x}"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "a", field: "lock_name", msg: "must not hold { or }"}},
	}, {
		name: "syntax error",
		src: `job "a" {
  schedule = "@every 1m"
  func = @@}
`,
		want: []want{{mark: 1, field: "", msg: "Invalid expression: Expected the start of an expression"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, places, err := load(t, tt.src, tt.env...)
			checkErrors(t, err, places, tt.want)
		})
	}
}

// Every duration field refuses zero and negative values, at its place.
func TestEveryDurationMustBePositive(t *testing.T) {
	fields := []struct {
		field, job string
		src        func(v string) string
	}{
		{"shutdown_timeout", "", func(v string) string { return "@@shutdown_timeout = " + v + "\n" + job }},
		{"redis.timeout", "", func(v string) string {
			return "redis {\n  url = \"redis://h:6379\"\n  @@timeout = " + v + "\n}\n" + job
		}},
		{"redis.connect_timeout", "", func(v string) string {
			return "redis {\n  url = \"redis://h:6379\"\n  @@connect_timeout = " + v + "\n}\n" + job
		}},
		{"lock.lease", "", func(v string) string { return "lock {\n  @@lease = " + v + "\n}\n" + job }},
		{"history.max_age", "", func(v string) string { return "history {\n  @@max_age = " + v + "\n}\n" + job }},
		{"history_max_age", "j", func(v string) string {
			return "job \"j\" {\n  schedule = \"@every 1m\"\n  @@history_max_age = " + v + "\n  func = \"cleanup\"\n}\n"
		}},
		{"lock.waiter_ttl", "", func(v string) string { return "lock {\n  @@waiter_ttl = " + v + "\n}\n" + job }},
		{"lock.replica_ack.timeout", "", func(v string) string {
			return "redis { url = \"redis://h:6379\" }\nlock {\n  replica_ack {\n    @@timeout = " + v + "\n  }\n}\n" + job
		}},
		{"timeout", "j", func(v string) string {
			return "job \"j\" {\n  schedule = \"@every 1m\"\n  @@timeout = " + v + "\n  func = \"cleanup\"\n}\n"
		}},
		{"jitter", "j", func(v string) string {
			return "job \"j\" {\n  schedule = \"@every 1m\"\n  @@jitter = " + v + "\n  func = \"cleanup\"\n}\n"
		}},
		{"misfire_grace", "j", func(v string) string {
			return "job \"j\" {\n  schedule = \"@every 1m\"\n  misfire = \"run_once\"\n  @@misfire_grace = " + v + "\n  func = \"cleanup\"\n}\n"
		}},
		{"backoff", "j", func(v string) string {
			return "job \"j\" {\n  schedule = \"@every 1m\"\n  @@backoff = " + v + "\n  func = \"cleanup\"\n}\n"
		}},
		{"exec.grace", "j", func(v string) string {
			return "job \"j\" {\n  schedule = \"@every 1m\"\n  exec {\n    command = [\"true\"]\n    @@grace = " + v + "\n  }\n}\n"
		}},
	}
	for _, f := range fields {
		for _, v := range []struct{ value, msg string }{{`"0s"`, "zero"}, {`"-1m"`, "negative"}} {
			t.Run(f.field+"="+v.value, func(t *testing.T) {
				_, places, err := load(t, f.src(v.value))
				checkErrors(t, err, places, []want{{mark: 1, job: f.job, field: f.field, msg: v.msg}})
			})
		}
	}
}

// A file with five mistakes gives five errors, in the file's order.
func TestAllErrorsAtOnce(t *testing.T) {
	_, places, err := load(t, `@@shutdown_timeout = "forever"
log {
  @@level = "chatty"
}
job "a" {
  @@schedule = "61 * * * *"
  func = "cleanup"
}
job "b" {
  schedule = "@every 1m"
  @@overlap = "both"
  @@func = "missing"
}
`)
	es := errorList(t, err)
	if len(es) != 5 {
		t.Fatalf("got %d errors, want 5:\n%v", len(es), err)
	}
	for i, e := range es {
		if e.Pos.String() != places[i] {
			t.Errorf("error %d at %v, want %s (errors sorted by place): %v", i, e.Pos, places[i], e)
		}
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != 5 {
		t.Errorf("Error() has %d lines, want 5:\n%v", len(lines), err)
	}
}

func TestUnknownKeySuggestions(t *testing.T) {
	// The suggestions are HCL's: a name within 2 edits of one not set.
	tests := []struct{ key, want string }{
		{"scheduel", `Did you mean "schedule"?`},
		{"Schedule", `Did you mean "schedule"?`},
		{"timezone", `Did you mean "time_zone"?`},
		{"onshutdown", `Did you mean "on_shutdown"?`},
		{"maxconcurrency", `Did you mean "max_concurrency"?`},
		{"colour", `An argument named "colour" is not expected here.`},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			_, places, err := load(t, `job "x" {
  func = "cleanup"
  @@`+tt.key+` = 1
}`)
			checkErrors(t, err, places, []want{{mark: 1, job: "x", field: tt.key, msg: tt.want}})
			if !strings.Contains(err.Error(), fmt.Sprintf(`job "x": %s: Unsupported argument: An argument named %q is not expected here.`, tt.key, tt.key)) {
				t.Errorf("got %v", err)
			}
		})
	}
}

// TestWriteText: what validate prints, each error with its place and then
// the line of the file it is about (HCL's diagnostic writer).
func TestWriteText(t *testing.T) {
	_, places, err := load(t, `job "x" {
  @@scheduel = "@every 1m"
  func = "cleanup"
}
log {
  @@level = "loud"
}`)
	var b strings.Builder
	if werr := errorList(t, err).WriteText(&b); werr != nil {
		t.Fatal(werr)
	}
	for _, want := range []string{
		"Error: " + places[0] + `: job "x": scheduel: Unsupported argument: An argument named "scheduel" is not expected here. Did you mean "schedule"?`,
		`   2:   scheduel = "@every 1m"`,
		"Error: " + places[1] + `: log.level: "loud" is not one of "trace", "debug", "info", "warn", "error"`,
		`   6:   level = "loud"`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("WriteText lacks %q:\n%s", want, b.String())
		}
	}
}

// TestWriteTextHidesSecretLines: the line of a setting that may hold a
// secret is not printed, even where the message names it (the message
// masks the password; the file's line would not).
func TestWriteTextHidesSecretLines(t *testing.T) {
	_, places, err := load(t, `redis {
  @@url = "redis://app:hunter2-secret@db.internal:99999/0"
}
admin {
  @@token = "s3cr${x}"
}
`+job)
	var b strings.Builder
	if werr := errorList(t, err).WriteText(&b); werr != nil {
		t.Fatal(werr)
	}
	out := b.String()
	if strings.Contains(out, "hunter2") || strings.Contains(out, "s3cr") || strings.Contains(out, "  on ") {
		t.Errorf("WriteText shows a secret's line:\n%s", out)
	}
	for _, p := range places {
		if !strings.Contains(out, "Error: "+p+": ") {
			t.Errorf("WriteText lacks the error at %s:\n%s", p, out)
		}
	}
}

// TestTemplateEscapes: ${ and %{ start HCL templates; $${ and %%{ are the
// characters.
func TestTemplateEscapes(t *testing.T) {
	cfg := mustLoad(t, "admin {\n  token = \"ab$${x}%%{y}\"\n}\n"+job)
	if got := cfg.Admin.Token.Value(); got != "ab${x}%{y}" {
		t.Errorf("token = %q, want ab${x}%%{y}", got)
	}
}
