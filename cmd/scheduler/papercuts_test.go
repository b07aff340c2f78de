package main_test

// The command as a new user meets it: version, help, errors that say what
// to do, read-only commands that need no admin token, and logs that stay
// JSON when go-redis itself logs.

import (
	"encoding/json"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := mustCLI(t, 0, dir, "version")
	b := mustCLI(t, 0, dir, "--version")
	if !strings.HasPrefix(a.stdout, "scheduler ") || !strings.Contains(a.stdout, "go1.") {
		t.Errorf("version printed %q, want \"scheduler VERSION goX\"", a.stdout)
	}
	// Not the placeholder version at which the modules require each other.
	if strings.Contains(a.stdout, "v0.0.0-00010101000000-000000000000") {
		t.Errorf("version printed %q, the placeholder", a.stdout)
	}
	if a.stdout != b.stdout {
		t.Errorf("version %q and --version %q differ", a.stdout, b.stdout)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := mustCLI(t, 0, dir, "--help").stdout
	for _, l := range strings.Split(root, "\n") {
		if strings.Contains(l, "--config string") {
			if n := strings.Count(l, "default"); n != 1 {
				t.Errorf("the config flag's help gives its default %d times: %q", n, l)
			}
		}
	}
	if !strings.Contains(root, "history") || !strings.Contains(root, "version") {
		t.Errorf("--help does not list history and version:\n%s", root)
	}
	trigger := mustCLI(t, 0, dir, "trigger", "--help").stdout
	pause := mustCLI(t, 0, dir, "pause", "--help").stdout
	resume := mustCLI(t, 0, dir, "resume", "--help").stdout
	// trigger's own words are not in pause's or resume's help.
	if strings.Contains(pause, "lock-guarded") || strings.Contains(resume, "lock-guarded") || !strings.Contains(trigger, "lock-guarded") {
		t.Errorf("pause or resume help speaks of triggers:\npause:\n%s\nresume:\n%s", pause, resume)
	}
	if !strings.Contains(pause, "pause stops") || !strings.Contains(resume, "resume lets") || pause == resume {
		t.Errorf("pause and resume help do not say what they do:\npause:\n%s\nresume:\n%s", pause, resume)
	}
}

// A missing config file: the error says how to name one. jobs and history
// (as locks, trigger, pause, resume and reload) ask a daemon instead, and
// say so when none answers.
func TestMissingConfigHints(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	env := []string{"LOCKCRON_ADMIN__LISTEN=" + deadAddr(t)}
	for _, args := range [][]string{{"validate"}, {"jobs"}, {"history", "x"}, {"validate", "-config", "nope.hcl"}} {
		r := cliEnv(t, dir, env, args...)
		if r.code != 1 || !strings.Contains(r.stderr, "-config") || !strings.Contains(r.stderr, "LOCKCRON_CONFIG") {
			t.Errorf("scheduler %q: exit %d, %q does not hint at -config and LOCKCRON_CONFIG", args, r.code, r.stderr)
		}
	}
	if r := cliEnv(t, dir, env, "history", "x"); !strings.Contains(r.stderr, "no daemon answers at "+strings.TrimPrefix(env[0], "LOCKCRON_ADMIN__LISTEN=")) {
		t.Errorf("history without a config file nor a daemon: %q does not name the address it asked", r.stderr)
	}
}

// deadAddr is a loopback address where nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Without a config file (no -config, no LOCKCRON_CONFIG, no lockcron.hcl
// in the working directory), jobs, locks, history, trigger, pause, resume
// and reload ask the daemon at LOCKCRON_ADMIN__LISTEN with LOCKCRON_ADMIN__TOKEN, the
// variables that set the daemon's admin.listen and admin.token; the
// daemon's log says where its status page is.
func TestCommandsWithoutConfigAskTheDaemon(t *testing.T) {
	t.Parallel()
	const token = "s3cret-admin-token"
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `admin {
  listen = "127.0.0.1:0"
}
log {
  json = true
}
`+execJob("hello", "@yearly", "1s", `echo hi`))
	p := startProc(t, "solo", dir, baseEnv("LOCKCRON_REPLICA_ID=solo", "LOCKCRON_ADMIN__TOKEN="+token), schedBin, "run", "-config", cfg)
	p.waitReady(t)
	if l, _ := p.logs.find("admin listening"); l.str("status_page") != "http://"+p.admin+"/" {
		t.Errorf("the admin listening line's status_page is %q, want http://%s/", l.str("status_page"), p.admin)
	}

	elsewhere := t.TempDir() // no lockcron.hcl here
	env := []string{"LOCKCRON_ADMIN__LISTEN=" + p.admin, "LOCKCRON_ADMIN__TOKEN=" + token}
	for _, c := range []struct {
		args []string
		out  string
	}{
		{[]string{"trigger", "hello"}, "hello: triggered; 1 replica heard it, one runs it\n"},
		{[]string{"pause", "hello", "-note", "test"}, "hello: paused\n"},
		{[]string{"resume", "hello"}, "hello: resumed\n"},
		{[]string{"reload"}, cfg + ": reloaded"},
	} {
		if r := cliEnv(t, elsewhere, env, c.args...); r.code != 0 || !strings.HasPrefix(r.stdout, c.out) {
			t.Errorf("scheduler %q without a config file: exit %d, stdout %q, want %q; stderr %q", c.args, r.code, r.stdout, c.out, r.stderr)
		}
	}
	if r := cliEnv(t, elsewhere, env, "jobs"); r.code != 0 || !strings.HasPrefix(r.stdout, "JOB ") || !strings.Contains(r.stdout, "\nhello ") {
		t.Errorf("jobs without a config file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cliEnv(t, elsewhere, env, "jobs", "-json"); r.code != 0 || !strings.Contains(r.stdout, `"name": "hello"`) || !strings.Contains(r.stdout, `"config_digest"`) {
		t.Errorf("jobs -json without a config file (the daemon's view, with its config's digest): exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cliEnv(t, elsewhere, env, "locks"); r.code != 0 || !strings.HasPrefix(r.stdout, "LOCK ") {
		t.Errorf("locks without a config file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	p.waitLog(t, 20*time.Second, "run finished", nil) // the triggered run: hello's only one
	if r := cliEnv(t, elsewhere, env, "history", "hello"); r.code != 0 || !strings.Contains(r.stdout, "manual #1") ||
		!strings.Contains(r.stdout, " solo ") || !strings.Contains(r.stdout, " ran ") {
		t.Errorf("history without a config file: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// An unknown job: the daemon's jobs are listed.
	if r := cliEnv(t, elsewhere, env, "history", "nope"); r.code != 1 || !strings.Contains(r.stderr, `unknown job "nope": the jobs are hello`) {
		t.Errorf("history of an unknown job without a config file: exit %d, %q", r.code, r.stderr)
	}
	// Without the token, the daemon refuses to act.
	if r := cliEnv(t, elsewhere, env[:1], "pause", "hello", "-note", "test"); r.code != 1 || !strings.Contains(r.stderr, "401") || strings.Contains(r.stderr, token) {
		t.Errorf("pause without the token: exit %d, %q", r.code, r.stderr)
	}
	// A config file in the working directory is read, as before: this one
	// names no reachable listener (port 0).
	if r := cliEnv(t, dir, nil, "history", "hello"); r.code != 1 || !strings.Contains(r.stderr, "127.0.0.1:0") {
		t.Errorf("history beside a lockcron.hcl: exit %d, %q: want it to read that file", r.code, r.stderr)
	}
}

// Errors without a repeated prefix, and an unknown job lists the known
// ones; validate refuses a port out of range in redis.url and shows the
// URL with only its password hidden.
func TestCommandErrors(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("backup", "@yearly", "1s", `true`)+execJob("report", "@yearly", "1s", `true`))
	for _, args := range [][]string{{"pause", "nope", "-note", "test"}, {"resume", "nope"}, {"trigger", "nope"}, {"history", "nope"}} {
		r := mustCLI(t, 1, dir, append(args, "-config", cfg)...)
		if strings.Count(r.stderr, "scheduler:") != 1 || !strings.Contains(r.stderr, `unknown job "nope"`) ||
			!strings.Contains(r.stderr, "backup, report") {
			t.Errorf("scheduler %q: %q, want one prefix, the job and the known ones", args, r.stderr)
		}
	}

	bad := writeConfig(t, t.TempDir(), `redis {
  url = "redis://app:hunter2-secret@db.internal:99999/0"
}
`+execJob("backup", "@yearly", "1s", `true`))
	// A wrong password: Redis answers, and refuses; the error says so,
	// without the password.
	wrong := writeConfig(t, t.TempDir(), strings.Replace(header(srv.Addr(), "5s"), "redis://", "redis://app:hunter2-secret@", 1)+execJob("backup", "@yearly", "1s", `true`))
	if r := mustCLI(t, 1, dir, "jobs", "-config", wrong); !strings.Contains(r.stderr, "refused us") || strings.Contains(r.stderr, "does not answer") ||
		!strings.Contains(r.stderr, "WRONGPASS") || strings.Contains(r.stderr, "hunter2-secret") {
		t.Errorf("jobs with a wrong password: %q", r.stderr)
	}

	r := mustCLI(t, 1, dir, "validate", "-config", bad)
	if !strings.Contains(r.stderr, `"redis://app:xxxxx@db.internal:99999/0": port "99999" is not a number in 1..65535`) {
		t.Errorf("validate of a port out of range: %q", r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "hunter2-secret") {
		t.Errorf("validate shows the password: %q", r.stderr)
	}
}

// jobs, locks, history and validate read; they do not need the variable
// that admin.token_env names. Nor does trigger through Redis, which sends
// no token: here it reaches Redis, where no replica hears it.
func TestReadOnlyCommandsNeedNoToken(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	text := strings.Replace(header(srv.Addr(), "5s"), `listen = "127.0.0.1:0"`, `listen = "127.0.0.1:0"
  token_env = "LOCKCRON_TEST_ADMIN_TOKEN"`, 1)
	cfg := writeConfig(t, dir, text+execJob("backup", "@yearly", "1s", `true`))
	for _, args := range [][]string{{"validate"}, {"jobs"}, {"locks"}, {"history", "backup"}} {
		r := mustCLI(t, 0, dir, append(args, "-config", cfg)...)
		if strings.Contains(r.stderr, "error") {
			t.Errorf("scheduler %q: %q", args, r.stderr)
		}
	}
	if r := mustCLI(t, 0, dir, "validate", "-config", cfg); !strings.Contains(r.stderr, "LOCKCRON_TEST_ADMIN_TOKEN") {
		t.Errorf("validate does not warn that run needs LOCKCRON_TEST_ADMIN_TOKEN: %q", r.stderr)
	}
	if r := mustCLI(t, 1, dir, "trigger", "backup", "-config", cfg); strings.Contains(r.stderr, "LOCKCRON_TEST_ADMIN_TOKEN") || !strings.Contains(r.stderr, "no replica heard it") {
		t.Errorf("trigger without the token's variable: %q; want it sent through Redis, and heard by none", r.stderr)
	}
}

// With log.json, go-redis's own lines (a pool that cannot dial) are JSON
// too, through the daemon's logger.
func TestRedisLogsStayJSON(t *testing.T) {
	t.Parallel()
	srv, addr := deadRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, withRedis(header(addr, "5s"), `timeout = "1s"`, `connect_timeout = "60s"`)+
		execJob("tick", "@every 1s", "1s", `true`))
	p := startReplicaNoWait(t, dir, cfg, "r1")
	fromRedis := func() bool {
		for _, l := range p.logs.jsonLines() {
			if l.str("@module") == "lockcron.redis" && strings.Contains(l.msg(), "dial") && l.str("@level") == "warn" {
				return true
			}
		}
		return false
	}
	testkit.Eventually(t, 30*time.Second, "a line of go-redis's about dialling, through hclog", fromRedis)
	srv.Restart()
	p.waitLog(t, 30*time.Second, "scheduler started", nil)
	p.signal(t, syscall.SIGTERM)
	if code := p.awaitExit(t, 20*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM", code)
	}
	lines := p.logs.Lines()
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Errorf("not a JSON line: %q", l)
		}
	}
	t.Logf("%d log lines, all JSON", len(lines))
}

// Without Redis, history reads the running daemon's in-memory history
// through its admin API.
func TestHistoryWithoutRedis(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `admin {
  listen = "127.0.0.1:0"
}
log {
  json = true
}
`+execJob("hello", "@every 1s", "1s", `echo hi`))
	p := startReplica(t, dir, cfg, "solo")
	env := []string{"LOCKCRON_ADMIN__LISTEN=" + p.admin}
	var r cliResult
	testkit.Eventually(t, 20*time.Second, "two runs of hello in its history", func() bool {
		r = cliEnv(t, dir, env, "history", "hello", "-config", cfg)
		return r.code == 0 && len(strings.Split(strings.TrimSpace(r.stdout), "\n")) >= 3
	})
	if rows := strings.Split(strings.TrimSpace(r.stdout), "\n"); !strings.HasPrefix(rows[0], "ID") || !strings.Contains(rows[1], " solo ") || !strings.Contains(rows[1], " ran ") {
		t.Errorf("history without redis:\n%s", r.stdout)
	}
	if r := cliEnv(t, dir, env, "history", "nope", "-config", cfg); r.code != 1 || !strings.Contains(r.stderr, `unknown job "nope": the jobs of`) {
		t.Errorf("history of an unknown job without redis: %d %q", r.code, r.stderr)
	}
}

// The spans' resource comes from the standard variables: OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES win over the default service name.
func TestOTelResourceFromEnv(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+`
telemetry {
  traces = "stdout"
}
`+execJob("tick", "@every 1s", "1s", `true`))
	p := startProc(t, "r1", dir, baseEnv("LOCKCRON_REPLICA_ID=r1", "OTEL_SERVICE_NAME=billing-cron",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment=prod,team=payments"), schedBin, "run", "-config", cfg)
	p.waitReady(t)
	p.waitLog(t, 20*time.Second, "run finished", nil)
	p.signal(t, syscall.SIGTERM)
	if code := p.awaitExit(t, 20*time.Second); code != 0 {
		t.Fatalf("exit %d", code)
	}
	out := p.out.String()
	for _, want := range []string{`"Name": "job.run"`, `"Value": "billing-cron"`, `"Key": "deployment.environment"`, `"Value": "prod"`, `"Key": "team"`, `"Value": "r1"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the stdout spans do not hold %s:\n%.3000s", want, out)
		}
	}
	if strings.Contains(out, `"Value": "lockcron"`) {
		t.Errorf("the service name is still lockcron")
	}
}

// Without a telemetry block, the standard OTEL_TRACES_EXPORTER and
// OTEL_METRICS_EXPORTER choose the exporters; a config that names them
// wins over the variables.
func TestOTelExportersFromEnv(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	otel := []string{"OTEL_TRACES_EXPORTER=console", "OTEL_METRICS_EXPORTER=console", "OTEL_METRIC_EXPORT_INTERVAL=200"}
	run := func(t *testing.T, telemetry string) *proc {
		dir := t.TempDir()
		cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+telemetry+execJob("tick", "@every 1s", "1s", `true`))
		p := startProc(t, "r1", dir, baseEnv(append(otel, "LOCKCRON_REPLICA_ID=r1")...), schedBin, "run", "-config", cfg)
		p.waitReady(t)
		p.waitLog(t, 20*time.Second, "run finished", nil)
		return p
	}
	t.Run("from the environment", func(t *testing.T) {
		p := run(t, "")
		testkit.Eventually(t, 20*time.Second, "console metrics on stdout", func() bool { return strings.Contains(p.out.String(), `"lockcron.job.runs"`) })
		if st, _, _ := httpDo(t, "GET", "http://"+p.admin+"/metrics", ""); st != 404 {
			t.Errorf("/metrics: %d, want 404 (the metrics go to the console)", st)
		}
		p.signal(t, syscall.SIGTERM)
		if code := p.awaitExit(t, 20*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if out := p.out.String(); !strings.Contains(out, `"Name":"job.run"`) {
			t.Errorf("no job.run span on stdout:\n%.2000s", out)
		}
	})
	t.Run("named in the config", func(t *testing.T) {
		p := run(t, `
telemetry {
  traces  = "none"
  metrics = "prometheus"
}
`)
		if st, b, _ := httpDo(t, "GET", "http://"+p.admin+"/metrics", ""); st != 200 || !strings.Contains(string(b), "lockcron_job_runs_total") {
			t.Errorf("/metrics: %d, want the config's Prometheus", st)
		}
		p.signal(t, syscall.SIGTERM)
		if code := p.awaitExit(t, 20*time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if out := p.out.String(); strings.Contains(out, `job.run`) || strings.Contains(out, `lockcron.job.runs`) {
			t.Errorf("the variables won over the config:\n%.2000s", out)
		}
	})
}

// A misspelt flag is refused with a suggestion, whether written with one
// dash or two: -confg is not read as -c onfg. -n5 is still -n 5.
func TestMisspeltFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs", "-confg", "x.hcl"}, "unknown flag: --confg (did you mean -config?)"},
		{[]string{"jobs", "--confg", "x.hcl"}, "unknown flag: --confg (did you mean -config?)"},
		{[]string{"jobs", "-jsn"}, "unknown flag: --jsn (did you mean -json?)"},
		{[]string{"history", "x", "--limt", "3"}, "unknown flag: --limt (did you mean -limit?)"},
		{[]string{"validate", "-xyzzy"}, "unknown flag: --xyzzy\n"},
	} {
		r := mustCLI(t, 2, dir, c.args...)
		if !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "onfg") && !strings.Contains(r.stderr, "confg") {
			t.Errorf("scheduler %q: %q, want %q", c.args, r.stderr, c.want)
		}
	}
	// Both forms of the right flags, and shorthands with their value after
	// a space or "=".
	cfg := writeConfig(t, dir, execJob("backup", "@yearly", "1s", `true`))
	for _, args := range [][]string{
		{"validate", "-config", cfg}, {"validate", "--config", cfg}, {"validate", "-config=" + cfg},
		{"validate", "--config=" + cfg}, {"validate", "-c", cfg}, {"validate", "-c=" + cfg},
	} {
		if r := mustCLI(t, 0, t.TempDir(), args...); !strings.Contains(r.stdout, "valid;") {
			t.Errorf("scheduler %q: %q", args, r.stdout)
		}
	}
	// A number right after a shorthand that takes a value is its value.
	if r := cliEnv(t, dir, []string{"LOCKCRON_ADMIN__LISTEN=" + deadAddr(t)}, "history", "backup", "-n5", "-config", cfg); r.code == 2 || strings.Contains(r.stderr, "unknown flag") {
		t.Errorf("history -n5: exit %d, %q", r.code, r.stderr)
	}
}

// Help shows bool flags as --json, without pflag's [=true|false].
func TestHelpWithoutBoolNoise(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{{"--help"}, {"jobs", "--help"}, {"locks", "-h"}, {"history", "--help"}, {"help", "jobs"}} {
		r := mustCLI(t, 0, dir, args...)
		if strings.Contains(r.stdout, "[=") {
			t.Errorf("scheduler %q shows [=...]:\n%s", args, r.stdout)
		}
		if !strings.Contains(r.stdout, "--help ") {
			t.Errorf("scheduler %q does not list --help:\n%s", args, r.stdout)
		}
	}
}

// A misspelt job name gets a suggestion, from the command and from the
// daemon's admin API.
func TestMisspeltJobName(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("backup", "@yearly", "1s", `true`)+execJob("report", "@yearly", "1s", `true`))
	for _, args := range [][]string{{"trigger", "bakup"}, {"pause", "backpu", "-note", "test"}, {"history", "Backup"}} {
		r := mustCLI(t, 1, dir, append(args, "-config", cfg)...)
		if !strings.Contains(r.stderr, `(did you mean "backup"?)`) || !strings.Contains(r.stderr, "backup, report") {
			t.Errorf("scheduler %q: %q, want a suggestion of backup", args, r.stderr)
		}
	}
	if r := mustCLI(t, 1, dir, "trigger", "zzzzzz", "-config", cfg); strings.Contains(r.stderr, "did you mean") {
		t.Errorf("trigger of a name near none: %q", r.stderr)
	}
	p := startReplica(t, dir, cfg, "r1")
	if st, b, _ := httpDo(t, "POST", "http://"+p.admin+"/api/jobs/reprot/pause", ""); st != 404 || !strings.Contains(string(b), `did you mean \"report\"?`) {
		t.Errorf("POST pause of reprot: %d %s", st, b)
	}
}

// validate refuses what run refuses: a lease too short for redis.timeout
// is an error of both, at the same place.
func TestValidateAppliesRunsChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(deadAddr(t), "5s")+"lock {\n  lease = \"6s\"\n}\n"+execJob("backup", "@yearly", "1s", `true`))
	const want = `lockcron.hcl:12:3: lock.lease: redis.timeout (3s) must be shorter than half the lease of 6s`
	v := mustCLI(t, 1, dir, "validate", "-config", cfg)
	r := mustCLI(t, 1, dir, "run", "-config", cfg)
	for name, out := range map[string]string{"validate": v.stderr, "run": r.stderr} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: %q, want %q", name, out, want)
		}
	}
}

// Redis refusing us at start-up (a wrong password, an ACL that denies
// PING) is not retried like an unreachable server: run fails at once and
// says so, without the password.
func TestRunFailsAtOnceWhenRedisRefusesUs(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	srv.Do("ACL", "SETUSER", "limited", "on", ">limited-pw", "-@all")
	for _, c := range []struct{ name, userinfo, want string }{
		{"wrong password", "app:hunter2-secret@", "WRONGPASS"},
		{"ACL", "limited:limited-pw@", "NOPERM"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			text := strings.Replace(header(srv.Addr(), "5s"), "redis://", "redis://"+c.userinfo, 1)
			cfg := writeConfig(t, dir, withRedis(text, `connect_timeout = "5m"`)+execJob("tick", "@every 1s", "1s", `true`))
			p := startReplicaNoWait(t, dir, cfg, "r1")
			if code := p.awaitExit(t, 20*time.Second); code != 1 {
				t.Fatalf("exit %d, want 1", code)
			}
			logs := p.logs.String()
			if !strings.Contains(logs, "scheduler: redis at redis://") || !strings.Contains(logs, "refused us") || !strings.Contains(logs, c.want) {
				t.Errorf("stderr does not say that redis refused us with %s:\n%s", c.want, logs)
			}
			if strings.Contains(logs, "hunter2-secret") || strings.Contains(logs, "limited-pw") {
				t.Errorf("the password is in the log:\n%s", logs)
			}
			if _, ok := p.logs.find("redis unreachable: retrying"); ok {
				t.Errorf("a refusal was retried")
			}
		})
	}
}

// With Redis unreachable, run's first failed attempt says the cause
// (connection refused), not "context deadline exceeded".
func TestRunSaysTheCauseOnTheFirstFailure(t *testing.T) {
	t.Parallel()
	_, addr := deadRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, withRedis(header(addr, "5s"), `connect_timeout = "5m"`)+execJob("tick", "@every 1s", "1s", "true"))
	p := startReplicaNoWait(t, dir, cfg, "r1")
	var first logLine
	p.waitLog(t, 20*time.Second, "redis unreachable: retrying", func(l logLine) bool { first = l; return true })
	if e := first.str("error"); first["attempt"] != float64(1) || !strings.Contains(e, "connection refused") || strings.Contains(e, "deadline") {
		t.Errorf("the first failure: %v, want attempt 1 with connection refused", first)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.awaitExit(t, 20*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM while connecting", code)
	}
}

// The read-only commands fail within about a second on a refused
// connection (redis.timeout is 3s by default), and say why.
func TestReadOnlyCommandsFailFastOnRefusedConnection(t *testing.T) {
	t.Parallel()
	_, addr := deadRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(addr, "5s")+execJob("tick", "@every 1s", "1s", "true"))
	for _, args := range [][]string{{"jobs"}, {"locks"}, {"history", "tick"}} {
		start := time.Now()
		r := mustCLI(t, 1, dir, append(args, "-config", cfg)...)
		if took := time.Since(start); took > 1500*time.Millisecond {
			t.Errorf("scheduler %q took %v, want about a second at most", args, took)
		}
		if want := "redis at redis://" + addr + " is unreachable: "; !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "connection refused") {
			t.Errorf("scheduler %q: %q, want %q and connection refused", args, r.stderr, want)
		}
	}
}

// The counters an alert takes increase() of exist at 0 from the start,
// before their first event: locks lost, renewals and runs by outcome.
func TestCountersExistAtZero(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+"telemetry {\n  metrics = \"prometheus\"\n}\n"+execJob("backup", "@yearly", "1s", `true`))
	p := startReplica(t, dir, cfg, "r1")
	st, b, _ := httpDo(t, "GET", "http://"+p.admin+"/metrics", "")
	if st != 200 {
		t.Fatalf("/metrics: %d", st)
	}
	body := string(b)
	for _, want := range []string{
		`lockcron_lock_lost_total{lockcron_lock="backup",`,
		`lockcron_job_locks_lost_total{lockcron_job="backup",`,
		`lockcron_lock_renewals_total{lockcron_lock="backup",lockcron_outcome="ok",`,
		`lockcron_lock_renewals_total{lockcron_lock="backup",lockcron_outcome="lost",`,
		`lockcron_job_runs_total{lockcron_job="backup",lockcron_outcome="ran",`,
		`lockcron_job_runs_total{lockcron_job="backup",lockcron_outcome="failed",`,
		`lockcron_job_runs_total{lockcron_job="backup",lockcron_outcome="lost_lock",`,
	} {
		found := false
		for _, l := range strings.Split(body, "\n") {
			if strings.HasPrefix(l, want) && strings.HasSuffix(l, "} 0") {
				found = true
			}
		}
		if !found {
			t.Errorf("/metrics has no %s...} 0", want)
		}
	}
}

// The history's error column keeps the start of the message, which says
// what failed, and cuts the rest.
func TestHistoryErrorColumnKeepsTheStart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("fail", "@every 1s", "1s", `echo "the disk is full and the backup cannot be written to /var/backups/db, giving up now" >&2; exit 3`))
	p := startReplica(t, dir, cfg, "r1")
	p.waitLog(t, 20*time.Second, "run finished: job failed", nil)
	r := mustCLI(t, 0, dir, "history", "fail", "-config", cfg)
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(rows) < 2 {
		t.Fatalf("history:\n%s", r.stdout)
	}
	if row := rows[1]; !strings.Contains(row, ` failed `) || !strings.Contains(row, `jobs: exec "sh": exit status 3; stderr: "the disk`) || !strings.HasSuffix(row, "…") {
		t.Errorf("the error column does not keep the start of the message:\n%s", r.stdout)
	}
}

// A failed run's log line carries the run's fencing token, as a
// successful one's does, and JSON logs give durations as Go duration
// strings, not integers of nanoseconds.
func TestFailedRunLogLine(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("fail", "@every 1s", "1s", `exit 3`)+execJob("ok", "@every 1s", "1s", `true`))
	p := startReplica(t, dir, cfg, "r1")
	for _, msg := range []string{"run finished: job failed", "run finished"} {
		var l logLine
		p.waitLog(t, 20*time.Second, msg, func(x logLine) bool { l = x; return true })
		if tok, ok := l["token"].(float64); !ok || tok <= 0 {
			t.Errorf("%q without a token: %v", msg, l)
		}
		if d, err := time.ParseDuration(l.str("duration")); err != nil || d <= 0 {
			t.Errorf("%q: duration %v is not a Go duration string: %v", msg, l["duration"], l)
		}
	}
	for _, l := range p.logs.jsonLines() {
		for _, k := range []string{"duration", "retry_in", "timeout", "waited", "grace"} {
			if _, isNumber := l[k].(float64); isNumber {
				t.Errorf("%s is a number: %v", k, l)
			}
		}
	}
}

// jobs and locks against a daemon on the in-memory backend answer through
// its admin API, as history does: the daemon's own ledgers and locks.
// With no daemon listening, jobs lists the config's jobs without state.
func TestJobsAndLocksWithoutRedis(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `admin {
  listen = "127.0.0.1:0"
}
log {
  json = true
}
`+execJob("hello", "@every 1s", "1s", `sleep 2`))
	p := startReplica(t, dir, cfg, "solo")
	env := []string{"LOCKCRON_ADMIN__LISTEN=" + p.admin}
	// The config names port 0: LOCKCRON_ADMIN__LISTEN tells the commands
	// where the daemon listens.
	var r cliResult
	testkit.Eventually(t, 20*time.Second, "jobs shows hello's last run, and locks its holder", func() bool {
		r = cliEnv(t, dir, env, "jobs", "-config", cfg)
		if r.code != 0 || !strings.Contains(r.stdout, " ran ") {
			return false
		}
		r = cliEnv(t, dir, env, "locks", "-config", cfg)
		return r.code == 0 && strings.Contains(r.stdout, "\nhello ") && strings.Contains(r.stdout, "solo")
	})
	if strings.Contains(r.stderr, "see its admin API") {
		t.Errorf("locks still points at the admin API: %q", r.stderr)
	}
	p.signal(t, syscall.SIGTERM)
	p.awaitExit(t, 20*time.Second)
	// Without a daemon, locks has nothing to show and says why; jobs lists
	// the config's jobs and their next ticks, and says their state is the
	// daemon's.
	if r := cliEnv(t, dir, env, "locks", "-config", cfg); r.code != 1 || !strings.Contains(r.stderr, "no redis configured, and the daemon's admin API at "+p.admin+" does not answer") {
		t.Errorf("scheduler locks without a daemon: exit %d, %q", r.code, r.stderr)
	}
	if r := cliEnv(t, dir, env, "jobs", "-config", cfg); r.code != 0 || !strings.Contains(r.stdout, "\nhello ") || strings.Contains(r.stdout, " ran ") ||
		!strings.Contains(r.stderr, "no daemon answers at "+p.admin+": the config's jobs, without their last outcomes and holders") {
		t.Errorf("scheduler jobs without a daemon: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// A misspelt job name is refused before Redis is asked: the suggestion
// comes even while Redis is down.
func TestMisspeltJobNameWithRedisDown(t *testing.T) {
	t.Parallel()
	_, addr := deadRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(addr, "5s")+execJob("nightly-report", "@daily", "1s", `true`)+execJob("cleanup", "@daily", "1s", `true`))
	for _, args := range [][]string{{"trigger", "nightly-reprot"}, {"history", "nightly-reprot"}} {
		r := mustCLI(t, 1, dir, append(args, "-config", cfg)...)
		if want := `unknown job "nightly-reprot" (did you mean "nightly-report"?): the jobs of ` + cfg + ` are nightly-report, cleanup`; !strings.Contains(r.stderr, want) {
			t.Errorf("scheduler %q: %q, want %q", args, r.stderr, want)
		}
	}
}
