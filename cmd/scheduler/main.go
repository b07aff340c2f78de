// Command scheduler runs cron jobs once across a fleet: the daemon (run),
// and the commands that check and steer it (validate, jobs, locks,
// trigger, pause, resume). See `scheduler --help`, and daemon.Main for the
// exit codes.
package main

import (
	"os"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
)

func main() { os.Exit(daemon.Main(os.Args[1:], daemon.Options{})) }
