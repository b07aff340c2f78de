package main_test

// Start-up and the commands against a Redis that does not answer: the
// daemon serves /healthz at once, retries Redis with backoff up to
// redis.connect_timeout (with /readyz 503), and exits 1 if Redis never
// answers; the commands exit 1 within redis.timeout.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// withRedis adds settings (key = "value" lines) to the redis block of a
// config made by header.
func withRedis(text string, settings ...string) string {
	i := strings.Index(text, "redis {\n")
	if i < 0 {
		panic("no redis block in the config")
	}
	i += len("redis {\n")
	var b strings.Builder
	for _, s := range settings {
		b.WriteString("  " + s + "\n")
	}
	return text[:i] + b.String() + text[i:]
}

// deadRedis returns the address of a redis-server that the test started
// and killed: nothing listens there, so connections are refused. The
// server can be started again on it with Restart.
func deadRedis(t *testing.T) (*redistest.Server, string) {
	t.Helper()
	srv := redistest.Start(t)
	addr := srv.Addr()
	srv.Kill()
	return srv, addr
}

// retryWarnings returns the daemon's warnings about failed attempts to
// reach Redis, checking that each names Redis at addr, has the next retry
// and the error, and that their attempt numbers are 1, 2, 3...: one
// warning per failed attempt.
func retryWarnings(t *testing.T, p *proc, addr string) []logLine {
	t.Helper()
	var ws []logLine
	for _, l := range p.logs.jsonLines() {
		if l.msg() != "redis unreachable: retrying" {
			continue
		}
		ws = append(ws, l)
		n, _ := l["attempt"].(float64)
		if int(n) != len(ws) {
			t.Errorf("warning %d is about attempt %v: want one warning per attempt, in order: %v", len(ws), l["attempt"], l)
		}
		if l.str("@level") != "warn" {
			t.Errorf("warning at level %q: %v", l.str("@level"), l)
		}
		if l.str("redis") != "redis://"+addr {
			t.Errorf("warning names redis %q, want %q: %v", l.str("redis"), "redis://"+addr, l)
		}
		if d, err := time.ParseDuration(l.str("retry_in")); err != nil || d <= 0 || d > 2*time.Second {
			t.Errorf("warning without a retry_in in (0, 2s]: %v", l)
		}
		if l.str("error") == "" {
			t.Errorf("warning without the error: %v", l)
		}
	}
	return ws
}

// adminAddr waits for the daemon's admin listener and returns its address.
func adminAddr(t *testing.T, p *proc) string {
	t.Helper()
	var l logLine
	p.waitLog(t, 20*time.Second, "admin listening", func(x logLine) bool { l = x; return true })
	addr := l.str("addr")
	if addr == "" {
		t.Fatalf("%s: admin listening line without addr: %v", p.name, l)
	}
	return addr
}

// checkConnecting checks that the admin endpoint answers /healthz, and
// 503 "connecting to redis" on /readyz and the API.
func checkConnecting(t *testing.T, base string) {
	t.Helper()
	if st, b, _ := httpDo(t, "GET", base+"/healthz", ""); st != 200 {
		t.Errorf("/healthz while connecting: %d %s", st, b)
	}
	st, b, _ := httpDo(t, "GET", base+"/readyz", "")
	var ready struct{ Status, Reason string }
	_ = json.Unmarshal(b, &ready)
	if st != 503 || ready.Reason != "connecting to redis" {
		t.Errorf("/readyz while connecting: %d %s, want 503 with reason \"connecting to redis\"", st, b)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/api/jobs"}, {"GET", "/api/locks"}, {"POST", "/api/jobs/tick/trigger"}} {
		if st, b, _ := httpDo(t, c.method, base+c.path, ""); st != 503 || !strings.Contains(string(b), "connecting to redis") {
			t.Errorf("%s %s while connecting: %d %s, want 503 \"connecting to redis\"", c.method, c.path, st, b)
		}
	}
}

// The daemon against an address that refuses connections: /healthz
// answers, /readyz is 503 while it retries, one warning per failed
// attempt, and exit 1 after connect_timeout with Redis's address in the
// error.
func TestRunExitsWhenRedisNeverAnswers(t *testing.T) {
	_, addr := deadRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, withRedis(header(addr, "5s"), `timeout = "1s"`, `connect_timeout = "2s"`)+
		execJob("tick", "@every 1s", "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> tick.log`))
	start := time.Now()
	p := startReplicaNoWait(t, dir, cfg, "r1")
	checkConnecting(t, "http://"+adminAddr(t, p))

	code := p.awaitExit(t, 2*time.Second+10*time.Second)
	took := time.Since(start)
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if took < 2*time.Second {
		t.Errorf("gave up after %v, before connect_timeout (2s)", took)
	}
	logs := p.logs.String()
	want := fmt.Sprintf("scheduler: redis at redis://%s unreachable for 2s: ", addr)
	if !strings.Contains(logs, want) {
		t.Errorf("stderr has no %q:\n%s", want, logs)
	}
	ws := retryWarnings(t, p, addr)
	if len(ws) == 0 {
		t.Errorf("no warning about a failed attempt")
	}
	last, ok := p.logs.find("redis unreachable: giving up")
	switch {
	case !ok:
		t.Errorf("no \"giving up\" line")
	case last["attempts"] != float64(len(ws)+1):
		t.Errorf("gave up after %v attempts, with %d warnings before: %v", last["attempts"], len(ws), last)
	case last.str("redis") != "redis://"+addr:
		t.Errorf("giving up names redis %q: %v", last.str("redis"), last)
	}
	if _, ok := p.logs.find("scheduler started"); ok {
		t.Errorf("the scheduler started without redis")
	}
	if lines := fileLines(t, filepath.Join(dir, "tick.log")); len(lines) != 0 {
		t.Errorf("jobs ran without redis: %q", lines)
	}
}

// The daemon waits for a Redis that comes back within connect_timeout,
// then runs its jobs.
func TestRunWaitsForRedis(t *testing.T) {
	srv, addr := deadRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, withRedis(header(addr, "5s"), `timeout = "1s"`, `connect_timeout = "60s"`)+
		execJob("tick", "@every 1s", "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> tick.log`))
	p := startReplicaNoWait(t, dir, cfg, "r1")
	base := "http://" + adminAddr(t, p)
	// Two failed attempts: it retries.
	p.waitLog(t, 30*time.Second, "redis unreachable: retrying", func(l logLine) bool { return l["attempt"] == float64(2) })
	checkConnecting(t, base)

	srv.Restart()
	p.waitLog(t, 30*time.Second, "scheduler started", nil)
	answered, ok := p.logs.find("redis answers")
	if !ok || answered["attempts"].(float64) < 3 {
		t.Errorf("no \"redis answers\" line after 3 attempts or more: %v", answered)
	}
	ws := retryWarnings(t, p, addr)
	if ok && len(ws) != int(answered["attempts"].(float64))-1 {
		t.Errorf("%d warnings for %v attempts: want one per failed attempt", len(ws), answered["attempts"])
	}
	testkit.Eventually(t, 10*time.Second, "/readyz 200 once connected", func() bool {
		st, _, _ := httpDo(t, "GET", base+"/readyz", "")
		return st == 200
	})
	if st, b, _ := httpDo(t, "GET", base+"/api/jobs", ""); st != 200 {
		t.Errorf("/api/jobs once connected: %d %s", st, b)
	}
	waitRecord(t, 15*time.Second, filepath.Join(dir, "tick.log"), "a run of tick", func(r record) bool { return r.word == "run" })

	p.signal(t, syscall.SIGTERM)
	if code := p.awaitExit(t, 20*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
}

// A stop signal while the daemon waits for Redis ends the wait at once,
// with a clean exit.
func TestStopWhileConnecting(t *testing.T) {
	_, addr := deadRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, withRedis(header(addr, "5s"), `timeout = "1s"`, `connect_timeout = "5m"`)+
		execJob("tick", "@every 1s", "1s", "true"))
	p := startReplicaNoWait(t, dir, cfg, "r1")
	adminAddr(t, p)
	p.waitLog(t, 30*time.Second, "redis unreachable: retrying", nil)
	p.signal(t, syscall.SIGTERM)
	// Well before the 5m connect_timeout; the bound leaves room for one
	// ping in flight (redis.timeout) on a loaded machine.
	if code := p.awaitExit(t, 15*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM while connecting, want 0", code)
	}
	if _, ok := p.logs.find("stop requested while connecting to redis"); !ok {
		t.Errorf("no \"stop requested while connecting to redis\" line")
	}
	if _, ok := p.logs.find("redis unreachable: giving up"); ok {
		t.Errorf("gave up instead of stopping")
	}
}

// The commands against an unreachable Redis exit 1 within redis.timeout
// (1s here) plus a little, naming Redis, well before the 10s that bounds
// their store calls.
func TestCommandsAgainstUnreachableRedis(t *testing.T) {
	_, addr := deadRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, withRedis(header(addr, "5s"), `timeout = "1s"`)+
		execJob("tick", "@every 1s", "1s", "true"))
	for _, args := range [][]string{
		{"jobs"}, {"jobs", "-json"}, {"locks"}, {"locks", "-json"},
		{"trigger", "tick"}, {"pause", "tick", "-note", "test"}, {"resume", "tick"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			start := time.Now()
			r := cli(t, dir, append(args, "-config", cfg)...)
			took := time.Since(start)
			if r.code != 1 {
				t.Errorf("exit %d, want 1\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if took >= 6*time.Second {
				t.Errorf("took %v: want well under the 10s command timeout", took)
			}
			if want := "redis at redis://" + addr; !strings.Contains(r.stderr, want) {
				t.Errorf("stderr does not name %q:\n%s", want, r.stderr)
			}
			if strings.Contains(r.stdout, "triggered") || strings.Contains(r.stdout, "paused") || strings.Contains(r.stdout, "resumed") {
				t.Errorf("stdout reports success: %s", r.stdout)
			}
		})
	}
}

// `scheduler jobs` prints every job it could read, then exits 1 when a
// job's ledger could not be read.
func TestJobsExitsWhenALedgerCannotBeRead(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("good", "@yearly", "1s", "true")+
		execJob("bad", "@yearly", "1s", "true"))
	// The key of bad's ledger (lock "bad", ledger id "bad") holds a string.
	srv.Do("SET", "lockcron:{bad}:ledger:bad", "not a ledger")

	r := mustCLI(t, 1, dir, "jobs", "-config", cfg)
	var good, bad string
	for _, line := range strings.Split(r.stdout, "\n") {
		switch f := strings.Fields(line); {
		case len(f) > 0 && f[0] == "good":
			good = line
		case len(f) > 0 && f[0] == "bad":
			bad = line
		}
	}
	if good == "" || strings.Contains(good, "error") {
		t.Errorf("the readable job is not listed, or with an error: %q\n%s", good, r.stdout)
	}
	if !strings.Contains(bad, "error") {
		t.Errorf("the unreadable job is not listed with its error: %q\n%s", bad, r.stdout)
	}
	for _, want := range []string{"redis at redis://" + srv.Addr(), "1 of 2 job(s)", "bad"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}

	// The same with -json: the whole list, then exit 1.
	r = mustCLI(t, 1, dir, "jobs", "-json", "-config", cfg)
	var views []struct{ Name, Error string }
	if err := json.Unmarshal([]byte(r.stdout), &views); err != nil {
		t.Fatalf("jobs -json: %v\n%s", err, r.stdout)
	}
	if len(views) != 2 || views[0].Error != "" || views[1].Error == "" {
		t.Errorf("jobs -json: %+v", views)
	}
}
