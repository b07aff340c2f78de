package execjob

import (
	"bytes"
	"context"
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
)

// Environment of the helper daemon, TestHelperDaemon.
const (
	helperEnv    = "LOCKCRON_TEST_HELPER_DAEMON" // "1" in the helper
	helperScript = "HELPER_SCRIPT"               // the sh script its exec job runs
	helperPIDs   = "PIDFILE"                     // where the script writes its pids
)

// daemonJob writes the pid of a child of its own, then its own, to
// $PIDFILE, and waits.
const daemonJob = `sleep 300 & echo $! > "$PIDFILE"; echo $$ >> "$PIDFILE"; wait`

// TestHelperDaemon is not a test: it is the daemon that
// TestSupervisorDaemonKilled runs and kills, this test binary run again. It
// runs an Exec of $HELPER_SCRIPT until it is killed.
func TestHelperDaemon(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("the helper daemon of TestSupervisorDaemonKilled")
	}
	e := &Exec{Command: []string{"sh", "-c", os.Getenv(helperScript)}}
	err := e.Run(context.Background())
	t.Fatalf("the exec run ended before the daemon was killed: %v", err)
}

// procStat returns the fields of /proc/pid/stat after the command name:
// [0] is the state, [2] the process group id.
func procStat(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

// supervisorOf returns the process group id of pid, and checks that the
// group's leader is a supervisor.
func supervisorOf(t *testing.T, pid int) int {
	t.Helper()
	st, err := procStat(pid)
	if err != nil || len(st) < 3 {
		t.Fatalf("process %d: stat %q: %v", pid, st, err)
	}
	pgid, err := strconv.Atoi(st[2])
	if err != nil {
		t.Fatal(err)
	}
	if pgid == pid {
		t.Fatalf("process %d leads its group; want the supervisor to", pid)
	}
	args, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pgid))
	if err != nil || !slices.Contains(strings.Split(string(args), "\x00"), supervisorArg) {
		t.Fatalf("group leader %d has arguments %q (%v), want %s", pgid, args, err, supervisorArg)
	}
	return pgid
}

func needProc(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
}

// killDaemon starts the helper daemon with script, waits until the script
// has written its pids, SIGKILLs the daemon, and returns how long the
// script, its child and its supervisor took to be gone after that.
func killDaemon(t *testing.T, script string) time.Duration {
	t.Helper()
	pidfile := filepath.Join(t.TempDir(), "pids")
	var out bytes.Buffer
	daemon := exec.Command(os.Args[0], "-test.run=^TestHelperDaemon$", "-test.count=1")
	daemon.Env = append(os.Environ(), helperEnv+"=1", helperScript+"="+script, helperPIDs+"="+pidfile)
	daemon.Stdout, daemon.Stderr = &out, &out
	daemon.WaitDelay = 5 * time.Second
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { daemon.Wait(); close(exited) }()
	defer func() {
		daemon.Process.Kill()
		<-exited
	}()
	// fail kills the daemon first: its output is read once it has exited.
	fail := func(format string, args ...any) {
		t.Helper()
		daemon.Process.Kill()
		<-exited
		t.Fatalf(format+"\n%s", append(args, out.Bytes())...)
	}

	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for len(pids) < 2 {
		select {
		case <-exited:
			fail("helper daemon exited: %v", daemon.ProcessState)
		default:
		}
		if time.Now().After(deadline) {
			fail("no pids in %s within 10s", pidfile)
		}
		time.Sleep(5 * time.Millisecond) // polling, bounded by deadline
		b, _ := os.ReadFile(pidfile)
		pids = pids[:0]
		for l := range strings.Lines(string(b)) {
			if !strings.HasSuffix(l, "\n") {
				break
			}
			pid, err := strconv.Atoi(strings.TrimSpace(l))
			if err != nil {
				fail("%s: %q", pidfile, b)
			}
			pids = append(pids, pid)
		}
	}
	sup := supervisorOf(t, pids[1])
	if st, err := procStat(pids[0]); err != nil || st[2] != strconv.Itoa(sup) {
		t.Fatalf("the script's child %d: stat %q (%v), want group %d", pids[0], st, err, sup)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", sup)); err == nil {
		for l := range strings.Lines(string(b)) {
			if strings.HasPrefix(l, "VmRSS:") {
				t.Logf("supervisor %d: %s", sup, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	pids = append(pids, sup)

	start := time.Now()
	if err := daemon.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for !allGone(pids) {
		if time.Now().After(deadline) {
			for _, p := range pids {
				syscall.Kill(p, syscall.SIGKILL)
			}
			t.Fatalf("processes %v (script's child, script, supervisor) still running 10s after the daemon's SIGKILL", pids)
		}
		time.Sleep(time.Millisecond) // polling, bounded by deadline
	}
	return time.Since(start)
}

func allGone(pids []int) bool {
	for _, p := range pids {
		if !processGone(p) {
			return false
		}
	}
	return true
}

// An exec run's whole process group ends soon after its daemon is
// SIGKILLed.
func TestSupervisorDaemonKilled(t *testing.T) {
	needProc(t)
	t.Parallel()
	const rounds = 5
	var ds []time.Duration
	for i := range rounds {
		d := killDaemon(t, daemonJob)
		t.Logf("round %d: group gone %v after the daemon's SIGKILL", i+1, d)
		ds = append(ds, d)
	}
	slices.Sort(ds)
	t.Logf("group gone after SIGKILL, %d rounds: p50 %v, max %v", rounds, ds[rounds/2], ds[rounds-1])
}

// The supervisor lives on through the signals a job sends to its own group
// (kill 0), and still ends the group when the daemon dies.
func TestSupervisorGroupSignals(t *testing.T) {
	needProc(t)
	t.Parallel()
	sigs := "HUP INT QUIT TERM USR1 USR2 PIPE ALRM TSTP TTIN TTOU VTALRM PROF XCPU XFSZ"
	script := "trap '' " + sigs + "; for s in " + sigs + "; do kill -s $s 0; done; " + daemonJob
	d := killDaemon(t, script)
	t.Logf("group gone %v after the daemon's SIGKILL", d)
}

// The command sees neither the supervisor's marker nor its pipes, and runs
// in the supervisor's group, which ends with the run.
func TestSupervisorHidden(t *testing.T) {
	needProc(t)
	sink, log := newLogSink()
	e := &Exec{
		Command: []string{"sh", "-c", `echo "pid $$"; echo "marker ${LOCKCRON_EXEC_SUPERVISOR-unset}"; ls /proc/$$/fd`},
		Logger:  log,
	}
	t.Setenv(supervisorEnv, "1") // read by Supervise only; not passed on
	if err := e.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	out := lines(t, sink.entries(t), "stdout")
	if len(out) < 2 || !strings.HasPrefix(out[0], "pid ") {
		t.Fatalf("stdout = %q", out)
	}
	if out[1] != "marker unset" {
		t.Errorf("the command sees %s: %q", supervisorEnv, out[1])
	}
	// The same command, started here, has the descriptors this process
	// passes on (0, 1, 2, and any it inherited without close-on-exec).
	plain, err := exec.Command("sh", "-c", "ls /proc/$$/fd").Output()
	if err != nil {
		t.Fatal(err)
	}
	if fds, want := out[2:], strings.Fields(string(plain)); !slices.Equal(fds, want) {
		t.Errorf("the command has file descriptors %q, want %q", fds, want)
	}
	started := sink.waitFor(t, "process started", func(e map[string]any) bool { return e["@message"] == "process started" })
	pid, _ := strconv.Atoi(strings.TrimPrefix(out[0], "pid "))
	if started["supervised"] != true || started["pid"] != float64(pid) || started["pgid"] == float64(pid) {
		t.Errorf("process started: %v, want supervised, pid %d and another pgid", started, pid)
	}
	if pgid, ok := started["pgid"].(float64); ok {
		waitGone(t, int(pgid))
	}
}

// A supervised command's exit status and signal are its own.
func TestSupervisorExitStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		script string
		code   int
		sig    syscall.Signal
		says   string
	}{
		{script: "exit 0"},
		{script: "exit 7", code: 7, says: "exit status 7"},
		{script: "kill -s KILL $$", code: -1, sig: syscall.SIGKILL, says: "signal: killed"},
		{script: "kill -s TERM $$", code: -1, sig: syscall.SIGTERM, says: "signal: terminated"},
		{script: "kill -s PIPE $$", code: -1, sig: syscall.SIGPIPE, says: "signal: broken pipe"},
		{script: "ulimit -c 0; kill -s SEGV $$", code: -1, sig: syscall.SIGSEGV, says: "signal: segmentation fault"},
		{script: "ulimit -c 0; kill -s QUIT $$", code: -1, sig: syscall.SIGQUIT, says: "signal: quit"},
	}
	for _, tt := range tests {
		t.Run(tt.script, func(t *testing.T) {
			t.Parallel()
			err := (&Exec{Command: []string{"sh", "-c", tt.script}}).Run(t.Context())
			if tt.says == "" {
				if err != nil {
					t.Fatalf("Run = %v, want nil", err)
				}
				return
			}
			var xe *ExitError
			if !errors.As(err, &xe) || xe.Code != tt.code || xe.Signal != tt.sig {
				t.Fatalf("Run = %v (%+v), want code %d, signal %v", err, xe, tt.code, tt.sig)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not say %q", err, tt.says)
			}
		})
	}
}

// Without an executable to start as a supervisor, the command leads its
// own group, as before, and the warning is logged once.
func TestExecWithoutSupervisor(t *testing.T) {
	needProc(t)
	saved := supervisorExecutable
	supervisorExecutable = func() (string, error) { return "", errors.New("no executable") }
	noSupervisorWarning = sync.Once{}
	defer func() { supervisorExecutable = saved }()

	sink, log := newLogSink()
	for range 2 {
		e := &Exec{Command: []string{"sh", "-c", `read -r _ _ _ _ pgid _ < /proc/$$/stat; echo "$$ $pgid"`}, Logger: log}
		if err := e.Run(t.Context()); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	entries := sink.entries(t)
	out := lines(t, entries, "stdout")
	for _, l := range out {
		if pid, pgid, _ := strings.Cut(l, " "); pid != pgid {
			t.Errorf("pid and pgid %q: want the command to lead its group", l)
		}
	}
	if len(out) != 2 {
		t.Errorf("stdout = %q, want 2 lines", out)
	}
	warnings := 0
	for _, e := range entries {
		if e["@level"] == "warn" && strings.Contains(fmt.Sprint(e["error"]), "no executable") {
			warnings++
		}
	}
	if warnings != 1 {
		t.Errorf("%d warnings in 2 runs, want 1", warnings)
	}

	// How much the supervisor adds to a run.
	const n = 10
	var took [2]time.Duration
	for i, exe := range []func() (string, error){supervisorExecutable, saved} {
		supervisorExecutable = exe
		start := time.Now()
		for range n {
			if err := (&Exec{Command: []string{"true"}}).Run(t.Context()); err != nil {
				t.Fatalf("Run: %v", err)
			}
		}
		took[i] = time.Since(start) / n
	}
	t.Logf("a run of true: %v without a supervisor, %v with one", took[0], took[1])
}

// In a program that has not called Supervise, a run fails with a clear
// error and starts nothing: neither the command nor this program again.
func TestExecWithoutSupervise(t *testing.T) {
	supervising.Store(false)
	defer supervising.Store(true)
	marker := filepath.Join(t.TempDir(), "ran")
	err := (&Exec{Command: []string{"touch", marker}}).Run(t.Context())
	if !errors.Is(err, ErrNoSupervisor) || !strings.Contains(err.Error(), "call execjob.Supervise first thing in main") {
		t.Fatalf("Run = %v, want ErrNoSupervisor, saying what to call", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the command ran: %v", err)
	}
	if code, ok := Supervise(); ok || code != 0 || !supervising.Load() {
		t.Errorf("Supervise = %d, %v outside a supervisor, enabled %v; want 0, false, true", code, ok, supervising.Load())
	}
}
