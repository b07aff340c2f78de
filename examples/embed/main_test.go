package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/scheduler"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runCmd runs the program's main logic with args and returns its exit code
// and output. REDIS_URL and LOCKCRON_* are cleared, so that the config
// stays on the in-memory backend whatever the environment says.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "REDIS_URL" || strings.HasPrefix(name, "LOCKCRON_") {
			t.Setenv(name, "")
		}
	}
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestValidateEmbedHCL(t *testing.T) {
	code, out, errOut := runCmd(t, "validate", "-config", "embed.hcl")
	if code != daemon.ExitOK {
		t.Fatalf("validate embed.hcl: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"valid; 3 job(s)", "in-memory", "127.0.0.1:9091", "report", "cleanup", "disk-usage"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	if errOut != "" {
		t.Errorf("validate wrote to stderr (warnings?):\n%s", errOut)
	}
}

func TestJobsEmbedHCL(t *testing.T) {
	code, out, errOut := runCmd(t, "jobs", "-config", "embed.hcl")
	if code != daemon.ExitOK {
		t.Fatalf("jobs: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"report", "cleanup", "disk-usage"} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs output lacks %q:\n%s", want, out)
		}
	}
}

func TestValidateUnregisteredFunc(t *testing.T) {
	src, err := os.ReadFile("embed.hcl")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(src), `func     = "report"`, `func     = "reprot"`, 1)
	if bad == string(src) {
		t.Fatal(`embed.hcl has no line func     = "report" to break`)
	}
	path := filepath.Join(t.TempDir(), "bad.hcl")
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCmd(t, "validate", "-config", path)
	if code != daemon.ExitError {
		t.Fatalf("validate with an unregistered func: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// The error names the place, the job, the func, and the funcs that are
	// registered, so that the typo is plain to see.
	for _, want := range []string{path + ":", `job "report"`, `"reprot" is not registered`, "known: cleanup, report", "1 problem(s)"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

func TestBadCommandLine(t *testing.T) {
	code, _, errOut := runCmd(t, "validate", "-config", "embed.hcl", "extra")
	if code != daemon.ExitUsage {
		t.Fatalf("exit %d, want 2\nstderr:\n%s", code, errOut)
	}
}

func TestReport(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf})
	info := jobs.Info{Job: "report", Tick: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC), Token: 42, Attempt: 1, Replica: "r1"}
	if err := report(log)(jobs.WithInfo(context.Background(), info)); err != nil {
		t.Fatalf("report: %v", err)
	}
	for _, want := range []string{"token=42", "tick=2026-01-02T03:04:00Z", "replica=r1"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, buf.String())
		}
	}
	if err := report(log)(context.Background()); err == nil {
		t.Error("report without run info: nil error")
	}
}

func TestCleanupStopsOnCancel(t *testing.T) {
	log := hclog.NewNullLogger()
	if err := cleanup(log, 3, time.Millisecond)(context.Background()); err != nil {
		t.Fatalf("cleanup: %v", err)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- cleanup(log, 1000, 10*time.Millisecond)(ctx) }()
	cancel(scheduler.ErrClosed) // as a stop does: the run is cut short at its next batch
	select {
	case err := <-done:
		if !errors.Is(err, scheduler.ErrClosed) {
			t.Errorf("cleanup after cancel: %v, want an error wrapping scheduler.ErrClosed", err)
		}
	case <-time.After(time.Second):
		t.Fatal("cleanup did not return within 1s of its ctx's end")
	}
}
