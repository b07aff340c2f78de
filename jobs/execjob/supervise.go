package execjob

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The supervisor of an exec run is this program's own executable, started
// again with supervisorEnv=1 in its environment. It leads the run's process
// group, and the command joins that group. It holds the read end of a pipe,
// the lifeline, whose write end only the daemon holds; when the daemon
// dies, however it dies, the kernel closes the write end, the supervisor
// reads EOF, and it sends SIGKILL to the whole group, itself included.
// Run closes the lifeline itself once it has ended the group.
//
// Why a pipe rather than Pdeathsig: Linux sends the parent-death signal
// when the thread that forked the child exits, not the process, and a Go
// program's threads may exit while it runs on (a goroutine that ends
// locked to its thread takes the thread with it), which would kill a
// healthy run; it exists on Linux and FreeBSD only. A pipe's write end is
// closed when the last process holding it is gone, on every Unix.
//
// Why the supervisor does not start the command itself: Run starts it as
// before, so its start errors, exit status and signal are the command's
// own, with nothing to relay or mimic; and the supervisor stays in the
// group until Run has ended the rest of it (see group.endRest), so what the
// command leaves behind ends with the daemon too.
const (
	supervisorEnv  = "LOCKCRON_EXEC_SUPERVISOR"
	supervisorArg  = "--lockcron-exec-supervisor" // an unknown flag to a program that would not recognise supervisorEnv
	lifelineFD     = 3                            // the supervisor's read end of the lifeline
	readyFD        = 4                            // the supervisor's write end of the ready pipe
	supervisorWait = 30 * time.Second             // how long Run waits for a supervisor to be ready
)

// supervisorSignals are the signals the supervisor ignores: those whose
// default action ends or stops a process, sent to the run's group by Run
// (SIGTERM) or by the command's processes (kill 0). SIGKILL and SIGSTOP
// cannot be ignored.
var supervisorSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGTERM,
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE, syscall.SIGALRM,
	syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGVTALRM,
	syscall.SIGPROF, syscall.SIGXCPU, syscall.SIGXFSZ,
}

// supervising records that this program called Supervise: it may start
// itself again as the supervisor of its exec runs.
var supervising atomic.Bool

// Supervise lets this program supervise its own exec runs; a program that
// runs Exec jobs calls it first thing in main, and exits with the code it
// returns if it reports that this process is a supervisor:
//
//	func main() {
//		if code, ok := execjob.Supervise(); ok {
//			os.Exit(code)
//		}
//		// the program itself
//	}
//
// Each exec run starts this program's executable again as its supervisor,
// with LOCKCRON_EXEC_SUPERVISOR=1 in its environment and an argument of its
// own (--lockcron-exec-supervisor), and that process must become the
// supervisor before main does anything else (see Exec). In such a process,
// Supervise leads the run's process group until the program that started
// it is gone or the run has ended, and returns the exit code and true. In
// any other process it returns at once with 0 and false, and from then on
// Exec runs in this process start supervisors. Without a call to it, Exec.Run
// fails with ErrNoSupervisor and starts nothing: the program is never
// started again to run its own main a second time.
//
// Code that runs before main (init functions, package variables) runs in
// supervisors too, so it should not start anything. Supervise is safe for
// concurrent use.
func Supervise() (code int, supervisor bool) {
	if os.Getenv(supervisorEnv) == "1" {
		return supervise(), true
	}
	supervising.Store(true)
	return 0, false
}

// supervise is the supervisor's whole life; it returns the exit status,
// 2 if the process is not a supervisor after all (its file descriptors are
// not an exec run's pipes).
func supervise() int {
	// The supervisor starts no process, so ignored signals are not passed on.
	signal.Ignore(supervisorSignals...)
	for _, fd := range []int{lifelineFD, readyFD} {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
			fmt.Fprintf(os.Stderr, "lockcron: %s is set, but file descriptor %d is not a pipe from an exec run: this program is not an exec supervisor\n", supervisorEnv, fd)
			return 2
		}
	}
	_ = syscall.SetNonblock(lifelineFD, false)
	_, _ = syscall.Write(readyFD, []byte{'r'})
	_ = syscall.Close(readyFD)
	var buf [16]byte
	for {
		n, err := syscall.Read(lifelineFD, buf[:])
		if errors.Is(err, syscall.EINTR) || (err == nil && n > 0) {
			continue // nothing is ever written: only EOF matters
		}
		break // EOF: the daemon is gone, or Run is done; an error: end too
	}
	_ = syscall.Kill(0, syscall.SIGKILL) // 0: this process's group
	return 0
}

// supervisor is the daemon's handle on a run's supervisor process.
type supervisor struct {
	cmd      *exec.Cmd
	lifeline *os.File // the write end
}

// supervisorExecutable returns the executable to start as a supervisor.
// On Linux, /proc/self/exe is the running program itself, even if its file
// has been replaced or deleted since it started; elsewhere it is
// os.Executable's path. Tests replace it.
var supervisorExecutable = sync.OnceValues(func() (string, error) {
	if runtime.GOOS == "linux" {
		if _, err := os.Lstat("/proc/self/exe"); err == nil {
			return "/proc/self/exe", nil
		}
	}
	return os.Executable()
})

// noSupervisorWarning logs, once per process, that exec runs go without a
// supervisor because the executable is not known.
var noSupervisorWarning sync.Once

// startSupervisor starts a supervisor for a run and waits until it is
// ready: it leads a new process group, whose id is its pid, and ignores the
// signals the group gets. It returns nil if ctx ended first, or if no
// supervisor could be started, which it logs as a warning: the run then
// goes on without one.
func startSupervisor(ctx context.Context, log hclog.Logger) *supervisor {
	exe, err := supervisorExecutable()
	if err != nil {
		noSupervisorWarning.Do(func() {
			log.Warn("exec jobs run without a supervisor: their processes do not end when this process dies", "error", err)
		})
		return nil
	}
	s, err := launchSupervisor(ctx, exe)
	if err != nil {
		if ctx.Err() == nil {
			log.Warn("exec job runs without a supervisor: its processes do not end when this process dies", "error", err)
		}
		return nil
	}
	return s
}

func launchSupervisor(ctx context.Context, exe string) (*supervisor, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lifeR, lifeW, err := os.Pipe() // O_CLOEXEC: no other child inherits lifeW
	if err != nil {
		return nil, fmt.Errorf("exec supervisor: %w", err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		lifeR.Close()
		lifeW.Close()
		return nil, fmt.Errorf("exec supervisor: %w", err)
	}
	defer readyR.Close()
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, supervisorEnv+"=") })
	cmd := &exec.Cmd{
		Path:        exe,
		Args:        []string{os.Args[0], supervisorArg},
		Env:         append(env, supervisorEnv+"=1"),
		Dir:         "/",                                 // holds no job's directory busy
		ExtraFiles:  []*os.File{lifeR, readyW},           // lifelineFD, readyFD
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}, // stdin, stdout, stderr: /dev/null
	}
	err = cmd.Start()
	lifeR.Close()
	readyW.Close()
	if err != nil {
		lifeW.Close()
		return nil, fmt.Errorf("exec supervisor %s: %w", exe, err)
	}
	s := &supervisor{cmd: cmd, lifeline: lifeW}

	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		readyR.SetReadDeadline(time.Now())
		close(fired)
	})
	readyR.SetReadDeadline(time.Now().Add(supervisorWait))
	var b [1]byte
	n, err := readyR.Read(b[:])
	if !stop() {
		<-fired
	}
	if n == 1 && b[0] == 'r' {
		return s, nil
	}
	s.stop()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, fmt.Errorf("exec supervisor %s (pid %d): not ready within %v", exe, cmd.Process.Pid, supervisorWait)
	}
	return nil, fmt.Errorf("exec supervisor %s (pid %d): exited before it was ready: %v", exe, cmd.Process.Pid, cmd.ProcessState)
}

// pgid returns the id of the process group the supervisor leads.
func (s *supervisor) pgid() int { return s.cmd.Process.Pid }

// stop ends the supervisor, and what is left of its group, and waits for
// it. A nil s is a no-op.
func (s *supervisor) stop() {
	if s == nil {
		return
	}
	s.lifeline.Close()
	// The supervisor is not reaped yet, so its pid still names its group.
	_ = syscall.Kill(-s.pgid(), syscall.SIGKILL)
	_ = s.cmd.Wait()
}
