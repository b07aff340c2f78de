// Package execjob is the exec job kind: Exec, a jobs.Runner that runs a
// program once per run, with its supervisor, which ends the run's
// processes when this process dies, however it dies.
//
// A program that runs exec jobs calls Supervise first thing in main; the
// supervisor of each run is that program started again, and Supervise is
// where it becomes one:
//
//	func main() {
//		if code, ok := execjob.Supervise(); ok {
//			os.Exit(code)
//		}
//		r := &execjob.Exec{Command: []string{"pg_dump", "-f", "/backup/db.sql"}, Grace: 30 * time.Second, Logger: log}
//		// ... schedule r
//	}
//
// Without that call, Run fails with ErrNoSupervisor and starts nothing.
// This package has no init function and starts nothing until Run is
// called; a program that schedules only Go funcs does not link it.
//
// Exec runs a program (no shell unless its Command asks for one) with the
// run's jobs.Info in its environment, LOCKCRON_JOB, LOCKCRON_TICK,
// LOCKCRON_TOKEN, LOCKCRON_REPLICA, LOCKCRON_ATTEMPT and LOCKCRON_TRIGGER
// (a manual run's number, empty for scheduled runs), a manual run's
// parameters as LOCKCRON_PARAM_<NAME> (jobs.Info.Params), and
// LOCKCRON_PARENT (job@tick) for a run that follows another, which win over
// variables of the same name; Exec.Env may not set LOCKCRON_* names. Its
// stdout and stderr are logged line by line (message "output", keys job,
// tick, stream, line). The process runs in a process group of its own: when
// the run's ctx ends, the whole group gets SIGTERM, then SIGKILL after
// Exec.Grace (DefaultGrace, 10s); when the command exits, what it left in
// its group is ended the same way. The group is led by the supervisor,
// which kills the whole group with SIGKILL when this process dies, however
// it dies (SIGKILL included): on Linux, within 250 ms. Exec's doc says how,
// and where that falls short (processes that leave the group, a supervisor
// killed on its own, containers). A status other than 0 is an *ExitError
// with the code and the last lines of stderr. KillRunning ends every run's
// group at once, for a daemon that stops without waiting.
//
// When the run's ctx holds a span (the scheduler's job.run, with tracing
// on), the process gets TRACEPARENT and TRACESTATE in its environment
// (OpenTelemetry's convention for environment variables as carriers; an
// inherited TRACEPARENT is dropped), so that its own spans join the run's
// trace.
//
// Config calls Validate (errors wrapping jobs.ErrInvalid that name the
// field) before it builds a job; Run validates too. A run stopped by its
// ctx returns an error that wraps ctx.Err() and context.Cause(ctx).
// Nothing in this package panics.
package execjob
