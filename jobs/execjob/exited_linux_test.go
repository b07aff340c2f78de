package execjob

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A stop that comes after the command has exited on its own, before its
// exit was collected, is not a stop: the run's outcome is the command's.
// A command still running when the stop comes is stopped.
func TestCancelAfterTheCommandExited(t *testing.T) {
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}

	done := start("true")
	waitZombie(t, done.Process.Pid)
	if !exitedOnItsOwn(done.Process.Pid) {
		t.Error("exitedOnItsOwn = false for a command that has exited")
	}
	g := &group{}
	_ = g.cancel(done.Process.Pid, done.Process.Pid)
	if g.wasCancelled() {
		t.Error("a command that exited before the stop counts as stopped")
	}
	if err := done.Wait(); err != nil {
		t.Fatalf("the exited command's status was taken: %v", err)
	}
	if !exitedOnItsOwn(done.Process.Pid) {
		t.Error("exitedOnItsOwn = false for a command already reaped")
	}

	running := start("sleep", "30")
	if exitedOnItsOwn(running.Process.Pid) {
		t.Error("exitedOnItsOwn = true for a running command")
	}
	g = &group{}
	if err := g.cancel(running.Process.Pid, running.Process.Pid); err != nil {
		t.Fatal(err)
	}
	if !g.wasCancelled() {
		t.Error("a running command sent SIGTERM does not count as stopped")
	}
	if err := running.Wait(); err == nil {
		t.Error("sleep exited 0 after SIGTERM")
	}
}

// waitZombie polls until pid has exited and is not yet reaped.
func waitZombie(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		s := string(b)
		if f := strings.Fields(s[strings.LastIndex(s, ")")+1:]); len(f) > 0 && f[0] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d has not exited after 10s", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
