// Package jobs holds the work a scheduled job does: a Runner, run once per
// tick by the scheduler under the job's lock.
//
//	var r jobs.Runner = jobs.Func(func(ctx context.Context) error {
//		info, _ := jobs.InfoFrom(ctx) // job, tick, fencing token, attempt
//		return backup(ctx, info.Token)
//	})
//	r = jobs.Chain(r, jobs.Recover(), jobs.Timeout(10*time.Minute))
//
// # Runners
//
// A Runner's Run must return when its ctx ends. The scheduler cancels that
// ctx with a cause, which context.Cause reports: lock.ErrLockLost when the
// run's lease is lost, scheduler.ErrClosed on a hard stop. Func adapts a
// plain function. The exec and http job kinds, built from config, are
// Runners too (Exec, HTTP), so middleware and the scheduler treat every kind
// alike.
//
// # Exec and HTTP jobs
//
// Exec runs a program (no shell unless its Command asks for one) with the
// run's Info in its environment, LOCKCRON_JOB, LOCKCRON_TICK,
// LOCKCRON_TOKEN, LOCKCRON_REPLICA, LOCKCRON_ATTEMPT and LOCKCRON_TRIGGER
// (a manual run's number, empty for scheduled runs), which win over
// variables of the same name; Exec.Env may not set LOCKCRON_* names. Its
// stdout and stderr are logged line by line (message "output", keys job,
// tick, stream, line). The process runs in a process group of its own: when
// the run's ctx ends, the whole group gets SIGTERM, then SIGKILL after
// Exec.Grace (DefaultGrace, 10s); when the command exits, what it left in
// its group is ended the same way. The group is led by a small supervisor
// process, this program started again, which kills the whole group with
// SIGKILL when this process dies, however it dies (SIGKILL included): on
// Linux, within 250 ms. Exec's doc says how, and where that falls short
// (processes that leave the group, a supervisor killed on its own,
// containers). A status other than 0 is an *ExitError with the code and
// the last lines of stderr.
//
//	r := &jobs.Exec{Command: []string{"pg_dump", "-f", "/backup/db.sql"}, Grace: 30 * time.Second, Logger: log}
//
// HTTP sends one request per run, with the run's Info in the headers
// Lockcron-Job, Lockcron-Tick, Lockcron-Token, Lockcron-Replica,
// Lockcron-Attempt and Lockcron-Trigger; HTTP.Headers may not set Lockcron-* names. It succeeds
// on any 2xx status, or on one of HTTP.ExpectStatus; another status is a
// *StatusError with the start of the body. Errors never show the URL's
// userinfo or query values, and neither kind logs request headers.
//
//	r := &jobs.HTTP{URL: "https://billing.internal/close-day", Method: "POST", Headers: map[string]string{"Authorization": "Bearer " + token}}
//
// Both carry the run's trace on: when the run's ctx holds a span (the
// scheduler's job.run, with tracing on), an HTTP job sends its W3C
// traceparent and tracestate headers, and an Exec job gets TRACEPARENT and
// TRACESTATE in its environment (OpenTelemetry's convention for
// environment variables as carriers; an inherited TRACEPARENT is dropped),
// so that the job's own spans join the run's trace.
//
// Config calls Validate on both (errors wrapping ErrInvalid that name the
// field) before it builds a job; Run validates too.
//
// # Middleware
//
// A Middleware wraps a Runner in another. Chain(r, a, b) is a(b(r)): the
// first middleware is the outermost, the first to see a run start and the
// last to see it end. Put Recover first so it also catches panics in the
// middleware after it. Timeout bounds a run; its ctx ends with cause
// ErrTimeout and its error wraps both ErrTimeout and
// context.DeadlineExceeded.
//
// # Registry
//
// Config files refer to Go code by name: a Registry maps names to Funcs.
// Programs usually Register their funcs on DefaultRegistry (through the
// package-level Register, from main or an init func) before the config is
// loaded; tests and embedders that want no global state make their own with
// NewRegistry. Register returns an error, it never panics: not for a
// duplicate, not for a bad name.
//
// # Info
//
// Info is what a run knows about itself: its job, tick, lock, fencing token,
// attempt and replica. The scheduler puts it in the run's ctx (WithInfo);
// code reads it with InfoFrom, for example to fence its writes with Token.
// Info.Env gives the same as LOCKCRON_* environment variables, which exec
// jobs pass to their process.
//
// # Errors
//
// Errors wrap the sentinels of this package (ErrPanic, ErrTimeout,
// ErrNotFound, ErrDuplicate, ErrInvalid) and name what they are about; match
// them with errors.Is. Failed Exec and HTTP runs return an *ExitError or a
// *StatusError, found with errors.As; a run stopped by its ctx returns an
// error that wraps ctx.Err() and context.Cause(ctx). Nothing in this
// package panics.
package jobs
