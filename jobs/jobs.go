package jobs

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is: the errors returned wrap them
// and name the func, or say what the run did.
var (
	// ErrPanic: the Runner panicked and Recover turned the panic into an
	// error, a *PanicError.
	ErrPanic = errors.New("jobs: panic")
	// ErrTimeout: the cause of the ctx a Timeout middleware gives its
	// Runner, and wrapped by the error it returns when that ctx timed out.
	ErrTimeout = errors.New("jobs: timed out")
	// ErrNotFound: Lookup of a name that is not registered.
	ErrNotFound = errors.New("jobs: no such func")
	// ErrDuplicate: Register of a name that is already registered. The
	// first registration stays.
	ErrDuplicate = errors.New("jobs: name taken")
	// ErrInvalid: a bad argument: an empty name or one with whitespace or
	// control characters, a nil Func or Runner.
	ErrInvalid = errors.New("jobs: invalid argument")
)

// Runner is the work a job does at each tick.
//
// Run must return when ctx ends; the scheduler cancels ctx with a cause
// (context.Cause) such as lock.ErrLockLost or scheduler.ErrClosed. Run
// returns nil on success. The scheduler runs a job's runs one at a time,
// under its lock; but a Run that ignores its ctx past a forced stop (the
// end of Shutdown's ctx, or Close) keeps running after its lock was
// released. A Runner shared between jobs must be safe for concurrent use.
type Runner interface {
	Run(ctx context.Context) error
}

// Func adapts a plain function to Runner. It is as safe for concurrent use
// as the function is.
type Func func(ctx context.Context) error

// Run calls f(ctx) and returns its error. What ctx cancellation does is up
// to f, which must return when ctx ends. A nil Func returns an error
// wrapping ErrInvalid instead of panicking.
func (f Func) Run(ctx context.Context) error {
	if f == nil {
		return fmt.Errorf("%w: nil Func", ErrInvalid)
	}
	return f(ctx)
}

// orInvalid returns r, or, if r is nil, a Runner whose Run returns
// ErrInvalid, so that wrapping a nil Runner never leads to a panic.
func orInvalid(r Runner) Runner {
	if r == nil {
		return Func(nil)
	}
	return r
}
