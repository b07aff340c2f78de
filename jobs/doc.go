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
// Runners too, in packages of their own (execjob.Exec, httpjob.HTTP), so
// that middleware and the scheduler treat every kind alike, and a program
// that schedules only Go funcs links neither.
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
// jobs pass to their process; http jobs send it as the Lockcron-* headers
// named by the Header constants. A manual run's parameters (Info.Params,
// the scheduler's TriggerParams) go to an exec job as
// LOCKCRON_PARAM_<NAME>, the name in upper case (ParamEnv), and to an http
// job as Lockcron-Param-<Name> headers, each _ of the name made a -
// (ParamHeader).
//
// Info holds a map (Params): it is not comparable with ==; compare the
// fields you need.
//
// # Errors
//
// Errors wrap the sentinels of this package (ErrPanic, ErrTimeout,
// ErrNotFound, ErrDuplicate, ErrInvalid) and name what they are about; match
// them with errors.Is. Nothing in this package panics, and it has no init
// function.
package jobs
