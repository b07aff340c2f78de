// Command worker is the fault suite's exec job. It records its run in the
// oracle (CHAOS_ORACLE, host:port): a Start, a write to the fenced resource
// every 50ms for CHAOS_HOLD (a duration), and an End. SIGTERM ends it early.
// It exits 0 after a run whose every write was accepted, 3 if the fence
// refused one, and 143 when terminated.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
)

func main() {
	hold, err := time.ParseDuration(os.Getenv("CHAOS_HOLD"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: CHAOS_HOLD: %v\n", err)
		os.Exit(2)
	}
	o := oracle.Open(os.Getenv("CHAOS_ORACLE"))
	defer o.Close()
	run := oracle.RunFromEnv(func(k string) string { return os.Getenv("LOCKCRON_" + k) })
	run.PID = os.Getpid()

	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		close(stop)
	}()
	status, err := o.Hold(run, hold, stop)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v\n", err)
		os.Exit(2)
	}
	switch status {
	case oracle.StatusFenced:
		os.Exit(3)
	case oracle.StatusTerminated:
		os.Exit(143)
	}
}
