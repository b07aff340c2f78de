package execjob

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/internal/runtest"
)

// logSink collects the JSON lines of an hclog.Logger. It is safe for
// concurrent use.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func newLogSink() (*logSink, hclog.Logger) {
	s := &logSink{}
	return s, hclog.New(&hclog.LoggerOptions{Output: s, JSONFormat: true, Level: hclog.Debug})
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// entries returns the complete entries logged so far.
func (s *logSink) entries(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	data := slices.Clone(s.buf.Bytes())
	s.mu.Unlock()
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var out []map[string]any
	for line := range bytes.Lines(data) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %.200q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// waitFor polls the log until an entry satisfies match, and returns it.
func (s *logSink) waitFor(t *testing.T, what string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, e := range s.entries(t) {
			if match(e) {
				return e
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log entry for %s within 10s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling, bounded by deadline
	}
}

// lines returns the output lines logged for stream, in order, with partial
// pieces of a long line joined.
func lines(t *testing.T, entries []map[string]any, stream string) []string {
	t.Helper()
	var out []string
	var partial strings.Builder
	for _, e := range entries {
		if e["@message"] != "output" || e["stream"] != stream {
			continue
		}
		line, _ := e["line"].(string)
		if e["partial"] == true {
			partial.WriteString(line)
			continue
		}
		out = append(out, partial.String()+line)
		partial.Reset()
	}
	return out
}

// childPID waits for an output line "child <pid>" and returns the pid.
func childPID(t *testing.T, sink *logSink) int {
	t.Helper()
	e := sink.waitFor(t, "child pid", func(e map[string]any) bool {
		l, _ := e["line"].(string)
		return strings.HasPrefix(l, "child ")
	})
	pid, err := strconv.Atoi(strings.TrimPrefix(e["line"].(string), "child "))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// processGone reports whether pid has exited; a zombie counts as exited
// (orphans are not reaped where init does not reap them).
func processGone(pid int) bool {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	i := bytes.LastIndexByte(b, ')') // "pid (comm) S ..."
	return i >= 0 && i+2 < len(b) && (b[i+2] == 'Z' || b[i+2] == 'X')
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !processGone(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("process %d still running 5s after Run returned", pid)
		}
		time.Sleep(5 * time.Millisecond) // polling, bounded by deadline
	}
}

// runAsync starts e.Run(ctx) and returns a channel for its result.
func runAsync(ctx context.Context, e *Exec) <-chan error {
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	return done
}

func waitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(runtest.Safety):
		t.Fatal("Run did not return")
		return nil
	}
}

func TestExecEnv(t *testing.T) {
	t.Setenv("LOCKCRON_JOB", "inherited")        // the run's info wins
	t.Setenv("GREETING", "inherited")            // Env wins
	t.Setenv("LOCKCRON_PARAM_DATE", "inherited") // a run gets its own parameters only
	sink, log := newLogSink()
	e := &Exec{
		Command: []string{"env"},
		Env:     map[string]string{"GREETING": "hello world", "EMPTY": ""},
		Logger:  log,
	}
	info := runtest.Info
	info.Params = map[string]string{"customer": "42", "report_date": "2026-11-27 12:00"}
	if err := e.Run(jobs.WithInfo(t.Context(), info)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	env := map[string][]string{}
	for _, kv := range lines(t, sink.entries(t), "stdout") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = append(env[k], v)
	}
	for k, want := range map[string]string{
		"LOCKCRON_JOB":               "backup",
		"LOCKCRON_TICK":              runtest.Tick,
		"LOCKCRON_TOKEN":             "1740798300000042",
		"LOCKCRON_REPLICA":           "replica-1",
		"LOCKCRON_ATTEMPT":           "2",
		"LOCKCRON_PARAM_CUSTOMER":    "42",
		"LOCKCRON_PARAM_REPORT_DATE": "2026-11-27 12:00",
		"GREETING":                   "hello world",
		"EMPTY":                      "",
		"PATH":                       os.Getenv("PATH"),
	} {
		if got := env[k]; !slices.Equal(got, []string{want}) {
			t.Errorf("%s = %q, want [%q]", k, got, want)
		}
	}
	if _, ok := env["LOCKCRON_LOCK"]; ok {
		t.Error("LOCKCRON_LOCK is set; Info.Env has no lock")
	}
	if v, ok := env["LOCKCRON_PARAM_DATE"]; ok {
		t.Errorf("LOCKCRON_PARAM_DATE = %q, inherited; the run has no such parameter", v)
	}
}

// Unset keeps inherited variables (the daemon's secrets) from the process.
func TestExecUnset(t *testing.T) {
	t.Setenv("REDIS_URL", "redis://:s3cret@redis:6379")
	t.Setenv("KEEP_ME", "yes")
	sink, log := newLogSink()
	e := &Exec{Command: []string{"env"}, Unset: []string{"REDIS_URL"}, Logger: log}
	if err := e.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := strings.Join(lines(t, sink.entries(t), "stdout"), "\n")
	if strings.Contains(out, "s3cret") || !strings.Contains(out, "KEEP_ME=yes") {
		t.Fatalf("environment: want KEEP_ME and no REDIS_URL:\n%s", out)
	}
}

func TestExecEnvNoInfo(t *testing.T) {
	sink, log := newLogSink()
	e := &Exec{Command: []string{"sh", "-c", `echo "$LOCKCRON_TOKEN $LOCKCRON_ATTEMPT"`}, Logger: log}
	if err := e.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := lines(t, sink.entries(t), "stdout"); !slices.Equal(got, []string{"0 0"}) {
		t.Errorf("stdout = %q, want the zero Info's", got)
	}
}

func TestExecOutput(t *testing.T) {
	t.Parallel()
	sink, log := newLogSink()
	e := &Exec{
		Command: []string{"sh", "-c", `echo out1; echo err1 >&2; printf 'out2\r\n\n'; echo err2 >&2; printf no-newline`},
		Logger:  log,
	}
	if err := e.Run(jobs.WithInfo(t.Context(), runtest.Info)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	entries := sink.entries(t)
	if got, want := lines(t, entries, "stdout"), []string{"out1", "out2", "", "no-newline"}; !slices.Equal(got, want) {
		t.Errorf("stdout lines = %q, want %q", got, want)
	}
	if got, want := lines(t, entries, "stderr"), []string{"err1", "err2"}; !slices.Equal(got, want) {
		t.Errorf("stderr lines = %q, want %q", got, want)
	}
	n := 0
	for _, e := range entries {
		if e["@message"] != "output" {
			continue
		}
		n++
		if e["@level"] != "info" || e["job"] != "backup" || e["tick"] != runtest.Tick {
			t.Errorf("entry %v: want level info, job backup, tick %s", e, runtest.Tick)
		}
	}
	if n != 6 {
		t.Errorf("%d output entries, want 6", n)
	}
}

// All output is logged, up to the last line, though the process exits at
// once after writing it.
func TestExecOutputTail(t *testing.T) {
	t.Parallel()
	const n = 20000
	sink, log := newLogSink()
	e := &Exec{Command: []string{"seq", strconv.Itoa(n)}, Logger: log}
	if err := e.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	got := lines(t, sink.entries(t), "stdout")
	if len(got) != n {
		t.Fatalf("%d stdout lines, want %d", len(got), n)
	}
	for i, l := range got {
		if l != strconv.Itoa(i+1) {
			t.Fatalf("line %d = %q, want %d", i, l, i+1)
		}
	}
}

func TestExecLongLine(t *testing.T) {
	t.Parallel()
	const size = 1 << 20
	sink, log := newLogSink()
	e := &Exec{
		Command: []string{"sh", "-c", fmt.Sprintf(`head -c %d /dev/zero | tr '\0' x; echo; echo after; head -c %d /dev/zero | tr '\0' y >&2`, size, size)},
		Logger:  log,
	}
	if err := e.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	entries := sink.entries(t)
	out := lines(t, entries, "stdout")
	if len(out) != 2 || out[0] != strings.Repeat("x", size) || out[1] != "after" {
		t.Errorf("stdout: %d lines, want the long line and \"after\"", len(out))
	}
	if errLines := lines(t, entries, "stderr"); len(errLines) != 1 || errLines[0] != strings.Repeat("y", size) {
		t.Errorf("stderr: %d lines, want the long line", len(errLines))
	}
	for _, e := range entries {
		if l, _ := e["line"].(string); len(l) > MaxLineBytes {
			t.Fatalf("an entry has a line of %d bytes, more than %d", len(l), MaxLineBytes)
		}
	}
}

func TestReadLines(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxLineBytes) // 2 bytes each: pieces must not cut one
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{name: "empty", in: "", want: nil},
		{name: "endings", in: "a\r\nb\n\nc", want: []string{"a", "b", "", "c"}},
		{name: "final newline", in: "a\n", want: []string{"a"}},
		{name: "long", in: long + "\nok", want: []string{long, "ok"}},
		{name: "long at end", in: "x" + long, want: []string{"x" + long}},
		{name: "pieces fill the input", in: strings.Repeat("a", 2*MaxLineBytes), want: []string{strings.Repeat("a", 2*MaxLineBytes)}},
		{name: "piece ends before newline", in: strings.Repeat("a", MaxLineBytes) + "\nb", want: []string{strings.Repeat("a", MaxLineBytes), "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			var cur strings.Builder
			readLines(strings.NewReader(tt.in), func(line string, partial bool) {
				if !utf8.ValidString(line) {
					t.Fatalf("piece of %d bytes is not valid UTF-8", len(line))
				}
				if len(line) > MaxLineBytes+utf8.UTFMax {
					t.Fatalf("piece of %d bytes", len(line))
				}
				cur.WriteString(line)
				if !partial {
					got = append(got, cur.String())
					cur.Reset()
				}
			})
			if cur.Len() > 0 {
				t.Errorf("ends with a partial piece")
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %d lines, want %d (or they differ)", len(got), len(tt.want))
			}
		})
	}
}

func TestExecExitCode(t *testing.T) {
	t.Parallel()
	e := &Exec{Command: []string{"sh", "-c", `for i in 1 2 3 4 5 6 7; do echo "line $i" >&2; done; printf '\n\t\033[31mdisk full\n' >&2; exit 3`}}
	err := e.Run(t.Context())
	var xe *ExitError
	if !errors.As(err, &xe) {
		t.Fatalf("Run = %v, want an *ExitError", err)
	}
	if xe.Code != 3 || xe.Signal != 0 || xe.Command != "sh" {
		t.Errorf("ExitError = %+v, want Command sh, Code 3, no Signal", xe)
	}
	wantTail := []string{"line 4", "line 5", "line 6", "line 7", "[31mdisk full"} // the last 5 non-empty lines, cleaned
	if !slices.Equal(xe.Stderr, wantTail) {
		t.Errorf("Stderr = %q, want %q", xe.Stderr, wantTail)
	}
	for _, s := range []string{`"sh"`, "exit status 3", `"[31mdisk full"`} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not contain %s", err, s)
		}
	}
	if strings.Contains(err.Error(), "for i in") {
		t.Errorf("error %q shows the arguments", err)
	}
}

func TestExecCancelTerm(t *testing.T) {
	t.Parallel()
	sink, log := newLogSink()
	e := &Exec{
		// The child says it is ready itself: a shell may lose a signal that
		// comes between its fork and its exec.
		Command: []string{"sh", "-c", `trap 'echo term; exit 0' TERM; sh -c 'echo "child $$"; exec sleep 30' & wait`},
		Logger:  log,
		// The default Grace (10s): a run that returns within 5s got
		// SIGTERM and no SIGKILL.
	}
	cause := errors.New("lease lost")
	ctx, cancel := context.WithCancelCause(jobs.WithInfo(t.Context(), runtest.Info))
	defer cancel(nil)
	done := runAsync(ctx, e)
	child := childPID(t, sink)
	start := time.Now()
	cancel(cause)
	err := waitRun(t, done)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run returned %v after cancel, want well within the 10s grace", d)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
		t.Errorf("Run = %v, want it to wrap context.Canceled and the cause", err)
	}
	if xe := (*ExitError)(nil); errors.As(err, &xe) {
		t.Errorf("Run = %v, want no ExitError: the script exits 0 on TERM", err)
	}
	if !strings.Contains(err.Error(), "stopped") {
		t.Errorf("error %q does not say the run was stopped", err)
	}
	if got := lines(t, sink.entries(t), "stdout"); !slices.Contains(got, "term") {
		t.Errorf("stdout = %q, want the trap's \"term\"", got)
	}
	waitGone(t, child)
}

func TestExecCancelKill(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	sink, log := newLogSink()
	e := &Exec{
		Command: []string{"sh", "-c", `trap '' TERM; echo ready; while :; do sleep 0.05; done`},
		Grace:   grace,
		Logger:  log,
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runAsync(ctx, e)
	sink.waitFor(t, "ready", func(e map[string]any) bool { return e["line"] == "ready" })
	start := time.Now()
	cancel()
	err := waitRun(t, done)
	if d := time.Since(start); d < grace || d > 5*time.Second {
		t.Errorf("Run returned %v after cancel, want a little more than the grace, %v", d, grace)
	}
	var xe *ExitError
	if !errors.As(err, &xe) || xe.Signal != syscall.SIGKILL || xe.Code != -1 {
		t.Fatalf("Run = %v, want an ExitError for SIGKILL", err)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want it to wrap context.Canceled", err)
	}
}

// A child that ignores SIGTERM, in the command's process group, is killed
// after the grace, though the command itself exited on SIGTERM.
func TestExecCancelKillsChildren(t *testing.T) {
	t.Parallel()
	const grace = 300 * time.Millisecond
	sink, log := newLogSink()
	e := &Exec{
		Command: []string{"sh", "-c", `sh -c 'trap "" TERM; echo "child $$"; while :; do sleep 0.05; done' & wait`},
		Grace:   grace,
		Logger:  log,
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := runAsync(ctx, e)
	child := childPID(t, sink)
	start := time.Now()
	cancel()
	err := waitRun(t, done)
	if d := time.Since(start); d < grace || d > 5*time.Second {
		t.Errorf("Run returned %v after cancel, want a little more than the grace, %v", d, grace)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want it to wrap context.Canceled", err)
	}
	waitGone(t, child)
	sink.waitFor(t, "kill warning", func(e map[string]any) bool {
		return e["@level"] == "warn" && e["@message"] == "process group killed after the grace period"
	})
}

// What the command leaves behind in its process group when it exits is
// ended, and Run does not wait for it.
func TestExecEndsLeftovers(t *testing.T) {
	t.Parallel()
	sink, log := newLogSink()
	e := &Exec{Command: []string{"sh", "-c", `sleep 30 & echo "child $!"`}, Logger: log}
	start := time.Now()
	if err := e.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Run took %v, want it not to wait for the leftover sleep", d)
	}
	waitGone(t, childPID(t, sink))
}

func TestExecNotFound(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		e    Exec
		want error
		says string
	}{
		{name: "not in PATH", e: Exec{Command: []string{"lockcron-no-such-program"}}, want: exec.ErrNotFound, says: "lockcron-no-such-program"},
		{name: "no such file", e: Exec{Command: []string{"/nonexistent/lockcron-tool"}}, want: fs.ErrNotExist, says: "/nonexistent/lockcron-tool"},
		{name: "no such dir", e: Exec{Command: []string{"pwd"}, Dir: "/nonexistent/dir"}, want: fs.ErrNotExist, says: "/nonexistent/dir"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.e.Run(t.Context())
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not name %s", err, tt.says)
			}
		})
	}
}

func TestExecDir(t *testing.T) {
	t.Parallel()
	pwd, err := exec.LookPath("pwd")
	if err != nil {
		t.Skip(err)
	}
	// No script of our own: writing an executable while other tests fork
	// makes exec fail with "text file busy" (go.dev/issue/22315).
	pwdDir := filepath.Dir(pwd)
	tests := []struct {
		name    string
		command []string
		dir     string
	}{
		{name: "temp dir", command: []string{"pwd"}, dir: t.TempDir()},
		{name: "program relative to Dir", command: []string{"./" + filepath.Base(pwd)}, dir: pwdDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink, log := newLogSink()
			e := &Exec{Command: tt.command, Dir: tt.dir, Logger: log}
			if err := e.Run(t.Context()); err != nil {
				t.Fatalf("Run: %v", err)
			}
			want, err := filepath.EvalSymlinks(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			got := lines(t, sink.entries(t), "stdout")
			if len(got) != 1 {
				t.Fatalf("stdout = %q, want one line", got)
			}
			if g, _ := filepath.EvalSymlinks(got[0]); g != want {
				t.Errorf("pwd = %q, want %q", got[0], want)
			}
		})
	}
}

func TestExecCancelledBeforeStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mark := filepath.Join(dir, "ran")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	e := &Exec{Command: []string{"touch", mark}}
	err := e.Run(ctx)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not started") {
		t.Errorf("Run = %v, want \"not started\" wrapping context.Canceled", err)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("the command ran")
	}
}

func TestExecConcurrent(t *testing.T) {
	t.Parallel()
	sink, log := newLogSink()
	e := &Exec{Command: []string{"sh", "-c", `echo "$LOCKCRON_ATTEMPT"`}, Logger: log}
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			info := runtest.Info
			info.Attempt = i + 1
			errs[i] = e.Run(jobs.WithInfo(t.Context(), info))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}
	got := lines(t, sink.entries(t), "stdout")
	slices.Sort(got)
	if want := []string{"1", "2", "3", "4"}; !slices.Equal(got, want) {
		t.Errorf("stdout = %q, want %q", got, want)
	}
}

func TestExecValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		e     *Exec
		field string // "": valid
	}{
		{name: "ok", e: &Exec{Command: []string{"true"}}},
		{name: "ok full", e: &Exec{Command: []string{"sh", "-c", "exit 0"}, Env: map[string]string{"A": "b", "lockcron_x": "lower case is not reserved"}, Dir: "/", Grace: time.Second}},
		{name: "nil", e: nil, field: "nil Exec"},
		{name: "no command", e: &Exec{}, field: "Command"},
		{name: "empty program", e: &Exec{Command: []string{"", "x"}}, field: "Command[0]"},
		{name: "NUL arg", e: &Exec{Command: []string{"echo", "a\x00b"}}, field: "Command[1]"},
		{name: "empty env name", e: &Exec{Command: []string{"true"}, Env: map[string]string{"": "x"}}, field: "Env"},
		{name: "env name with =", e: &Exec{Command: []string{"true"}, Env: map[string]string{"A=B": "x"}}, field: `Env["A=B"]`},
		{name: "reserved env", e: &Exec{Command: []string{"true"}, Env: map[string]string{"LOCKCRON_TOKEN": "1"}}, field: `Env["LOCKCRON_TOKEN"]`},
		{name: "NUL env value", e: &Exec{Command: []string{"true"}, Env: map[string]string{"A": "\x00"}}, field: `Env["A"]`},
		{name: "NUL dir", e: &Exec{Command: []string{"true"}, Dir: "/tmp\x00"}, field: "Dir"},
		{name: "negative grace", e: &Exec{Command: []string{"true"}, Grace: -time.Second}, field: "Grace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.e.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
			if runErr := tt.e.Run(t.Context()); !errors.Is(runErr, jobs.ErrInvalid) {
				t.Errorf("Run = %v, want ErrInvalid", runErr)
			}
		})
	}

	err := (&Exec{Env: map[string]string{"LOCKCRON_JOB": "x"}, Grace: -1}).Validate()
	for _, field := range []string{"Command", "LOCKCRON_JOB", "Grace"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate = %v, want every problem, %s too", err, field)
		}
	}
}
