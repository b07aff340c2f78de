package scheduler

import "errors"

// Sentinel errors. Match them with errors.Is.
var (
	// ErrClosed: the Scheduler is stopping or stopped. Run returns it
	// after a stop, and it is the cause (context.Cause) of a run's ctx
	// cancelled by Shutdown or Close.
	ErrClosed = errors.New("scheduler: closed")
	// ErrInvalid: a bad job or option; the error names the job and the
	// field at fault.
	ErrInvalid = errors.New("scheduler: invalid")
	// ErrRunning: Run was called on a Scheduler that runs already.
	ErrRunning = errors.New("scheduler: already running")
	// ErrUnknownJob: Trigger, Pause or Resume of a job the Scheduler does
	// not have.
	ErrUnknownJob = errors.New("scheduler: no such job")
)
