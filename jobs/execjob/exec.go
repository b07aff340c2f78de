package execjob

import (
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/internal/runerr"
)

// DefaultGrace is how long an Exec run waits, after SIGTERM, before it
// sends SIGKILL, when Exec.Grace is zero.
const DefaultGrace = 10 * time.Second

// MaxLineBytes is the longest piece of output an Exec logs as one line.
// A longer line is logged in pieces of about this size, each marked
// partial=true except the last.
const MaxLineBytes = 64 << 10

// ErrNoSupervisor: Exec.Run in a program that has not called Supervise,
// which it needs to start its exec runs' supervisors.
var ErrNoSupervisor = errors.New("execjob: this program does not supervise exec runs: call execjob.Supervise first thing in main")

const (
	stderrTailLines = 5               // stderr lines an ExitError keeps
	stderrTailBytes = 256             // bytes kept of each of them
	outputDrain     = 2 * time.Second // wait for output after SIGKILL, before abandoning it
)

// Exec is the exec job kind: a Runner that runs a program, directly (no
// shell, unless Command asks for one, as in ["sh", "-c", "..."]), once per
// run.
//
// The process gets the environment of this process, then Env, then the
// run's Info as LOCKCRON_JOB, LOCKCRON_TICK, LOCKCRON_TOKEN,
// LOCKCRON_REPLICA and LOCKCRON_ATTEMPT (Info.Env; from the zero Info if
// the run's ctx has none). Those come last, so they win over inherited
// variables of the same name; Env may not set any name that starts with
// LOCKCRON_ (Validate rejects it). Its stdin is empty (/dev/null).
//
// Each line the process writes to stdout or stderr is logged to Logger at
// Info level with the message "output" and the keys job, tick (RFC 3339,
// UTC), stream ("stdout" or "stderr") and line (without its line ending).
// Lines longer than MaxLineBytes are logged in pieces. Output written just
// before the process exits is not lost.
//
// The process runs in a process group of its own, which its children join
// unless they leave it (setsid, setpgid). A run's processes do not outlive
// it: when ctx ends, or when the command exits, the group gets SIGTERM (and
// SIGCONT); once the group has closed its stdout and stderr, or Grace has
// passed since SIGTERM, what is still left of it gets SIGKILL. Output that
// a process outside the group keeps open is read for 2s more at most.
// A command that had exited on its own when ctx ended is not stopped: Run
// returns its own status, so a run that completes as its replica stops
// counts as done (on Linux, where the exit can be seen before it is
// collected; elsewhere it counts as stopped). Exec works on Unix only, as
// it relies on process groups.
//
// Nor do they outlive this process, even one killed with SIGKILL. Run
// first starts a supervisor to lead the group, and the command joins it
// (so its process group id is the supervisor's pid, and the command itself
// could leave with setsid). The supervisor is this program's own executable
// (/proc/self/exe on Linux, os.Executable elsewhere) started again with
// LOCKCRON_EXEC_SUPERVISOR=1, which Supervise, called first thing in main,
// turns into a supervisor; in a program that has not called Supervise, Run
// fails with ErrNoSupervisor and starts nothing. It ignores the signals the group gets, and holds one
// end of a pipe whose other end only this process holds: when this process
// dies, the kernel closes the pipe, and the supervisor sends SIGKILL to the
// whole group. This works on every Unix; on Linux the group is gone within
// 250 ms of this process's death (tens of milliseconds when measured, on a
// loaded machine). It covers what the
// command leaves in the group after it exits, until Run has ended that too,
// but not processes that left the group. If the supervisor alone is killed
// (by the OOM killer, say), the run goes on and ends as usual, but its
// processes no longer end with this process. If no supervisor can be
// started, Run logs a warning and the command leads its group itself, as
// it would without one. In a container whose PID 1 is this process, the
// kernel kills the container's other processes when it dies anyway; under
// an init such as tini (docker --init), the supervisor ends the group and
// the init reaps it. A supervisor costs a process start per run, tens of
// milliseconds, and 10 to 20 MB of memory while the run lasts. With it in
// the group, a run whose output is held open by a process outside the
// group waits for Grace before it ends the group.
//
// Exec is safe for concurrent use (runs are independent), as long as its
// fields are not changed while it runs.
type Exec struct {
	// Command is the program and its arguments; Command[0] is looked up in
	// PATH unless it contains a slash, and a relative path is taken
	// relative to Dir.
	Command []string
	// Env holds variables added to the process's environment; they
	// replace inherited ones of the same name.
	Env map[string]string
	// Unset names inherited variables the process must not see, such as
	// the daemon's own secrets (the config package lists them).
	Unset []string
	// Dir is the working directory; empty means this process's.
	Dir string
	// Grace is how long the process group gets from SIGTERM to SIGKILL;
	// zero means DefaultGrace.
	Grace time.Duration
	// Logger receives the output; nil discards it.
	Logger hclog.Logger
}

// Validate reports what is wrong with e, if anything: an empty Command or
// program name; a NUL byte in an argument, in Dir or in Env; an Env name
// that is empty, has '=' or starts with LOCKCRON_; a negative Grace. Each
// problem is an error wrapping jobs.ErrInvalid that names the field;
// several are joined (errors.Join). It does not look for the program or
// Dir: a missing one is an error of Run. It is safe for concurrent use.
func (e *Exec) Validate() error {
	if e == nil {
		return fmt.Errorf("exec: %w: nil Exec", jobs.ErrInvalid)
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("exec %s: %w: %s", field, jobs.ErrInvalid, fmt.Sprintf(format, args...)))
	}
	switch {
	case len(e.Command) == 0:
		bad("Command", "empty")
	case e.Command[0] == "":
		bad("Command[0]", "empty program name")
	}
	for i, arg := range e.Command {
		if strings.IndexByte(arg, 0) >= 0 {
			bad(fmt.Sprintf("Command[%d]", i), "has a NUL byte")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(e.Env)) {
		switch {
		case k == "":
			bad("Env", "empty variable name")
		case strings.ContainsAny(k, "=\x00"):
			bad(fmt.Sprintf("Env[%q]", k), "name has '=' or a NUL byte")
		case strings.HasPrefix(k, jobs.EnvPrefix):
			bad(fmt.Sprintf("Env[%q]", k), "names starting with %s are set from the run's info", jobs.EnvPrefix)
		}
		if strings.IndexByte(e.Env[k], 0) >= 0 {
			bad(fmt.Sprintf("Env[%q]", k), "value has a NUL byte")
		}
	}
	if strings.IndexByte(e.Dir, 0) >= 0 {
		bad("Dir", "has a NUL byte")
	}
	if e.Grace < 0 {
		bad("Grace", "negative: %v", e.Grace)
	}
	return errors.Join(errs...)
}

// Run runs the command once and returns when it has exited, the rest of its
// process group has ended (see Exec), and its output has been logged; it
// leaves no goroutine behind.
//
// It returns nil if the command exited with status 0. Otherwise:
//   - Validate's error (jobs.ErrInvalid) if e is not valid;
//   - an error wrapping ErrNoSupervisor if this program has not called
//     Supervise;
//   - an error naming the program if it could not be started, which
//     wraps exec.ErrNotFound for a program not found in PATH and
//     fs.ErrNotExist for a missing file or Dir;
//   - an *ExitError if it exited with another status or was killed by a
//     signal;
//   - if ctx ended while the command ran: an error that wraps ctx.Err(),
//     context.Cause(ctx), and the *ExitError if the exit status was not 0.
//
// When ctx ends, the process group gets SIGTERM, and SIGKILL once Grace
// has passed. A ctx that has ended before Run starts the command gives an
// error wrapping ctx.Err() and starts nothing. Run is safe for concurrent
// use.
func (e *Exec) Run(ctx context.Context) error {
	if err := e.Validate(); err != nil {
		return err
	}
	info, _ := jobs.InfoFrom(ctx)
	prog := e.Command[0]
	log := e.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	log = log.With("job", info.Job, "tick", info.Tick.UTC().Format(time.RFC3339Nano))
	grace := e.Grace
	if grace == 0 {
		grace = DefaultGrace
	}

	if !supervising.Load() {
		return fmt.Errorf("jobs: exec %q: not started: %w", prog, ErrNoSupervisor)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("jobs: exec %q: not started: %w", prog, runerr.Ctx(ctx))
	}
	// The supervisor leads the group, and the command joins it (pgid). With
	// no supervisor (pgid 0), the command leads a group of its own.
	sup := startSupervisor(ctx, log)
	defer sup.stop()
	if ctx.Err() != nil {
		return fmt.Errorf("jobs: exec %q: not started: %w", prog, runerr.Ctx(ctx))
	}
	pgid := 0
	if sup != nil {
		pgid = sup.pgid()
	}

	outR, outW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("jobs: exec %q: %w", prog, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return fmt.Errorf("jobs: exec %q: %w", prog, err)
	}

	g := &group{}
	cmd := exec.CommandContext(ctx, prog, e.Command[1:]...)
	cmd.Env = e.environ(ctx, info)
	cmd.Dir = e.Dir
	cmd.Stdout, cmd.Stderr = outW, errW // *os.File: no copying goroutines in os/exec
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: pgid}
	// On ctx's end, SIGTERM to the whole group; after WaitDelay, SIGKILL to
	// the command if it is still there (endRest sees to the rest of it).
	cmd.Cancel = func() error { return g.cancel(cmp.Or(pgid, cmd.Process.Pid), cmd.Process.Pid) }
	cmd.WaitDelay = grace
	start := time.Now()
	err = cmd.Start()
	outW.Close() // the child has its copies; EOF comes when they are closed
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		if ctx.Err() != nil {
			return fmt.Errorf("jobs: exec %q: not started: %w", prog, runerr.Ctx(ctx))
		}
		if dirErr := checkDir(e.Dir); dirErr != nil {
			// os/exec would blame the program ("fork/exec /bin/x: no such
			// file or directory") for a missing Dir.
			return fmt.Errorf("jobs: exec %q: Dir: %w", prog, dirErr)
		}
		return fmt.Errorf("jobs: exec %q: %w", prog, err)
	}
	g.setPgid(cmp.Or(pgid, cmd.Process.Pid)) // a group's id is its leader's pid
	running.add(g)
	defer running.remove(g)
	log.Debug("process started", "pid", cmd.Process.Pid, "pgid", cmp.Or(pgid, cmd.Process.Pid), "supervised", sup != nil)

	var wg sync.WaitGroup
	tail := &lineTail{}
	wg.Go(func() {
		readLines(outR, func(line string, partial bool) { logLine(log, "stdout", line, partial) })
	})
	wg.Go(func() {
		readLines(errR, func(line string, partial bool) {
			logLine(log, "stderr", line, partial)
			tail.add(line)
		})
	})
	outDone := make(chan struct{})
	go func() { wg.Wait(); close(outDone) }()

	waitErr := cmd.Wait()
	state := cmd.ProcessState
	duration := time.Since(start)
	g.endRest(grace, outDone, log)
	select {
	case <-outDone:
	case <-time.After(outputDrain):
		// Someone outside the group keeps the output open: abandon it.
		log.Warn("output left open by a process outside the group, no longer read")
		outR.SetReadDeadline(time.Now())
		errR.SetReadDeadline(time.Now())
		<-outDone
	}
	outR.Close()
	errR.Close()
	if state != nil {
		log.Debug("process exited", "pid", state.Pid(), "exit_code", state.ExitCode(), "duration", duration)
	}

	var exitErr *ExitError
	if state != nil && !state.Success() {
		exitErr = newExitError(prog, state, tail.lines())
	}
	switch {
	case g.wasCancelled():
		return &stoppedError{prog: prog, exit: exitErr, ctxErr: ctx.Err(), cause: context.Cause(ctx)}
	case exitErr != nil:
		return exitErr
	case state == nil:
		return fmt.Errorf("jobs: exec %q: %w", prog, waitErr)
	}
	return nil
}

// checkDir returns why dir cannot be a working directory, if it cannot.
func checkDir(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return err // an *fs.PathError, which names dir
	case !fi.IsDir():
		return &fs.PathError{Op: "chdir", Path: dir, Err: syscall.ENOTDIR}
	}
	return nil
}

// environ returns the process's environment: this process's (less Unset's
// names, LOCKCRON_EXEC_SUPERVISOR, TRACEPARENT, TRACESTATE and
// LOCKCRON_PARAM_*, so that a run is given only its own parameters), then e.Env
// (sorted by name), then info's, then the run's trace context (traceEnv).
// os/exec keeps the last of duplicates.
func (e *Exec) environ(ctx context.Context, info jobs.Info) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == supervisorEnv || slices.Contains(e.Unset, name) || slices.Contains(traceEnvNames, name) ||
			strings.HasPrefix(name, jobs.ParamEnvPrefix)
	})
	for _, k := range slices.Sorted(maps.Keys(e.Env)) {
		env = append(env, k+"="+e.Env[k])
	}
	env = append(env, info.Env()...)
	return append(env, traceEnv(ctx)...)
}

func logLine(log hclog.Logger, stream, line string, partial bool) {
	if partial {
		log.Info("output", "stream", stream, "line", line, "partial", true)
		return
	}
	log.Info("output", "stream", stream, "line", line)
}

// running is the process groups of the exec runs under way, for
// KillRunning.
var running = groups{m: make(map[*group]struct{})}

type groups struct {
	mu sync.Mutex
	m  map[*group]struct{}
}

func (gs *groups) add(g *group) {
	gs.mu.Lock()
	gs.m[g] = struct{}{}
	gs.mu.Unlock()
}

func (gs *groups) remove(g *group) {
	gs.mu.Lock()
	delete(gs.m, g)
	gs.mu.Unlock()
}

// KillRunning sends SIGKILL at once to the process group of every exec run
// of this process still under way, without waiting for their grace. A
// daemon that stops at once (a second signal) calls it before it exits, so
// that no job process outlives it and runs on while another replica takes
// its tick over. It returns how many groups it signalled. It is safe for
// concurrent use.
func KillRunning() int {
	running.mu.Lock()
	gs := make([]*group, 0, len(running.m))
	for g := range running.m {
		gs = append(gs, g)
	}
	running.mu.Unlock()
	n := 0
	for _, g := range gs {
		g.mu.Lock()
		pgid := g.pgid
		g.mu.Unlock()
		if pgid > 0 && syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// group is the process group of one run. It is used by Run's goroutine and
// by os/exec's, which calls cancel.
type group struct {
	mu        sync.Mutex
	pgid      int
	termAt    time.Time // when the group got SIGTERM; zero if it has not
	cancelled bool      // SIGTERM was sent because ctx ended
}

func (g *group) setPgid(pgid int) {
	g.mu.Lock()
	g.pgid = pgid
	g.mu.Unlock()
}

// cancel is the Cmd's Cancel: SIGTERM to the whole group, whose id is
// pgid. (os/exec may call it before Run has called setPgid.) It returns
// os.ErrProcessDone if there is no one left to signal. A command (pid)
// that had already exited when ctx ended, its work done, was not stopped:
// its exit status stands (the rest of its group is ended all the same),
// so a run that completes as the replica stops is not run again.
func (g *group) cancel(pgid, pid int) error {
	exited := exitedOnItsOwn(pid)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.pgid = pgid
	if err := g.termLocked(); err != nil {
		return err
	}
	g.cancelled = !exited
	return nil
}

func (g *group) termLocked() error {
	if g.pgid <= 0 {
		return os.ErrProcessDone
	}
	err := syscall.Kill(-g.pgid, syscall.SIGTERM)
	if errors.Is(err, syscall.ESRCH) {
		return os.ErrProcessDone
	}
	if err != nil {
		return err
	}
	// Stopped processes act on SIGTERM only once continued.
	_ = syscall.Kill(-g.pgid, syscall.SIGCONT)
	if g.termAt.IsZero() {
		g.termAt = time.Now()
	}
	return nil
}

func (g *group) wasCancelled() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cancelled
}

// endRest ends what is left of the group after its leader has exited: it
// sends SIGTERM unless it was sent already, waits until the output is
// closed (outDone) or grace has passed since SIGTERM, then sends SIGKILL.
// Waiting on the output rather than on the processes themselves keeps this
// working where orphans are not reaped (a container whose init does not
// reap them), since zombies still count as group members.
func (g *group) endRest(grace time.Duration, outDone <-chan struct{}, log hclog.Logger) {
	g.mu.Lock()
	var err error
	if g.termAt.IsZero() {
		err = g.termLocked()
	} else if err = syscall.Kill(-g.pgid, 0); errors.Is(err, syscall.ESRCH) {
		err = os.ErrProcessDone // SIGTERM was sent: do not send it twice
	}
	pgid, termAt := g.pgid, g.termAt
	g.mu.Unlock()
	if err != nil {
		return // nothing left (ESRCH), or nothing we may signal (EPERM)
	}
	timer := time.NewTimer(time.Until(termAt.Add(grace)))
	defer timer.Stop()
	select {
	case <-outDone:
		// The rest has closed its output: most likely gone. SIGKILL what
		// might be left.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	case <-timer.C:
		if syscall.Kill(-pgid, syscall.SIGKILL) == nil {
			log.Warn("process group killed after the grace period", "pgid", pgid, "grace", grace)
		}
	}
}

// ExitError is the error of an Exec run whose command exited with a status
// other than 0, or was killed by a signal. It is only read after Run
// returns, so it is safe for concurrent use.
type ExitError struct {
	Command string         // the program, Command[0]; arguments are left out, as they may hold secrets
	Code    int            // the exit status, or -1 if a signal ended the process
	Signal  syscall.Signal // the signal that ended the process, or 0
	Stderr  []string       // the last non-empty lines of stderr (up to 5, 256 bytes each), oldest first
}

// Error names the command and the exit status or signal, and quotes the
// last lines of stderr, for example:
//
//	jobs: exec "backup.sh": exit status 3; stderr: "disk full", "giving up"
func (e *ExitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "jobs: exec %q: %s", e.Command, e.status())
	e.writeStderr(&b)
	return b.String()
}

func (e *ExitError) status() string {
	if e.Signal != 0 {
		return "signal: " + e.Signal.String()
	}
	return fmt.Sprintf("exit status %d", e.Code)
}

func (e *ExitError) writeStderr(b *strings.Builder) {
	if len(e.Stderr) == 0 {
		return
	}
	b.WriteString("; stderr: ")
	for i, l := range e.Stderr {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(b, "%q", l)
	}
}

func newExitError(prog string, state *os.ProcessState, stderr []string) *ExitError {
	e := &ExitError{Command: prog, Code: state.ExitCode(), Stderr: stderr}
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = ws.Signal()
	}
	return e
}

// stoppedError is the error of an Exec run whose ctx ended while the
// command ran.
type stoppedError struct {
	prog          string
	ctxErr, cause error
	exit          *ExitError // nil if the command exited with status 0
}

func (e *stoppedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "jobs: exec %q: stopped: %v", e.prog, e.ctxErr)
	if e.cause != nil && e.cause != e.ctxErr {
		fmt.Fprintf(&b, " (%v)", e.cause)
	}
	if e.exit == nil {
		b.WriteString("; exit status 0")
		return b.String()
	}
	b.WriteString("; " + e.exit.status())
	e.exit.writeStderr(&b)
	return b.String()
}

func (e *stoppedError) Unwrap() []error {
	errs := []error{e.ctxErr}
	if e.cause != nil && e.cause != e.ctxErr {
		errs = append(errs, e.cause)
	}
	if e.exit != nil {
		errs = append(errs, e.exit)
	}
	return errs
}

// lineTail keeps the last few non-empty lines given to add, cleaned and
// cut short. It is safe for concurrent use.
type lineTail struct {
	mu sync.Mutex
	l  []string
}

func (t *lineTail) add(line string) {
	line = runerr.Clean(line, stderrTailBytes)
	if line == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.l) == stderrTailLines {
		t.l = slices.Delete(t.l, 0, 1)
	}
	t.l = append(t.l, line)
}

func (t *lineTail) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.l)
}

// readLines calls emit for each line read from r, without its "\n" or
// "\r\n", until r ends or fails; a last line without "\n" is emitted too.
// Lines longer than MaxLineBytes are emitted in pieces, cut on rune
// boundaries, with partial true for all but the last.
func readLines(r io.Reader, emit func(line string, partial bool)) {
	br := bufio.NewReaderSize(r, MaxLineBytes)
	var carry []byte // the start of a rune cut off the previous piece
	// A piece of a long line is held back until the next read tells
	// whether the line goes on (partial) or ended with the input.
	var held *string
	flush := func(partial bool) {
		if held != nil {
			emit(*held, partial)
			held = nil
		}
	}
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			flush(true)
			line := chunk[:len(chunk)-1]
			if len(carry) > 0 {
				line = append(carry, line...)
				carry = carry[:0]
			}
			emit(string(trimCR(line)), false)
		case errors.Is(err, bufio.ErrBufferFull):
			flush(true)
			piece := append(carry, chunk...)
			cut := incompleteRuneStart(piece)
			s := string(piece[:cut])
			held = &s
			carry = append([]byte(nil), piece[cut:]...)
		default: // io.EOF, or an error such as a read deadline
			if line := append(carry, chunk...); len(line) > 0 {
				flush(true)
				emit(string(trimCR(line)), false)
			}
			flush(false)
			return
		}
	}
}

func trimCR(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\r' {
		return b[:n-1]
	}
	return b
}

// incompleteRuneStart returns where an incomplete UTF-8 sequence at the end
// of b starts, or len(b) if there is none.
func incompleteRuneStart(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
