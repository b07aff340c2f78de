package main_test

// The daemon reloads its config without a restart: on SIGHUP, on POST
// /api/reload, through `scheduler reload`, and with watch = true when the
// file changes.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// countLog counts p's JSON log lines with message msg for which match
// holds (every one if match is nil).
func (p *proc) countLog(msg string, match func(logLine) bool) int {
	n := 0
	for _, l := range p.logs.jsonLines() {
		if l.msg() == msg && (match == nil || match(l)) {
			n++
		}
	}
	return n
}

// nextLog waits for a JSON log line with message msg (and for which match
// holds, if match is not nil) beyond the first after ones, and returns it.
func (p *proc) nextLog(t *testing.T, within time.Duration, msg string, after int, match func(logLine) bool) logLine {
	t.Helper()
	var got logLine
	testkit.Eventually(t, within, fmt.Sprintf("%s: log %q number %d", p.name, msg, after+1), func() bool {
		n := 0
		for _, l := range p.logs.jsonLines() {
			if l.msg() != msg || (match != nil && !match(l)) {
				continue
			}
			if n == after {
				got = l
				return true
			}
			n++
		}
		if !p.alive() {
			t.Fatalf("%s exited (%v) before logging %q", p.name, p.cmd.ProcessState, msg)
		}
		return false
	})
	return got
}

// strs reads a list of strings from a JSON log line.
func (l logLine) strs(key string) []string {
	var out []string
	v, _ := l[key].([]any)
	for _, e := range v {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

// replaceConfig writes text to path at once (a new file renamed over it),
// so that the daemon never reads a part of it.
func replaceConfig(t *testing.T, path, text string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// apiJobs reads GET /api/jobs.
func apiJobs(t *testing.T, base string) []daemon.JobJSON {
	t.Helper()
	st, b, _ := httpDo(t, "GET", base+"/api/jobs", "")
	var js []daemon.JobJSON
	if err := json.Unmarshal(b, &js); st != 200 || err != nil {
		t.Fatalf("/api/jobs: %d %v %s", st, err, b)
	}
	return js
}

func jobNamed(js []daemon.JobJSON, name string) (daemon.JobJSON, bool) {
	i := slices.IndexFunc(js, func(j daemon.JobJSON) bool { return j.Name == name })
	if i < 0 {
		return daemon.JobJSON{}, false
	}
	return js[i], true
}

// recordJob is an exec job that appends "run TICK REPLICA ATTEMPT" to
// NAME.log at each run.
func recordJob(name, schedule string) string {
	return execJob(name, schedule, "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> `+name+`.log`)
}

// validateErrors is what `scheduler validate` prints for a broken config:
// its errors (the lines "Error: ..."), without the lines of the file
// under each and the count at the end.
func validateErrors(t *testing.T, dir, cfg string) []string {
	t.Helper()
	r := mustCLI(t, 1, dir, "validate", "-config", cfg)
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-1], "scheduler: ") {
		t.Fatalf("validate printed:\n%s", r.stderr)
	}
	var errs []string
	for _, l := range lines {
		if e, ok := strings.CutPrefix(l, "Error: "); ok {
			errs = append(errs, e)
		}
	}
	return errs
}

func TestReload(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	const token = "reload-e2e-token"
	// public_read: the test reads the API without the token.
	head := strings.Replace(header(srv.Addr(), "5s"), `listen = "127.0.0.1:0"`, `listen = "127.0.0.1:0"
  token  = "`+token+`"
  public_read = true`, 1)
	cfg := writeConfig(t, dir, head+recordJob("a", "@every 1s")+recordJob("b", "@every 1s"))
	aLog, bLog, cLog := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log"), filepath.Join(dir, "c.log")
	p := startReplica(t, dir, cfg, "r1")
	base := "http://" + p.admin
	waitRecord(t, 10*time.Second, aLog, "a run of a", func(record) bool { return true })
	waitRecord(t, 10*time.Second, bLog, "a run of b", func(record) bool { return true })
	before := apiJobs(t, base)
	aBefore, _ := jobNamed(before, "a")
	if aBefore.ConfigDigest != fileSHA256(t, cfg) || aBefore.ConfigLoadedAt == nil || aBefore.Revision == "" {
		t.Errorf("/api/jobs before the reload: %+v, want the file's digest %s, its load time and a's revision", aBefore, fileSHA256(t, cfg))
	}
	// runsAfter are the runs of a job's log with a tick after a time.
	runsAfter := func(path string, after time.Time) []record {
		var out []record
		for _, r := range parseRecords(t, fileLines(t, path)) {
			if r.tick.After(after) {
				out = append(out, r)
			}
		}
		return out
	}

	// 1. SIGHUP after a rewrite: a every 2s, b removed, c added.
	good := head + recordJob("c", "@every 1s") + recordJob("a", "@every 2s")
	replaceConfig(t, cfg, good)
	sent := time.Now()
	p.signal(t, syscall.SIGHUP)
	l := p.nextLog(t, 15*time.Second, "config reloaded", 0, nil)
	reloaded := time.Now()
	t.Logf("SIGHUP → config reloaded: %v", reloaded.Sub(sent).Round(time.Millisecond))
	if l.str("trigger") != "signal" || !slices.Equal(l.strs("added"), []string{"c"}) || !slices.Equal(l.strs("removed"), []string{"b"}) ||
		!slices.Equal(l.strs("changed"), []string{"a"}) || l.str("config_digest") != fileSHA256(t, cfg) {
		t.Errorf("config reloaded: %v", l)
	}
	changes := map[string]string{}
	for _, jl := range p.logs.jsonLines() {
		if jl.msg() == "job reloaded" {
			changes[jl.str("job")] = jl.str("change")
		}
	}
	if fmt.Sprint(changes) != fmt.Sprint(map[string]string{"a": "changed", "b": "removed", "c": "added"}) {
		t.Errorf("job reloaded lines: %v", changes)
	}
	// c runs; b takes no tick after the reload; a's ticks are every 2s.
	testkit.Eventually(t, 15*time.Second, "three ticks of c and two of a after the reload", func() bool {
		return len(runsAfter(cLog, reloaded)) >= 3 && len(runsAfter(aLog, reloaded)) >= 2
	})
	if rs := runsAfter(bLog, reloaded); len(rs) > 0 {
		t.Errorf("b, removed, ran ticks after the reload: %+v", rs)
	}
	as := runsAfter(aLog, reloaded)
	for i, r := range as {
		if r.tick.Unix()%2 != 0 || (i > 0 && r.tick.Sub(as[i-1].tick) != 2*time.Second) {
			t.Errorf("a ran tick %s after the reload: not its new schedule (@every 2s): %+v", r.tick.Format(time.RFC3339), as)
		}
	}
	js := apiJobs(t, base)
	a, okA := jobNamed(js, "a")
	_, okB := jobNamed(js, "b")
	c, okC := jobNamed(js, "c")
	if !okA || okB || !okC || len(js) != 2 || a.Schedule != "@every 2s" || c.Schedule != "@every 1s" {
		t.Errorf("/api/jobs after the reload: %+v", js)
	}
	if a.Revision == "" || a.Revision == aBefore.Revision || a.ConfigDigest != fileSHA256(t, cfg) ||
		a.ConfigLoadedAt == nil || a.ConfigLoadedAt.Before(sent) || a.ConfigLoadedAt.After(reloaded) {
		t.Errorf("/api/jobs a after the reload: revision %q (was %q), config %s loaded at %v; want a new revision, the file's digest %s, loaded between %v and %v",
			a.Revision, aBefore.Revision, a.ConfigDigest, a.ConfigLoadedAt, fileSHA256(t, cfg), sent, reloaded)
	}
	st, b, _ := httpDo(t, "GET", base+"/api/jobs/a", "")
	var detail daemon.JobDetailJSON
	if err := json.Unmarshal(b, &detail); st != 200 || err != nil || detail.ConfigDigest != a.ConfigDigest || detail.Revision != a.Revision {
		t.Errorf("/api/jobs/a: %d %v %s", st, err, b)
	}
	st, b, _ = httpDo(t, "GET", base+"/", "")
	if st != 200 || !strings.Contains(string(b), `data-digest="`+a.ConfigDigest+`"`) || !strings.Contains(string(b), `data-revision="`+a.Revision+`"`) {
		t.Errorf("the status page does not show the config's digest and a's revision: %d", st)
	}
	pid := p.cmd.Process.Pid
	notRestarted := func(when string) {
		t.Helper()
		if !p.alive() || p.cmd.Process.Pid != pid {
			t.Fatalf("%s: the daemon exited: %v", when, p.cmd.ProcessState)
		}
		if n, m := p.countLog("admin listening", nil), p.countLog("scheduler started", nil); n != 1 || m != 1 {
			t.Errorf("%s: the daemon started %d admin listeners and %d schedulers, want 1 each", when, n, m)
		}
	}
	notRestarted("after SIGHUP")

	// 2. Broken files: a syntax error, then an unknown key beside a bad
	// schedule. Each error is logged with its place, as validate prints
	// it; the jobs keep running.
	refusals := 0
	for _, broken := range []string{
		good + "job \"d\" {\n  schedule = \"@every 1s\"\n",
		good + "job \"d\" {\n  schedule = \"every second\"\n  colour   = \"red\"\n  exec { command = [\"true\"] }\n}\n",
	} {
		replaceConfig(t, cfg, broken)
		want := validateErrors(t, dir, cfg)
		errsBefore := p.countLog("config error", nil)
		p.signal(t, syscall.SIGHUP)
		refused := p.nextLog(t, 15*time.Second, "config not reloaded: the file is not valid; the running jobs are kept", refusals, nil)
		refusals++
		at := time.Now()
		var got []string
		for _, jl := range p.logs.jsonLines() {
			if jl.msg() == "config error" {
				got = append(got, jl.str("error"))
			}
		}
		got = got[errsBefore:]
		if !slices.Equal(got, want) {
			t.Errorf("logged errors:\n%s\nwant, as validate prints them:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		for _, e := range got {
			if !strings.HasPrefix(e, cfg+":") {
				t.Errorf("logged error without its place: %q", e)
			}
		}
		if n, _ := refused["problems"].(float64); int(n) != len(want) {
			t.Errorf("refusal: %v", refused)
		}
		waitRecord(t, 10*time.Second, cLog, "a tick of c after the refused reload", func(r record) bool { return r.tick.After(at) })
		notRestarted("after a broken file")
	}
	if js := apiJobs(t, base); len(js) != 2 || js[0].ConfigDigest != a.ConfigDigest {
		t.Errorf("/api/jobs after the refused reloads: %+v, want the jobs and the config of the last valid file", js)
	}

	// 3. POST /api/reload: refused without the token; with it, applied;
	// 422 for a broken file.
	replaceConfig(t, cfg, good+recordJob("d", "@every 1s"))
	for _, tok := range []string{"", "wrong"} {
		st, b, _ := httpDo(t, "POST", base+"/api/reload", tok)
		if st != 401 || strings.Contains(string(b), token) {
			t.Errorf("POST /api/reload with token %q: %d %s, want 401", tok, st, b)
		}
	}
	if _, ok := jobNamed(apiJobs(t, base), "d"); ok {
		t.Errorf("a refused POST /api/reload added d")
	}
	st, b, _ = httpDo(t, "POST", base+"/api/reload", token)
	var res daemon.ReloadJSON
	if err := json.Unmarshal(b, &res); st != 200 || err != nil || res.Status != "applied" || res.Trigger != "api" ||
		!slices.Equal(res.Added, []string{"d"}) || len(res.Removed)+len(res.Changed) != 0 || !slices.Equal(res.Unchanged, []string{"a", "c"}) ||
		res.ConfigDigest != fileSHA256(t, cfg) || res.Path != cfg {
		t.Errorf("POST /api/reload: %d %v %s", st, err, b)
	}
	waitRecord(t, 10*time.Second, filepath.Join(dir, "d.log"), "a run of d", func(record) bool { return true })
	replaceConfig(t, cfg, good+"job \"d\" {\n  schedul = \"@every 1s\"\n  exec { command = [\"true\"] }\n}\n")
	st, b, _ = httpDo(t, "POST", base+"/api/reload", token)
	res = daemon.ReloadJSON{}
	if err := json.Unmarshal(b, &res); st != 422 || err != nil || res.Status != "invalid" || len(res.Errors) == 0 || !strings.HasPrefix(res.Errors[0].Pos, cfg+":") {
		t.Errorf("POST /api/reload of a broken file: %d %v %s", st, err, b)
	}
	if _, ok := jobNamed(apiJobs(t, base), "d"); !ok {
		t.Errorf("d is gone after a refused reload")
	}

	// 4. scheduler reload: through the admin API (the file's listen is
	// port 0: the environment names the daemon's).
	env := []string{"LOCKCRON_ADMIN__LISTEN=" + p.admin}
	replaceConfig(t, cfg, good)
	r := cliEnv(t, dir, env, "reload", "-config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, cfg+": reloaded") || !strings.Contains(r.stdout, "0 added, 1 removed, 0 changed, 2 unchanged") ||
		!strings.Contains(r.stdout, "removed: d") {
		t.Errorf("scheduler reload: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	if _, ok := jobNamed(apiJobs(t, base), "d"); ok {
		t.Errorf("d is still there after scheduler reload removed it")
	}
	r = cliEnv(t, dir, env, "reload", "-json", "-config", cfg)
	res = daemon.ReloadJSON{}
	if err := json.Unmarshal([]byte(r.stdout), &res); r.code != 0 || err != nil || res.Status != "applied" || !slices.Equal(res.Unchanged, []string{"a", "c"}) {
		t.Errorf("scheduler reload -json: exit %d %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	replaceConfig(t, cfg, good+"job \"d\" {\n  colour = \"red\"\n}\n")
	// The log of the daemon comes through a pipe: wait for the line of
	// the last reload (the fourth valid one) before counting.
	p.nextLog(t, 5*time.Second, "config reloaded", 3, nil)
	asked := p.countLog("reloading the config", nil)
	r = cliEnv(t, dir, env, "reload", "-config", cfg)
	want := validateErrors(t, dir, cfg)
	if r.code != 1 || !strings.Contains(r.stderr, strings.Join(want, "\n")) || !strings.Contains(r.stderr, "the daemon was not asked to reload") {
		t.Errorf("scheduler reload of a broken file: exit %d, want 1 with the errors:\n%s\nstderr:\n%s", r.code, strings.Join(want, "\n"), r.stderr)
	}
	if n := p.countLog("reloading the config", nil); n != asked {
		t.Errorf("scheduler reload of a broken file asked the daemon")
	}

	// 5. Settings read at start: a change of redis and admin.listen is
	// reported as needing a restart, and the running ones are kept.
	moved := strings.Replace(strings.Replace(good, "redis://"+srv.Addr(), "redis://127.0.0.1:1", 1), `listen = "127.0.0.1:0"`, `listen = "127.0.0.1:1"`, 1)
	replaceConfig(t, cfg, moved+recordJob("e", "@every 1s"))
	st, b, _ = httpDo(t, "POST", base+"/api/reload", token)
	res = daemon.ReloadJSON{}
	if err := json.Unmarshal(b, &res); st != 200 || err != nil || res.Status != "applied" ||
		!slices.Equal(res.RestartNeeded, []string{"redis", "admin.listen"}) || !slices.Equal(res.Added, []string{"e"}) {
		t.Errorf("POST /api/reload with redis and admin.listen changed: %d %v %s", st, err, b)
	}
	warn := p.nextLog(t, 5*time.Second, "config settings changed that need a restart: their running values are kept", 0, nil)
	if !slices.Equal(warn.strs("settings"), []string{"redis", "admin.listen"}) || warn.str("@level") != "warn" {
		t.Errorf("restart warning: %v", warn)
	}
	at := time.Now()
	waitRecord(t, 10*time.Second, filepath.Join(dir, "e.log"), "a run of e, on the running redis", func(r record) bool { return r.tick.After(at) })
	notRestarted("after a change of redis and admin.listen")
	if strings.Contains(p.logs.String(), token) {
		t.Errorf("the log shows the admin token")
	}

	p.signal(t, syscall.SIGTERM)
	if code := p.awaitExit(t, 10*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
}

func TestReloadOnFileChange(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	head := "watch = true\n" + header(srv.Addr(), "5s")
	cfg := writeConfig(t, dir, head+recordJob("a", "@every 1s"))
	p := startReplica(t, dir, cfg, "r1")
	base := "http://" + p.admin
	p.waitLog(t, 5*time.Second, "watching the config file: a change reloads it", nil)
	waitRecord(t, 10*time.Second, filepath.Join(dir, "a.log"), "a run of a", func(record) bool { return true })

	// A write in place (truncate, then write): one reload, of the whole
	// file.
	writeConfig(t, dir, head+recordJob("a", "@every 1s")+recordJob("b", "@every 1s"))
	l := p.nextLog(t, 15*time.Second, "config reloaded", 0, nil)
	if l.str("trigger") != "watch" || !slices.Equal(l.strs("added"), []string{"b"}) || len(l.strs("removed")) != 0 {
		t.Errorf("config reloaded: %v", l)
	}
	at := time.Now()
	waitRecord(t, 10*time.Second, filepath.Join(dir, "b.log"), "a run of b", func(r record) bool { return r.tick.After(at) })
	if n := p.countLog("config reloaded", nil); n != 1 {
		t.Errorf("%d reloads after one write, want 1", n)
	}
	if js := apiJobs(t, base); len(js) != 2 || js[0].ConfigDigest != fileSHA256(t, cfg) {
		t.Errorf("/api/jobs: %+v", js)
	}

	// A broken write is refused; the jobs keep running.
	writeConfig(t, dir, head+recordJob("a", "@every 1s")+"job \"b\" {\n")
	p.nextLog(t, 15*time.Second, "config not reloaded: the file is not valid; the running jobs are kept", 0, func(l logLine) bool { return l.str("trigger") == "watch" })
	at = time.Now()
	waitRecord(t, 10*time.Second, filepath.Join(dir, "b.log"), "a run of b after the broken write", func(r record) bool { return r.tick.After(at) })
	if !p.alive() {
		t.Fatalf("the daemon exited after a broken write: %v", p.cmd.ProcessState)
	}
}
