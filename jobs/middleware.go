package jobs

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// Middleware wraps a Runner in another, which adds something around each
// run (recovery, a timeout, logging, a span). A Middleware must be safe for
// concurrent use, and so must the Runners it returns if the wrapped ones
// are; those of this package are.
type Middleware func(Runner) Runner

// Chain wraps r in mw; mw[0] is the outermost: Chain(r, a, b) is a(b(r)),
// so a sees each run start first and end last. Nil middlewares are skipped.
// A nil r, or a nil Runner returned by a middleware, becomes a Runner that
// returns an error wrapping ErrInvalid. Chain itself does not touch ctx; the
// result is as safe for concurrent use as its parts.
func Chain(r Runner, mw ...Middleware) Runner {
	r = orInvalid(r)
	for i := len(mw) - 1; i >= 0; i-- {
		if mw[i] != nil {
			r = orInvalid(mw[i](r))
		}
	}
	return r
}

// PanicError is the error Recover returns for a panic: the value passed to
// panic and the stack of the panicking goroutine (runtime/debug.Stack).
// It matches ErrPanic with errors.Is and, if Value is an error, Value too,
// so errors.As finds a runtime.Error from a nil map write.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the panicking goroutine's stack, from debug.Stack
}

// Error returns "jobs: panic: " and the value, on one line; the stack is in
// Stack, and printed by the %+v verb.
func (e *PanicError) Error() string {
	return fmt.Sprintf("%v: %v", ErrPanic, e.Value)
}

// Unwrap returns ErrPanic, and Value if it is an error.
func (e *PanicError) Unwrap() []error {
	if err, ok := e.Value.(error); ok {
		return []error{ErrPanic, err}
	}
	return []error{ErrPanic}
}

// Format prints Error() for %v and %s, and Error() followed by the stack
// for %+v.
func (e *PanicError) Format(s fmt.State, verb rune) {
	switch {
	case verb == 'v' && s.Flag('+'):
		fmt.Fprintf(s, "%s\n%s", e.Error(), e.Stack)
	case verb == 'v' || verb == 's':
		fmt.Fprint(s, e.Error())
	case verb == 'q':
		fmt.Fprintf(s, "%q", e.Error())
	default:
		fmt.Fprintf(s, "%%!%c(*jobs.PanicError=%s)", verb, e.Error())
	}
}

// Recover returns a Middleware that turns a panic in the wrapped Runner
// into an error: a *PanicError, which wraps ErrPanic and carries the panic
// value and the stack. Errors and results of runs that do not panic pass
// through unchanged, and ctx is passed on as it is. Only panics on the
// goroutine that calls Run are caught, not those of goroutines the Runner
// starts. The Middleware and its Runners are safe for concurrent use if the
// wrapped Runner is.
func Recover() Middleware {
	return func(next Runner) Runner {
		return recoverer{orInvalid(next)}
	}
}

type recoverer struct{ next Runner }

func (r recoverer) Run(ctx context.Context) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return r.next.Run(ctx)
}

// Timeout returns a Middleware that runs the wrapped Runner with a ctx that
// ends d after the run starts, with cause ErrTimeout
// (context.WithTimeoutCause). If that ctx ended by this timeout, the error
// returned wraps both ErrTimeout and context.DeadlineExceeded, and the
// Runner's own error if it returned one: even if the Runner returned nil
// late, or returned ctx.Err(). Otherwise, the Runner's result passes
// through unchanged; that includes a run whose parent ctx ended first (for
// example by an earlier deadline, or by cancellation with lock.ErrLockLost).
// d <= 0 means no timeout: the Runner is returned unwrapped. The Middleware
// and its Runners are safe for concurrent use if the wrapped Runner is.
func Timeout(d time.Duration) Middleware {
	return func(next Runner) Runner {
		next = orInvalid(next)
		if d <= 0 {
			return next
		}
		return timeout{next: next, d: d}
	}
}

type timeout struct {
	next Runner
	d    time.Duration
}

func (t timeout) Run(ctx context.Context) error {
	tctx, cancel := context.WithTimeoutCause(ctx, t.d, ErrTimeout)
	defer cancel()
	err := t.next.Run(tctx)
	if !t.timedOut(ctx, tctx) {
		return err
	}
	switch {
	case err == nil:
		return fmt.Errorf("%w after %v: %w", ErrTimeout, t.d, context.DeadlineExceeded)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w after %v: %w", ErrTimeout, t.d, err)
	default:
		return fmt.Errorf("%w after %v: %w: %w", ErrTimeout, t.d, context.DeadlineExceeded, err)
	}
}

// timedOut reports whether tctx, made from ctx by Run, ended by the timer
// of this Timeout. If ctx's deadline came first, context.WithTimeoutCause
// made no timer of its own and tctx's deadline is ctx's: then ctx's end is
// what ended tctx, even if its cause is ErrTimeout from an outer Timeout
// (which will report it).
func (t timeout) timedOut(ctx, tctx context.Context) bool {
	if !errors.Is(tctx.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(tctx), ErrTimeout) {
		return false
	}
	parent, ok := ctx.Deadline()
	own, _ := tctx.Deadline()
	return !ok || own.Before(parent)
}
