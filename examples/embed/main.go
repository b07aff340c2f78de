// Command embed is the scheduler command with two Go job funcs of its own:
// it registers "report" and "cleanup" in a jobs.Registry and hands that
// registry to daemon.Main, so that it has the same commands as the
// scheduler binary (run, validate, jobs, locks, trigger, pause, resume)
// and its config files may name the funcs:
//
//	go run ./examples/embed validate -config examples/embed/embed.hcl
//	go run ./examples/embed run      -config examples/embed/embed.hcl
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/execjob"
)

func main() {
	// Its config may hold exec jobs, whose supervisor is this program
	// started again.
	if code, ok := execjob.Supervise(); ok {
		os.Exit(code)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process around it: it runs the scheduler command
// with args (without the program's name), writes to stdout and stderr, and
// returns the exit code (daemon.ExitOK, ExitError or ExitUsage).
func run(args []string, stdout, stderr io.Writer) int {
	log := hclog.New(&hclog.LoggerOptions{Name: "embed", Output: stderr})
	reg, err := newRegistry(log)
	if err != nil {
		fmt.Fprintf(stderr, "embed: %v\n", err)
		return daemon.ExitError
	}
	return daemon.Main(args, daemon.Options{Registry: reg, Stdout: stdout, Stderr: stderr})
}

// newRegistry returns a registry with this program's funcs. A registry of
// its own, rather than jobs.DefaultRegistry, keeps run free of global
// state, so that tests may call it again and again.
func newRegistry(log hclog.Logger) (*jobs.Registry, error) {
	reg := jobs.NewRegistry()
	for name, f := range map[string]jobs.Func{
		"report":  report(log.Named("report")),
		"cleanup": cleanup(log.Named("cleanup"), 5, 500*time.Millisecond),
	} {
		if err := reg.Register(name, f); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

// report logs the run's info. A real report would pass info.Token to the
// store it writes to, which refuses a token lower than the last it saw:
// then a replica that lost its lock without knowing (a long pause) cannot
// overwrite a newer run's report.
func report(log hclog.Logger) jobs.Func {
	return func(ctx context.Context) error {
		info, ok := jobs.InfoFrom(ctx)
		if !ok {
			return fmt.Errorf("report: no run info in ctx")
		}
		log.Info("report written", "tick", info.Tick.Format(time.RFC3339), "token", info.Token,
			"attempt", info.Attempt, "replica", info.Replica)
		return nil
	}
}

// cleanup works through batches, one every step, and stops between two
// batches when its ctx ends (timeout, lost lock, or this replica's stop):
// it returns the ctx's cause, so that the scheduler records the run as cut
// short and, on a stop, hands the tick to another replica, which runs it
// again (cleanup is idempotent).
func cleanup(log hclog.Logger, batches int, step time.Duration) jobs.Func {
	return func(ctx context.Context) error {
		info, _ := jobs.InfoFrom(ctx)
		for i := 1; i <= batches; i++ {
			select {
			case <-ctx.Done():
				log.Warn("cleanup stopped", "tick", info.Tick.Format(time.RFC3339), "batches_done", i-1, "cause", context.Cause(ctx))
				return fmt.Errorf("cleanup: stopped after %d of %d batches: %w", i-1, batches, context.Cause(ctx))
			case <-time.After(step):
			}
		}
		log.Info("cleanup done", "tick", info.Tick.Format(time.RFC3339), "batches", batches, "attempt", info.Attempt)
		return nil
	}
}
