package scheduler

import (
	"errors"
	"fmt"
)

// ErrRemoved is the cause of the ctx of a run that Remove cancelled
// (CancelRuns).
var ErrRemoved = errors.New("scheduler: job removed")

// A RemoveOption changes what Remove does.
type RemoveOption func(*removeOptions)

type removeOptions struct{ cancel bool }

// CancelRuns makes Remove cancel the runs of the job in progress on this
// replica (their ctx ends with cause ErrRemoved); each finishes under its
// job's OnShutdown policy, as at a stop, and releases its lock.
func CancelRuns() RemoveOption { return func(o *removeOptions) { o.cancel = true } }

// Remove takes the job named name out of the Scheduler: from the moment it
// returns, the job takes no new tick here, and its manual runs are refused
// with ErrUnknownJob. By default a run in progress finishes under its lock,
// as Quartz's deleteJob leaves running jobs alone: a removal is a change of
// plan, not an emergency. CancelRuns cancels such runs instead. Remove
// returns ErrUnknownJob for a name the Scheduler does not have and
// ErrClosed once it is stopping.
func (s *Scheduler) Remove(name string, opts ...RemoveOption) error {
	return fmt.Errorf("scheduler: remove job %q: %w", name, errors.ErrUnsupported)
}

// Update replaces the job named j.Name with j, validated as Add validates.
// From the moment it returns, the job's ticks follow j; a run in progress
// finishes under its lock with the old definition. No tick is run twice or
// lost at the moment of the change: a tick that was due and not yet fired
// runs once, under the new definition. Update returns ErrInvalid for a bad
// job, ErrUnknownJob for a name the Scheduler does not have, and ErrClosed
// once it is stopping.
func (s *Scheduler) Update(j Job) error {
	return fmt.Errorf("scheduler: update job %q: %w", j.Name, errors.ErrUnsupported)
}
