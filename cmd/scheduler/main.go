// Command scheduler runs cron jobs once across a fleet: the daemon (run),
// and the commands that check and steer it (validate, jobs, locks,
// trigger, pause, resume). See `scheduler --help`, and daemon.Main for the
// exit codes.
package main

import (
	"os"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/jobs/execjob"
)

func main() {
	// The supervisor of each exec run is this program started again.
	if code, ok := execjob.Supervise(); ok {
		os.Exit(code)
	}
	os.Exit(daemon.Main(os.Args[1:], daemon.Options{}))
}
