// Command skewed is the scheduler command with its clock shifted by
// CHAOS_CLOCK_OFFSET (a duration such as "-800ms"): the fault suite's
// replica on a host whose clock is wrong. It is the same daemon as
// cmd/scheduler otherwise.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/jobs/execjob"
	"github.com/lockcron/lockcron/scheduler"
)

func main() {
	if code, ok := execjob.Supervise(); ok {
		os.Exit(code)
	}
	off, err := time.ParseDuration(os.Getenv("CHAOS_CLOCK_OFFSET"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "skewed: CHAOS_CLOCK_OFFSET: %v\n", err)
		os.Exit(2)
	}
	os.Exit(daemon.Main(os.Args[1:], daemon.Options{
		SchedulerOptions: []scheduler.Option{scheduler.WithClock(testclock.Offset(off))},
	}))
}
