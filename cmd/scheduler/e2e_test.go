package main_test

// End-to-end tests of the scheduler binary: TestMain builds it once, and
// each test runs it as real processes (a fleet of `scheduler run`
// replicas, the commands that steer them, `make run`) against a
// redis-server of its own, with a config file of its own in t.TempDir().
// Admin listeners ask for port 0; the address comes from the daemon's
// "admin listening" log line (log { json = true }).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// schedBin is the scheduler binary that TestMain builds.
var schedBin string

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "scheduler-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// go test puts $GOROOT/bin first in PATH, so this is the go that runs
	// the tests. The binary is built without -race, for speed.
	goBin, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the go command is not in PATH:", err)
		return 1
	}
	schedBin = filepath.Join(dir, "scheduler")
	build := exec.Command(goBin, "build", "-o", schedBin, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go build:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: goroutines left behind:", err)
			code = 1
		}
	}
	return code
}

// ---------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------

// baseEnv is this process's environment without what would change the
// config under test (REDIS_URL, LOCKCRON_*) or confuse a child make (a
// jobserver of the make that may run these tests), plus extra.
func baseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case name == "REDIS_URL", strings.HasPrefix(name, "LOCKCRON_"),
			name == "MAKEFLAGS", name == "MFLAGS", name == "MAKELEVEL":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// logBuf collects a process's output, line by line. It is safe for
// concurrent use.
type logBuf struct {
	mu    sync.Mutex
	all   bytes.Buffer
	part  []byte
	lines []string
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.all.Write(p)
	b.part = append(b.part, p...)
	for {
		i := bytes.IndexByte(b.part, '\n')
		if i < 0 {
			break
		}
		b.lines = append(b.lines, string(b.part[:i]))
		b.part = b.part[i+1:]
	}
	return len(p), nil
}

func (b *logBuf) Lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.lines)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.all.String()
}

// logLine is one JSON log line of hclog.
type logLine map[string]any

func (l logLine) str(key string) string {
	s, _ := l[key].(string)
	return s
}

func (l logLine) msg() string { return l.str("@message") }

// jsonLines parses the JSON lines of b, skipping others.
func (b *logBuf) jsonLines() []logLine {
	var out []logLine
	for _, s := range b.Lines() {
		var l logLine
		if json.Unmarshal([]byte(s), &l) == nil {
			out = append(out, l)
		}
	}
	return out
}

// find returns the first JSON line with message msg.
func (b *logBuf) find(msg string) (logLine, bool) {
	for _, l := range b.jsonLines() {
		if l.msg() == msg {
			return l, true
		}
	}
	return nil, false
}

// proc is a scheduler (or make) process started by a test, in a process
// group of its own.
type proc struct {
	name   string
	cmd    *exec.Cmd
	out    *logBuf // stdout
	logs   *logBuf // stderr: the daemon's log
	exited chan struct{}
	admin  string // the admin listener's address, once known
}

func startProc(t *testing.T, name, dir string, env []string, path string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, out: &logBuf{}, logs: &logBuf{}, exited: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Dir = dir
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.logs
	p.cmd.WaitDelay = 5 * time.Second
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s (pid %d) stderr:\n%s", name, p.cmd.Process.Pid, p.logs.String())
			if s := p.out.String(); s != "" {
				t.Logf("%s stdout:\n%s", name, s)
			}
		}
	})
	return p
}

// startReplica runs `scheduler run -config cfg` in dir as replica id and
// waits until its scheduler has started.
func startReplica(t *testing.T, dir, cfg, id string) *proc {
	t.Helper()
	p := startReplicaNoWait(t, dir, cfg, id)
	p.waitReady(t)
	return p
}

func startReplicaNoWait(t *testing.T, dir, cfg, id string) *proc {
	t.Helper()
	return startProc(t, id, dir, baseEnv("LOCKCRON_REPLICA_ID="+id), schedBin, "run", "-config", cfg)
}

// startFleet starts n replicas, r1 to rn, at once, and waits for them.
func startFleet(t *testing.T, dir, cfg string, n int) []*proc {
	t.Helper()
	ps := make([]*proc, n)
	for i := range ps {
		ps[i] = startReplicaNoWait(t, dir, cfg, fmt.Sprintf("r%d", i+1))
	}
	for _, p := range ps {
		p.waitReady(t)
	}
	return ps
}

func byName(ps []*proc, name string) *proc {
	for _, p := range ps {
		if p.name == name {
			return p
		}
	}
	return nil
}

// waitReady waits for the admin listener's address and the scheduler's
// start in the log.
func (p *proc) waitReady(t *testing.T) {
	t.Helper()
	var l logLine
	p.waitLog(t, 20*time.Second, "admin listening", func(x logLine) bool { l = x; return true })
	p.admin = l.str("addr")
	if p.admin == "" {
		t.Fatalf("%s: admin listening line without addr: %v", p.name, l)
	}
	p.waitLog(t, 20*time.Second, "scheduler started", nil)
}

// waitLog waits for a JSON log line with message msg (and, if match is
// not nil, for which match holds).
func (p *proc) waitLog(t *testing.T, within time.Duration, msg string, match func(logLine) bool) {
	t.Helper()
	testkit.Eventually(t, within, fmt.Sprintf("%s: log %q", p.name, msg), func() bool {
		for _, l := range p.logs.jsonLines() {
			if l.msg() == msg && (match == nil || match(l)) {
				return true
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("%s exited (%v) before logging %q", p.name, p.cmd.ProcessState, msg)
		default:
		}
		return false
	})
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v to %s: %v", sig, p.name, err)
	}
}

// awaitExit waits for the process to exit and returns its exit code, or
// fails the test.
func (p *proc) awaitExit(t *testing.T, within time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(within):
		t.Fatalf("%s did not exit within %v", p.name, within)
		return -1
	}
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop ends the process: SIGTERM (a graceful stop), then, after 3s,
// SIGKILL to it, its process group and every process it started (exec
// jobs lead groups of their own).
func (p *proc) stop() {
	if !p.alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return
	case <-time.After(3 * time.Second):
	}
	pid := p.cmd.Process.Pid
	kids := testkit.Descendants(pid)
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for _, k := range kids {
		_ = syscall.Kill(-k, syscall.SIGKILL)
		_ = syscall.Kill(k, syscall.SIGKILL)
	}
	<-p.exited
}

// procStat is what /proc/PID/stat says of a process.
type procStat struct {
	pid, ppid int
	comm      string
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return procStat{}, false
	}
	fields := strings.Fields(s[closing+1:]) // state ppid pgrp ...
	if len(fields) < 2 {
		return procStat{}, false
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return procStat{}, false
	}
	return procStat{pid: pid, ppid: ppid, comm: s[open+1 : closing]}, true
}

// cliResult is what a command of the scheduler did.
type cliResult struct {
	code           int
	stdout, stderr string
}

// cli runs the scheduler command with args in dir and waits for it.
func cli(t *testing.T, dir string, args ...string) cliResult {
	t.Helper()
	return cliEnv(t, dir, nil, args...)
}

// cliEnv is cli with extra environment variables.
func cliEnv(t *testing.T, dir string, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, schedBin, args...)
	cmd.Dir = dir
	cmd.Env = baseEnv(env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("scheduler %q: %v", args, err)
	}
	return cliResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errOut.String()}
}

// mustCLI runs the command and fails the test unless it exits with code.
func mustCLI(t *testing.T, code int, dir string, args ...string) cliResult {
	t.Helper()
	r := cli(t, dir, args...)
	if r.code != code {
		t.Fatalf("scheduler %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, r.code, code, r.stdout, r.stderr)
	}
	return r
}

// ---------------------------------------------------------------------
// Waiting, files, HTTP, Redis
// ---------------------------------------------------------------------

// fileLines returns the complete lines of a file the jobs append to
// (none if it does not exist yet).
func fileLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	} else {
		return nil
	}
	return strings.Split(s, "\n")
}

// record is one line a job wrote: "WORD TICK REPLICA ATTEMPT [TIME|PID]".
type record struct {
	word    string
	tick    time.Time
	replica string
	attempt int
	rest    []string
}

func parseRecords(t *testing.T, lines []string) []record {
	t.Helper()
	var out []record
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 3 {
			t.Fatalf("job wrote %q", l)
		}
		tick, err := time.Parse(time.RFC3339, f[1])
		if err != nil {
			t.Fatalf("job wrote %q: %v", l, err)
		}
		r := record{word: f[0], tick: tick, replica: f[2]}
		if len(f) > 3 {
			if r.attempt, err = strconv.Atoi(f[3]); err != nil {
				r.attempt = 0
			}
			r.rest = f[4:]
		}
		out = append(out, r)
	}
	return out
}

// findRecord returns the first record for which match holds.
func findRecord(t *testing.T, path string, match func(record) bool) (record, bool) {
	t.Helper()
	for _, r := range parseRecords(t, fileLines(t, path)) {
		if match(r) {
			return r, true
		}
	}
	return record{}, false
}

// waitRecord waits for a record for which match holds.
func waitRecord(t *testing.T, within time.Duration, path, what string, match func(record) bool) record {
	t.Helper()
	var r record
	testkit.Eventually(t, within, what, func() bool {
		var ok bool
		r, ok = findRecord(t, path, match)
		return ok
	})
	return r
}

// unixTime reads `date +%s.%N`.
func unixTime(t *testing.T, s string) time.Time {
	t.Helper()
	sec, frac, _ := strings.Cut(s, ".")
	secs, err1 := strconv.ParseInt(sec, 10, 64)
	frac = (frac + "000000000")[:9]
	nanos, err2 := strconv.ParseInt(frac, 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("not a date +%%s.%%N time: %q", s)
	}
	return time.Unix(secs, nanos)
}

var httpc = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// httpDo sends a request and returns the status and body; a transport
// error gives status 0.
func httpDo(t *testing.T, method, url, token string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, []byte(err.Error()), nil
	}
	return resp.StatusCode, b, resp.Header
}

// controlChannel is where trigger requests are published.
const controlChannel = "lockcron:events:control"

// waitSubscribed waits until n replicas listen for fleet requests: a
// trigger published before a replica has subscribed does not reach it.
func waitSubscribed(t *testing.T, srv *redistest.Server, n int64) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d replicas subscribed to %s", n, controlChannel), func() bool {
		v, ok := srv.Do("PUBSUB", "NUMSUB", controlChannel).([]any)
		return ok && len(v) == 2 && v[1] == n
	})
}

// ---------------------------------------------------------------------
// Config files
// ---------------------------------------------------------------------

// header is the top of a config: Redis at addr, admin on a free port,
// JSON logs.
func header(addr, shutdown string) string {
	return fmt.Sprintf(`shutdown_timeout = %q
redis {
  url = %q
}
admin {
  listen = "127.0.0.1:0"
}
log {
  json = true
}
`, shutdown, "redis://"+addr)
}

// execJob is a job block running script with sh -c; extra lines go into
// the job block.
func execJob(name, schedule, grace, script string, extra ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\njob %q {\n  schedule = %q\n", name, schedule)
	for _, e := range extra {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	fmt.Fprintf(&b, "  exec {\n    command = [\"sh\", \"-c\", %s]\n    grace = %q\n  }\n}\n", strconv.Quote(script), grace)
	return b.String()
}

func writeConfig(t *testing.T, dir, text string) string {
	t.Helper()
	path := filepath.Join(dir, "lockcron.hcl")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// ---------------------------------------------------------------------
// 1. Once per tick across three processes
// ---------------------------------------------------------------------

func TestFleetRunsEachTickOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("every-second", "@every 1s", "1s",
		`echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $LOCKCRON_TOKEN" >> ticks.log`))
	ps := startFleet(t, dir, cfg, 3)
	began := time.Now()
	path := filepath.Join(dir, "ticks.log")
	// 15s of ticks: wait for the tick 15s after all three started.
	last := began.Add(15 * time.Second).Truncate(time.Second)
	waitRecord(t, 25*time.Second, path, "the tick 15s after the start", func(r record) bool { return !r.tick.Before(last) })
	stopAt := time.Now()
	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		if code := p.awaitExit(t, 10*time.Second); code != 0 {
			t.Errorf("%s exited with %d after SIGTERM, want 0", p.name, code)
		}
		if _, ok := p.logs.find("stopped"); !ok {
			t.Errorf("%s did not log \"stopped\"", p.name)
		}
	}

	recs := parseRecords(t, fileLines(t, path))
	type run struct {
		record
		token int64
	}
	byTick := make(map[time.Time][]run)
	for _, r := range recs {
		if len(r.rest) != 1 {
			t.Fatalf("bad line: %+v", r)
		}
		tok, err := strconv.ParseInt(r.rest[0], 10, 64)
		if err != nil {
			t.Fatalf("bad token in %+v", r)
		}
		byTick[r.tick] = append(byTick[r.tick], run{r, tok})
	}
	ticks := make([]time.Time, 0, len(byTick))
	for tk := range byTick {
		ticks = append(ticks, tk)
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Before(ticks[j]) })
	spread := make(map[string]int)
	var prevTok int64
	for i, tk := range ticks {
		rs := byTick[tk]
		// A run cut short by the stop at the end may be handed off and
		// run again with a higher attempt; nothing before the stop may
		// run twice.
		if len(rs) > 1 && (tk.Before(stopAt.Add(-time.Second)) || rs[0].attempt == rs[1].attempt) {
			t.Errorf("tick %s ran %d times: %+v", tk.Format(time.RFC3339), len(rs), rs)
		}
		r := rs[0]
		spread[r.replica]++
		if r.attempt != 1 {
			t.Errorf("tick %s: attempt %d, want 1", tk.Format(time.RFC3339), r.attempt)
		}
		if r.token <= prevTok {
			t.Errorf("tick %s: token %d is not above the previous tick's %d", tk.Format(time.RFC3339), r.token, prevTok)
		}
		prevTok = r.token
		if i > 0 && tk.Sub(ticks[i-1]) != time.Second {
			t.Errorf("ticks %s and %s ran, none between", ticks[i-1].Format(time.RFC3339), tk.Format(time.RFC3339))
		}
		if byName(ps, r.replica) == nil {
			t.Errorf("tick %s ran on %q, not one of the replicas", tk.Format(time.RFC3339), r.replica)
		}
	}
	t.Logf("%d ticks from %s to %s; runs per replica: %v", len(ticks), ticks[0].Format(time.RFC3339), ticks[len(ticks)-1].Format(time.RFC3339), spread)
	if len(ticks) < 15 {
		t.Errorf("%d ticks ran in 15s, want at least 15", len(ticks))
	}
	if len(spread) < 2 {
		t.Errorf("all ticks ran on one replica: %v", spread)
	}
}

// ---------------------------------------------------------------------
// 2. SIGTERM hands the running tick to another replica
// ---------------------------------------------------------------------

// longScript records its start (with `date +%s.%N`), and, on SIGTERM, that
// it got it, then exits; otherwise it runs for 10s. It starts its sleep
// before it records the start, so that a SIGTERM sent to the group once the
// start is seen reaches the sleep too (one sent before the sleep exists
// would leave it holding the output open for the whole grace period).
const longScript = `trap 'echo "term $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $(date +%s.%N)" >> runs.log; exit 143' TERM
sleep 10 & pid=$!
echo "start $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $(date +%s.%N)" >> runs.log
wait $pid
echo "end $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> runs.log`

func TestSIGTERMHandsTickToAnotherReplica(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	const shutdown = 5 * time.Second
	cfg := writeConfig(t, dir, header(srv.Addr(), shutdown.String())+execJob("report", "@yearly", "2s", longScript))
	ps := startFleet(t, dir, cfg, 2)
	waitSubscribed(t, srv, 2)
	mustCLI(t, 0, dir, "trigger", "report", "-config", cfg)

	path := filepath.Join(dir, "runs.log")
	first := waitRecord(t, 10*time.Second, path, "the triggered run's start", func(r record) bool { return r.word == "start" })
	if first.attempt != 1 {
		t.Fatalf("first run: %+v, want attempt 1", first)
	}
	victim := byName(ps, first.replica)
	if victim == nil {
		t.Fatalf("the run started on %q, not one of the replicas", first.replica)
	}
	sent := time.Now()
	victim.signal(t, syscall.SIGTERM)

	again := waitRecord(t, 5*time.Second, path, "the survivor's start of the same tick", func(r record) bool {
		return r.word == "start" && r.attempt == 2
	})
	startedAt := unixTime(t, again.rest[0])
	d := startedAt.Sub(sent)
	t.Logf("SIGTERM to %s → %s started the same tick: %v", victim.name, again.replica, d)
	if again.replica == victim.name || !again.tick.Equal(first.tick) {
		t.Errorf("after SIGTERM: %+v; want another replica on tick %s", again, first.tick.Format(time.RFC3339))
	}
	// A handoff, not the lease's expiry: well within the 30s lease, with
	// room for a loaded machine (unloaded it takes about 100ms; the fault
	// suite reports the figure).
	if d > 3*time.Second {
		t.Errorf("the survivor started the tick %v after the SIGTERM, want within 3s (a tenth of the lease)", d)
	}

	// The victim's exec job got SIGTERM, and the victim exits 0 within
	// its shutdown_timeout.
	if _, ok := findRecord(t, path, func(r record) bool { return r.word == "term" && r.replica == victim.name }); !ok {
		t.Errorf("the job on %s did not record a SIGTERM:\n%s", victim.name, strings.Join(fileLines(t, path), "\n"))
	}
	if code := victim.awaitExit(t, shutdown+time.Second-time.Since(sent)); code != 0 {
		t.Errorf("%s exited with %d after SIGTERM, want 0", victim.name, code)
	}
	t.Logf("%s exited %v after its SIGTERM", victim.name, time.Since(sent).Round(time.Millisecond))
	if _, ok := victim.logs.find("run finished: interrupted by the stop; tick handed off"); !ok {
		t.Errorf("%s did not log the handoff", victim.name)
	}
	if _, ok := findRecord(t, path, func(r record) bool { return r.word == "end" }); ok {
		t.Errorf("a run went to its end:\n%s", strings.Join(fileLines(t, path), "\n"))
	}
}

// ---------------------------------------------------------------------
// 3. The commands: validate, jobs, locks, trigger, pause, resume
// ---------------------------------------------------------------------

func TestValidate(t *testing.T) {
	t.Parallel()
	t.Run("example", func(t *testing.T) {
		t.Parallel()
		r := mustCLI(t, 0, "../..", "validate", "-config", "config.example.hcl")
		for _, want := range []string{"config.example.hcl: valid; ", "in-memory", "hello", "@every 10s", "report"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("validate output lacks %q:\n%s", want, r.stdout)
			}
		}
	})
	t.Run("valid", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		// validate does no I/O: no server listens at this address.
		cfg := writeConfig(t, dir, header("127.0.0.1:1", "5s")+
			execJob("alpha", "@every 1s", "1s", "true")+
			execJob("beta", "0 3 * * *", "1s", "true", `time_zone = "Europe/Berlin"`))
		r := mustCLI(t, 0, dir, "validate", "--config", cfg)
		if !strings.Contains(r.stdout, cfg+": valid; 2 job(s); locks: redis redis://127.0.0.1:1") {
			t.Errorf("validate summary:\n%s", r.stdout)
		}
		var rows []string
		for _, l := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(l); len(f) > 0 && (f[0] == "alpha" || f[0] == "beta") {
				rows = append(rows, l)
			}
		}
		if len(rows) != 2 || !strings.Contains(rows[0], "@every 1s") || !strings.Contains(rows[1], "0 3 * * *") {
			t.Errorf("validate does not list both jobs with their schedules:\n%s", r.stdout)
		}
		if r.stderr != "" {
			t.Errorf("validate of a valid file wrote to stderr:\n%s", r.stderr)
		}
	})
	t.Run("broken", func(t *testing.T) {
		t.Parallel()
		r := mustCLI(t, 1, ".", "validate", "-config", "testdata/broken.hcl")
		// Each error with its place, then (HCL's diagnostic writer) the
		// line of the file it is about.
		want := []string{
			`Error: testdata/broken.hcl:5:3: log.level: "loud" is not one of`,
			`  on testdata/broken.hcl line 5, in log:`,
			`   5:   level = "loud"`,
			`Error: testdata/broken.hcl:9:3: job "typo": scheduel: Unsupported argument: An argument named "scheduel" is not expected here. Did you mean "schedule"?`,
			`  on testdata/broken.hcl line 9, in job "typo":`,
			`   9:   scheduel = "@every 1s"`,
			`Error: testdata/broken.hcl:14:3: job "bad-cron": schedule: `,
			`  on testdata/broken.hcl line 14, in job "bad-cron":`,
			`  14:   schedule = "* * *"`,
			`Error: testdata/broken.hcl:17:5: job "bad-cron": exec.command: empty`,
			`  on testdata/broken.hcl line 17, in job "bad-cron":`,
			`  17:     command = []`,
			`scheduler: 4 problem(s) in the config`,
		}
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
			if l != "" {
				lines = append(lines, l)
			}
		}
		if len(lines) != len(want) {
			t.Errorf("validate printed %d lines, want %d:\n%s", len(lines), len(want), r.stderr)
		}
		for i, w := range want {
			if i >= len(lines) || !strings.HasPrefix(lines[i], w) {
				t.Errorf("line %d: want prefix %q\nstderr:\n%s", i+1, w, r.stderr)
			}
		}
		if r.stdout != "" {
			t.Errorf("validate of a broken file wrote to stdout:\n%s", r.stdout)
		}
	})
	t.Run("usage", func(t *testing.T) {
		t.Parallel()
		r := mustCLI(t, 2, ".", "validate", "-config", "testdata/broken.hcl", "extra")
		if !strings.Contains(r.stderr, "unexpected arguments") {
			t.Errorf("stderr: %s", r.stderr)
		}
		mustCLI(t, 2, ".", "trigger", "-config", "testdata/broken.hcl")
		mustCLI(t, 2, ".", "no-such-command")
		mustCLI(t, 2, ".", "jobs", "-no-such-flag")
	})
}

// lockJSON is an entry of `scheduler locks -json`.
type lockJSON struct {
	Name    string
	Kind    string
	Holders []struct {
		Owner string
		Holds int
	}
	Token int64
}

func TestCommandsAgainstFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("tick", "@every 1s", "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> tick.log`)+
		execJob("once", "@yearly", "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $LOCKCRON_TOKEN" >> once.log`)+
		execJob("long", "@yearly", "1s", `trap 'exit 143' TERM; sleep 30 & pid=$!; echo "start $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> long.log; wait $pid`))
	ps := startFleet(t, dir, cfg, 2)
	waitSubscribed(t, srv, 2)
	tickLog, onceLog, longLog := filepath.Join(dir, "tick.log"), filepath.Join(dir, "once.log"), filepath.Join(dir, "long.log")
	waitRecord(t, 5*time.Second, tickLog, "a run of tick", func(record) bool { return true })

	// trigger: a yearly job runs now, once, on one replica.
	triggered := time.Now()
	r := mustCLI(t, 0, dir, "trigger", "once", "-config", cfg)
	if strings.TrimSpace(r.stdout) != "once: triggered; 2 replicas heard it, one runs it" {
		t.Errorf("trigger printed %q", r.stdout)
	}
	once := waitRecord(t, 5*time.Second, onceLog, "the triggered run of once", func(record) bool { return true })
	t.Logf("trigger → run on %s: %v", once.replica, time.Since(triggered).Round(time.Millisecond))
	if once.attempt != 1 || once.tick.Before(triggered.Add(-time.Second).Truncate(time.Second)) {
		t.Errorf("triggered run %+v", once)
	}
	mustCLI(t, 1, dir, "trigger", "no-such-job", "-config", cfg)
	mustCLI(t, 0, dir, "trigger", "long", "-config", cfg)
	long := waitRecord(t, 5*time.Second, longLog, "the triggered run of long", func(record) bool { return true })

	// locks: the held lock and its holder.
	r = mustCLI(t, 0, dir, "locks", "-config", cfg)
	found := false
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && f[0] == "long" {
			found = strings.HasPrefix(f[2], long.replica+":")
		}
	}
	if !found || !strings.HasPrefix(r.stdout, "LOCK") {
		t.Errorf("locks does not show long held by %s:\n%s", long.replica, r.stdout)
	}
	r = mustCLI(t, 0, dir, "locks", "-json", "-config", cfg)
	var ls []lockJSON
	if err := json.Unmarshal([]byte(r.stdout), &ls); err != nil {
		t.Fatalf("locks -json: %v\n%s", err, r.stdout)
	}
	found = false
	for _, l := range ls {
		if l.Name == "long" {
			found = len(l.Holders) == 1 && strings.HasPrefix(l.Holders[0].Owner, long.replica+":") && l.Holders[0].Holds == 1 && l.Token > 0
		}
	}
	if !found {
		t.Errorf("locks -json does not show long held once by %s:\n%s", long.replica, r.stdout)
	}

	// jobs: next fire times and the last outcome.
	r = mustCLI(t, 0, dir, "jobs", "-config", cfg)
	rfc := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	for _, l := range strings.Split(r.stdout, "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "tick" {
			if n := len(rfc.FindAllString(l, -1)); n != 4 || !strings.Contains(l, " ran ") || !strings.HasSuffix(l, "false") {
				t.Errorf("jobs row of tick: want 3 next times, the last done tick, outcome ran, not paused:\n%s", l)
			}
		}
	}
	jobs := jobsJSON(t, dir, cfg)
	if len(jobs) != 3 || jobs[0].Name != "tick" || jobs[1].Name != "once" || jobs[2].Name != "long" {
		t.Fatalf("jobs -json: %+v", jobs)
	}
	now := time.Now()
	if n := jobs[0].Next; len(n) != 3 || n[0].Before(now.Add(-time.Second)) || n[1].Sub(n[0]) != time.Second || n[2].Sub(n[1]) != time.Second {
		t.Errorf("tick's next fire times: %v", n)
	}
	if f := jobs[0].Fleet; f.Outcome != "ran" || f.DoneTick == nil || jobs[0].Paused {
		t.Errorf("tick's fleet state: %+v, paused %v", f, jobs[0].Paused)
	}
	if jobs[1].Fleet.Triggers != 1 || len(jobs[1].Next) != 3 || jobs[1].Next[0].Month() != time.January {
		t.Errorf("once: %+v", jobs[1])
	}

	// pause: no run of tick on any replica for 3 ticks.
	r = mustCLI(t, 0, dir, "pause", "tick", "-note", "maintenance", "-config", cfg)
	paused := time.Now()
	if strings.TrimSpace(r.stdout) != "tick: paused" {
		t.Errorf("pause printed %q", r.stdout)
	}
	// Each replica counts the ticks as paused: wait until both have
	// handled three ticks after the pause.
	third := paused.Truncate(time.Second).Add(3 * time.Second)
	for _, p := range ps {
		testkit.Eventually(t, 8*time.Second, p.name+": three ticks paused", func() bool {
			var js []daemon.JobJSON
			st, b, _ := httpDo(t, "GET", "http://"+p.admin+"/api/jobs", "")
			if st != 200 || json.Unmarshal(b, &js) != nil || len(js) == 0 || js[0].LastTick == nil {
				return false
			}
			return !js[0].LastTick.Before(third) && js[0].LastOutcome == "paused"
		})
	}
	for _, rec := range parseRecords(t, fileLines(t, tickLog)) {
		if rec.tick.After(paused) {
			t.Errorf("tick %s ran on %s after the pause at %s", rec.tick.Format(time.RFC3339), rec.replica, paused.Format(time.RFC3339Nano))
		}
	}
	jobs = jobsJSON(t, dir, cfg)
	if !jobs[0].Paused || jobs[1].Paused {
		t.Errorf("jobs -json after pause tick: paused %v, %v; want true, false", jobs[0].Paused, jobs[1].Paused)
	}
	r = mustCLI(t, 0, dir, "jobs", "-config", cfg)
	if !regexp.MustCompile(`(?m)^tick .* by cli:\S+ at \S+: maintenance$`).MatchString(r.stdout) {
		t.Errorf("jobs does not show tick paused:\n%s", r.stdout)
	}

	// resume: it runs again.
	mustCLI(t, 0, dir, "resume", "tick", "-config", cfg)
	resumed := time.Now()
	next := waitRecord(t, 4*time.Second, tickLog, "a run of tick after resume", func(r record) bool { return r.tick.After(resumed) })
	t.Logf("resume → tick %s ran on %s", next.tick.Format(time.RFC3339), next.replica)
	if jobs := jobsJSON(t, dir, cfg); jobs[0].Paused {
		t.Errorf("jobs -json after resume: tick still paused")
	}

	// The triggered job ran once, on one replica.
	if lines := fileLines(t, onceLog); len(lines) != 1 {
		t.Errorf("the triggered job ran %d times:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}

func jobsJSON(t *testing.T, dir, cfg string) []daemon.JobJSON {
	t.Helper()
	r := mustCLI(t, 0, dir, "jobs", "-json", "-config", cfg)
	var js []daemon.JobJSON
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil {
		t.Fatalf("jobs -json: %v\n%s", err, r.stdout)
	}
	return js
}

// ---------------------------------------------------------------------
// 4. make run
// ---------------------------------------------------------------------

func TestMakeRun(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Fatal("make not in PATH: install it (Debian/Ubuntu: apt-get install -y make)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// No Redis; the example's admin port (9090) may be taken: ask for any.
	env := baseEnv("LOCKCRON_ADMIN__LISTEN=127.0.0.1:0")
	mk := startProc(t, "make run", root, env, "make", "run")
	// The log says where the status page is.
	admin := regexp.MustCompile(`lockcron: admin listening: addr=(127\.0\.0\.1:\d+) status_page=(\S+)`)
	var addr, page string
	testkit.Eventually(t, 90*time.Second, "make run: admin listening, with the status page's URL", func() bool {
		if !mk.alive() {
			t.Fatalf("make run exited: %v", mk.cmd.ProcessState)
		}
		if m := admin.FindStringSubmatch(mk.logs.String() + mk.out.String()); m != nil {
			addr, page = m[1], m[2]
			return true
		}
		return false
	})
	if page != "http://"+addr+"/" {
		t.Errorf("make run logs the status page at %q, want http://%s/", page, addr)
	}
	testkit.Eventually(t, 5*time.Second, "/readyz 200", func() bool {
		st, _, _ := httpDo(t, "GET", "http://"+addr+"/readyz", "")
		return st == 200
	})
	// The example job runs every 10s and prints a line, which is logged.
	testkit.Eventually(t, 25*time.Second, "the example job's output", func() bool {
		return strings.Contains(mk.logs.String()+mk.out.String(), `line="hello from `)
	})
	// The status page at / shows the job and its run, from the in-memory
	// history.
	testkit.Eventually(t, 10*time.Second, "the status page shows hello's run", func() bool {
		st, b, _ := httpDo(t, "GET", page, "")
		return st == 200 && strings.Contains(string(b), `data-job="hello"`) && strings.Contains(string(b), `data-outcome="ran"`)
	})
	// The README's next commands, typed in the repository's root without
	// -config: they ask the daemon at LOCKCRON_ADMIN__LISTEN (by default
	// 127.0.0.1:9090, make run's).
	at := []string{"LOCKCRON_ADMIN__LISTEN=" + addr}
	if r := cliEnv(t, root, at, "history", "hello"); r.code != 0 || !strings.Contains(r.stdout, " ran ") {
		t.Errorf("history hello after make run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cliEnv(t, root, at, "trigger", "hello"); r.code != 0 || r.stdout != "hello: triggered; 1 replica heard it, one runs it\n" {
		t.Errorf("trigger hello after make run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// The in-memory backend's fleet is this one replica, live, on the
	// Replicas page and in `scheduler replicas`.
	if r := cliEnv(t, root, at, "replicas"); r.code != 0 || len(strings.Split(strings.TrimSpace(r.stdout), "\n")) != 2 || !strings.Contains(r.stdout, " live ") || !regexp.MustCompile(`\shello[\s,]`).MatchString(r.stdout) {
		t.Errorf("replicas after make run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if st, b, _ := httpDo(t, "GET", "http://"+addr+"/replicas", ""); st != 200 || strings.Count(string(b), "data-replica=") != 1 || !strings.Contains(string(b), `data-state="live"`) {
		t.Errorf("the Replicas page after make run: %d\n%s", st, b)
	}
	var sched int
	for _, pid := range testkit.Descendants(mk.cmd.Process.Pid) {
		if st, ok := readStat(pid); ok && st.comm == "scheduler" {
			sched = pid
		}
	}
	if sched == 0 {
		t.Fatal("no scheduler process under make")
	}
	if err := syscall.Kill(sched, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := mk.awaitExit(t, 15*time.Second); code != 0 {
		t.Errorf("make run exited with %d after SIGTERM to the scheduler, want 0", code)
	}
	logs := mk.logs.String() + mk.out.String()
	if !regexp.MustCompile(`(?m)\] +lockcron: stopped$`).MatchString(logs) {
		t.Errorf("the scheduler did not log \"stopped\":\n%s", logs)
	}
	if !strings.Contains(logs, "no redis configured: running on the in-memory lock backend") {
		t.Errorf("the scheduler did not log that it runs on the in-memory backend:\n%s", logs)
	}
}

// ---------------------------------------------------------------------
// 5. The admin endpoint
// ---------------------------------------------------------------------

func TestAdminEndpoint(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	const token = "e2e-token"
	text := strings.Replace(header(srv.Addr(), "10s"), `listen = "127.0.0.1:0"`, `listen = "127.0.0.1:0"
  token  = "`+token+`"`, 1) +
		execJob("quick", "@every 1s", "1s", "true") +
		// Takes 1s to stop after SIGTERM.
		execJob("slow", "@yearly", "5s", `trap 'sleep 1; echo "term $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> slow.log; exit 0' TERM
sleep 30 & pid=$!
echo "start $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> slow.log
wait $pid`)
	cfg := writeConfig(t, dir, text)
	p := startReplica(t, dir, cfg, "r1")
	waitSubscribed(t, srv, 1)
	base := "http://" + p.admin

	if st, b, _ := httpDo(t, "GET", base+"/healthz", ""); st != 200 {
		t.Errorf("/healthz: %d %s", st, b)
	}
	if st, b, _ := httpDo(t, "GET", base+"/readyz", ""); st != 200 {
		t.Errorf("/readyz while running: %d %s", st, b)
	}

	// The API needs the token (the single admin.token has scope admin);
	// the probes and /metrics do not.
	for _, tc := range []struct {
		name, path, token string
		want              int
	}{
		{"no token", "/api/jobs/slow/trigger", "", 401},
		{"wrong token", "/api/jobs/slow/trigger", "nope", 401},
		{"unknown job", "/api/jobs/nope/trigger", token, 404},
		{"unknown action", "/api/jobs/slow/explode", token, 404},
		{"trigger", "/api/jobs/slow/trigger", token, 200},
		{"GET without a token", "GET /api/jobs", "", 401},
		{"GET with a wrong token", "GET /api/locks", "nope", 401},
	} {
		method, path := "POST", tc.path
		if m, p, ok := strings.Cut(tc.path, " "); ok {
			method, path = m, p
		}
		st, b, h := httpDo(t, method, base+path, tc.token)
		if st != tc.want {
			t.Errorf("%s: %s %s: %d %s, want %d", tc.name, method, path, st, b, tc.want)
		}
		if st == 401 && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: 401 without a WWW-Authenticate: Bearer header", tc.name)
		}
		if strings.Contains(string(b), token) {
			t.Errorf("%s: the response shows the token: %s", tc.name, b)
		}
	}
	slowLog := filepath.Join(dir, "slow.log")
	waitRecord(t, 5*time.Second, slowLog, "the triggered run of slow", func(r record) bool { return r.word == "start" })
	if lines := fileLines(t, slowLog); len(lines) != 1 {
		t.Errorf("the unauthorized triggers ran the job: %q", lines)
	}

	// /api/jobs and /api/locks.
	var js []daemon.JobJSON
	testkit.Eventually(t, 5*time.Second, "/api/jobs: quick ran", func() bool {
		st, b, _ := httpDo(t, "GET", base+"/api/jobs", token)
		js = nil
		return st == 200 && json.Unmarshal(b, &js) == nil && len(js) == 2 && js[0].LastOutcome == "ran"
	})
	if js[0].Name != "quick" || js[0].Fleet.Outcome != "ran" || js[0].Fleet.FinishedBy == "" || len(js[0].Next) != 3 {
		t.Errorf("/api/jobs quick: %+v", js[0])
	}
	if js[1].Name != "slow" || !js[1].Fleet.Held || js[1].Fleet.Triggers != 1 {
		t.Errorf("/api/jobs slow: %+v", js[1])
	}
	st, b, _ := httpDo(t, "GET", base+"/api/locks", token)
	var ls []lockJSON
	if err := json.Unmarshal(b, &ls); st != 200 || err != nil {
		t.Fatalf("/api/locks: %d %v %s", st, err, b)
	}
	if i := slices.IndexFunc(ls, func(l lockJSON) bool { return l.Name == "slow" }); i < 0 || len(ls[i].Holders) != 1 || !strings.HasPrefix(ls[i].Holders[0].Owner, "r1:") {
		t.Errorf("/api/locks does not show slow held by r1: %s", b)
	}

	// /metrics: outcomes, lock wait and run duration of quick.
	st, b, _ = httpDo(t, "GET", base+"/metrics", "")
	if st != 200 {
		t.Fatalf("/metrics: %d %s", st, b)
	}
	m := string(b)
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"lockcron_job_runs_total", []string{`lockcron_job="quick"`, `lockcron_outcome="ran"`}},
		{"lockcron_job_wait_duration_seconds_count", []string{`lockcron_job="quick"`, `lockcron_outcome="acquired"`}},
		{"lockcron_job_run_duration_seconds_count", []string{`lockcron_job="quick"`, `lockcron_outcome="ran"`}},
		{"lockcron_job_lateness_seconds_count", []string{`lockcron_job="quick"`}},
	} {
		if v, ok := testkit.Metric(m, c.name, c.labels...); !ok || v < 1 {
			t.Errorf("/metrics: %s{%s} = %v (found %v), want ≥ 1", c.name, strings.Join(c.labels, ","), v, ok)
		}
	}

	// The graceful stop: /readyz turns 503 while the process still runs
	// (the slow job takes 1s to stop).
	p.signal(t, syscall.SIGTERM)
	sent := time.Now()
	var during time.Duration
	testkit.Eventually(t, 3*time.Second, "/readyz 503 during the stop", func() bool {
		st, _, _ := httpDo(t, "GET", base+"/readyz", "")
		if st == 503 && p.alive() {
			during = time.Since(sent)
			return true
		}
		if !p.alive() {
			t.Fatalf("the daemon exited (%v) before /readyz said 503", p.cmd.ProcessState)
		}
		return false
	})
	t.Logf("SIGTERM → /readyz 503: %v", during.Round(time.Millisecond))
	if st, _, _ := httpDo(t, "GET", base+"/healthz", ""); st != 200 && p.alive() {
		t.Errorf("/healthz during the stop: %d, want 200", st)
	}
	if code := p.awaitExit(t, 10*time.Second); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
	t.Logf("SIGTERM → exit: %v", time.Since(sent).Round(time.Millisecond))
	if _, ok := findRecord(t, slowLog, func(r record) bool { return r.word == "term" }); !ok {
		t.Errorf("the slow job did not get SIGTERM: %q", fileLines(t, slowLog))
	}
	if st, _, _ := httpDo(t, "GET", base+"/healthz", ""); st != 0 {
		t.Errorf("the admin listener still answers after the exit: %d", st)
	}
}

// The duration histograms (the scheduler's run duration, lock wait and
// lateness, and the lock package's wait and hold) are in seconds, and most
// of those durations are well under a second: their buckets must resolve
// them. The OpenTelemetry SDK's default boundaries (0, 5, 10, 25, ...
// 10000) are made for milliseconds; in seconds they put every value under
// 5s into one bucket.
func TestMetricsHistogramBucketsFitSeconds(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("quick", "@every 1s", "1s", "true"))
	p := startReplica(t, dir, cfg, "r1")
	var m string
	testkit.Eventually(t, 5*time.Second, "a run of quick in /metrics", func() bool {
		_, b, _ := httpDo(t, "GET", "http://"+p.admin+"/metrics", "")
		m = string(b)
		v, ok := testkit.Metric(m, "lockcron_job_run_duration_seconds_count", `lockcron_job="quick"`, `lockcron_outcome="ran"`)
		return ok && v >= 1
	})
	le := regexp.MustCompile(`le="([^"]+)"`)
	for _, name := range []string{
		"lockcron_job_run_duration_seconds", "lockcron_job_wait_duration_seconds", "lockcron_job_lateness_seconds",
		"lockcron_lock_wait_duration_seconds", "lockcron_lock_hold_duration_seconds",
	} {
		var bounds []float64
		for _, l := range strings.Split(m, "\n") {
			if !strings.HasPrefix(l, name+"_bucket{") {
				continue
			}
			if mm := le.FindStringSubmatch(l); mm != nil && mm[1] != "+Inf" {
				if v, err := strconv.ParseFloat(mm[1], 64); err == nil && !slices.Contains(bounds, v) {
					bounds = append(bounds, v)
				}
			}
		}
		if len(bounds) == 0 {
			t.Errorf("/metrics has no %s histogram", name)
			continue
		}
		sort.Float64s(bounds)
		var sub []float64
		for _, v := range bounds {
			if v > 0 && v < 1 {
				sub = append(sub, v)
			}
		}
		if len(sub) < 3 {
			t.Errorf("%s has bucket boundaries %v: fewer than 3 between 0 and 1s, so sub-second durations are not resolved", name, bounds)
		}
	}
}

// ---------------------------------------------------------------------
// 6. A second signal stops at once
// ---------------------------------------------------------------------

func TestSecondSignalStopsAtOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	// The job ignores SIGTERM; its grace (15s) and the shutdown_timeout
	// (20s) are long, so only the second signal can end the stop early.
	cfg := writeConfig(t, dir, header(srv.Addr(), "20s")+execJob("stubborn", "@yearly", "15s",
		`trap 'echo "term $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $$" >> stub.log' TERM
echo "start $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $$" >> stub.log
while true; do sleep 0.2; done`))
	ps := startFleet(t, dir, cfg, 2)
	waitSubscribed(t, srv, 2)
	stubLog := filepath.Join(dir, "stub.log")
	// The jobs' process groups ($$ leads its group) do not outlive the
	// test, even if their daemon exits first.
	t.Cleanup(func() {
		for _, r := range parseRecords(t, fileLines(t, stubLog)) {
			if r.word != "start" || len(r.rest) == 0 {
				continue
			}
			if pid, err := strconv.Atoi(r.rest[0]); err == nil {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	mustCLI(t, 0, dir, "trigger", "stubborn", "-config", cfg)
	first := waitRecord(t, 5*time.Second, stubLog, "the triggered run's start", func(r record) bool { return r.word == "start" })
	victim := byName(ps, first.replica)
	survivor := ps[0]
	if survivor == victim {
		survivor = ps[1]
	}
	pgid, _ := strconv.Atoi(first.rest[0])

	// First SIGTERM: the job gets SIGTERM, ignores it, and the daemon
	// keeps waiting for it, holding the lock.
	victim.signal(t, syscall.SIGTERM)
	waitRecord(t, 3*time.Second, stubLog, "the job's SIGTERM", func(r record) bool { return r.word == "term" && r.replica == victim.name })
	victim.waitLog(t, time.Second, "stop requested: graceful stop", nil)
	select {
	case <-victim.exited:
		t.Fatalf("%s exited (%v) on the first SIGTERM while its job ignores SIGTERM", victim.name, victim.cmd.ProcessState)
	case <-time.After(time.Second):
	}
	if n := srv.Do("EXISTS", "lockcron:{stubborn}"); n != int64(1) {
		t.Errorf("the lock is not held during the graceful stop (EXISTS = %v)", n)
	}
	if _, ok := findRecord(t, stubLog, func(r record) bool { return r.word == "start" && r.attempt == 2 }); ok {
		t.Errorf("another replica took the tick while the first still ran it")
	}

	// Second SIGTERM: the lock is released at once, the survivor takes the
	// tick, and the daemon exits with 1.
	second := time.Now()
	victim.signal(t, syscall.SIGTERM)
	again := waitRecord(t, 2*time.Second, stubLog, "the survivor's start after the second SIGTERM", func(r record) bool {
		return r.word == "start" && r.attempt == 2
	})
	t.Logf("second SIGTERM → %s started the tick: %v", again.replica, time.Since(second).Round(time.Millisecond))
	if again.replica != survivor.name || !again.tick.Equal(first.tick) {
		t.Errorf("after the second SIGTERM: %+v; want %s on tick %s", again, survivor.name, first.tick.Format(time.RFC3339))
	}
	victim.waitLog(t, time.Second, "second stop request: stopping at once", nil)
	select {
	case <-victim.exited:
		t.Logf("second SIGTERM → exit: %v", time.Since(second).Round(time.Millisecond))
		if code := victim.cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("exit %d after a second SIGTERM, want 1", code)
		}
		if syscall.Kill(-pgid, 0) == nil {
			t.Logf("note: the job's process group %d outlives its daemon (it ignores SIGTERM and its SIGKILL was due after the grace)", pgid)
		}
	case <-time.After(3 * time.Second):
		t.Errorf("%s still runs 3s after the second SIGTERM (exec grace 15s, shutdown_timeout 20s): the second signal did not stop it at once", victim.name)
	}
}
