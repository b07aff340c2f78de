package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/fleet"
)

// ErrRemoved is the cause of the ctx of a run that Remove cancelled
// (CancelRuns).
var ErrRemoved = errors.New("scheduler: job removed")

// A RemoveOption changes what Remove does.
type RemoveOption func(*removeOptions)

type removeOptions struct{ cancel bool }

// CancelRuns makes Remove cancel the runs of the job in progress on this
// replica, and its claims waiting for the lock: their ctx ends with cause
// ErrRemoved, and each run finishes under its job's OnShutdown policy, as
// at a stop (handoff gives the tick back to a replica that still has the
// job), and releases its lock.
func CancelRuns() RemoveOption { return func(o *removeOptions) { o.cancel = true } }

// Remove takes the job named name out of the Scheduler: once it returns,
// the job takes no new tick here, its manual runs are refused with
// ErrUnknownJob, and its name may be added again. By default a run in
// progress finishes under its lock, as Quartz's deleteJob leaves running
// jobs alone: a removal is a change of plan, not an emergency, and a run
// cut short may leave its work half done. CancelRuns cancels such runs
// instead. The job's ledger and history stay in the store. Remove returns
// ErrUnknownJob for a name the Scheduler does not have, and ErrClosed once
// it is stopping.
func (s *Scheduler) Remove(name string, opts ...RemoveOption) error {
	var o removeOptions
	for _, f := range opts {
		f(&o)
	}
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return fmt.Errorf("scheduler: remove job %q: %w", name, ErrClosed)
	}
	e := s.entries[name]
	if e == nil {
		s.mu.Unlock()
		return fmt.Errorf("scheduler: remove job: %w: %q", ErrUnknownJob, name)
	}
	delete(s.entries, name)
	s.order = slices.DeleteFunc(s.order, func(x *entry) bool { return x == e })
	started := e.started
	if started {
		close(e.quit)
	}
	s.mu.Unlock()
	if o.cancel || !started {
		e.cancel(ErrRemoved)
	}
	if started {
		<-e.done
		e.retireIfIdle()
	}
	if started && s.members != nil {
		s.members.changed() // its group is the jobs'
	}
	s.log.Info("job removed", "job", name, "runs_cancelled", o.cancel)
	return nil
}

// Update replaces the job named j.Name with j, validated as Add validates
// it. Once it returns, the job's ticks follow j. A run in progress
// finishes under its lock with the definition it started with. No tick is
// run twice or lost at the change: the trigger loop of the old definition
// stops before the new one starts, and a tick that was due and not yet
// fired by the old one runs once, at once, under the new definition; from
// then on the ticks are the new schedule's, from now (no misfire catch-up:
// the job did not stop). Across the fleet the ledger keeps each tick once,
// whichever definition a replica has. Update returns ErrInvalid for a bad
// job (the old one keeps running), ErrUnknownJob for a name the Scheduler
// does not have, and ErrClosed once it is stopping.
func (s *Scheduler) Update(j Job) error {
	e, err := s.newEntry(j)
	if err != nil {
		return err
	}
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		e.cancel(ErrClosed)
		return fmt.Errorf("scheduler: update job %q: %w", j.Name, ErrClosed)
	}
	old := s.entries[j.Name]
	if old == nil {
		s.mu.Unlock()
		e.cancel(ErrUnknownJob)
		return fmt.Errorf("scheduler: update job: %w: %q", ErrUnknownJob, j.Name)
	}
	if err := s.kindConflict(e.job, old); err != nil {
		s.mu.Unlock()
		e.cancel(err)
		return err
	}
	if err := s.checkChainAdd(e.job, old); err != nil {
		s.mu.Unlock()
		e.cancel(err)
		return err
	}
	s.entries[j.Name] = e
	s.tel.perReplica(j.Name, e.job.everyReplica())
	s.order[slices.Index(s.order, old)] = e
	started := old.started
	if started {
		close(old.quit)
	} else {
		old.cancel(ErrRemoved)
	}
	s.mu.Unlock()
	if started {
		<-old.done
		old.retireIfIdle()
		old.mu.Lock()
		resume, lastTick, lastOutcome := old.next, old.lastTick, old.lastOutcome
		old.mu.Unlock()
		e.mu.Lock()
		e.lastTick, e.lastOutcome = lastTick, lastOutcome // Status goes on from them
		e.mu.Unlock()
		s.mu.Lock()
		e.prev, e.resume = old, resume
		if !s.closing {
			s.startLoop(e)
		}
		s.mu.Unlock()
	}
	s.log.Info("job updated", "job", j.Name, "schedule", e.job.Schedule, "digest", e.digest, "was", old.digest)
	return nil
}

// takeOver is the start of the loop of a definition that replaced another
// (Update), once the ticks the old one still decided on are claimed or
// let go: the tick that the old loop did not fire, if it is due, runs now;
// then the new schedule's next tick.
func (s *Scheduler) takeOver(e *entry) time.Time {
	now := s.opt.clock.Now()
	if !e.resume.IsZero() && !e.resume.After(now) {
		s.fire(e, e.resume)
	}
	return e.sched.Next(now)
}

// digest is a digest of j's definition, j's defaults filled in: every
// field but Run, which Revision stands for. Two replicas whose digests of
// a job differ run different versions of it.
func (j *Job) digest() string {
	loc := ""
	if j.Location != nil {
		loc = j.Location.String()
	}
	fields := []string{
		j.Name, j.Schedule, j.Jitter.String(), loc, j.LockName, string(j.LockKind), j.Timeout.String(),
		string(j.Overlap), string(j.Misfire), j.MisfireGrace.String(),
		strconv.Itoa(j.Retries), j.Backoff.String(), string(j.OnShutdown),
		strconv.Itoa(j.MaxConcurrency), j.ConcurrencyGroup,
		strconv.Itoa(j.HistoryKeep), j.HistoryMaxAge.String(), j.Revision,
	}
	if j.StartDeadline > 0 {
		// Only when set: the digests of the jobs without one stay as they
		// were before the setting came, so a rolling upgrade is not taken
		// for a change of definition.
		fields = append(fields, "start_deadline="+j.StartDeadline.String())
	}
	if j.AlertAfter > 0 {
		fields = append(fields, "alert_after="+j.AlertAfter.String()) // likewise
	}
	if j.PauseAfterFailures > 0 {
		fields = append(fields, "pause_after_failures="+strconv.Itoa(j.PauseAfterFailures)) // likewise
	}
	if len(j.Exclude) > 0 {
		fields = append(fields, "exclude="+calendarNames(j.Exclude)) // likewise
	}
	if j.everyReplica() {
		fields = append(fields, "replicas="+string(j.Replicas)) // likewise
	}
	if len(j.After) > 0 {
		fields = append(fields, "after="+strings.Join(j.After, ","), "when="+string(j.When)) // likewise
	}
	for i, f := range fields {
		fields[i] = strconv.Quote(f)
	}
	sum := sha256.Sum256([]byte(strings.Join(fields, ",")))
	return hex.EncodeToString(sum[:8])
}

// mismatchHold is how long a definition mismatch is remembered after the
// last claim that found it: a claim that finds this replica's own
// definition only says that the claim before it was made by a replica
// with the same one, so the mismatch ends when none has been found for so
// long.
const mismatchHold = 10 * time.Minute

// checkDefinition compares the definition that cl found in the ledger with
// e's: another one means that the replica that claimed before this one
// runs another version of the job (a change half rolled out), unless this
// replica recorded it itself (before an Update or a restart). It warns
// once per other definition found, and Status.OtherDigest and the job's
// mismatch gauge say it until none has been found for mismatchHold.
func (s *Scheduler) checkDefinition(e *entry, cl *fleet.Claim, log hclog.Logger) {
	other := cl.Definition
	if other == e.digest || ownerClientID(cl.DefinitionBy) == s.locks.ID() {
		// Recorded by this replica: before an Update, or before a
		// restart with the same id.
		other = ""
	}
	now := time.Now()
	var warn, cleared bool
	e.mu.Lock()
	switch {
	case other != "" && other != e.otherDigest:
		warn = true
		e.otherDigest, e.otherAt = other, now
	case other != "":
		e.otherAt = now
	case e.otherDigest != "" && now.Sub(e.otherAt) > mismatchHold:
		cleared = true
		e.otherDigest = ""
	}
	e.mu.Unlock()
	switch {
	case warn && e.job.everyReplica():
		// Its own ledger: the other definition was this replica's own,
		// before a restart.
		log.Warn("this replica's previous process ran another definition of this job (changed since)",
			"digest", e.digest, "other_digest", other)
	case warn:
		log.Warn("another replica runs another definition of this job (a change half rolled out?); the tick still runs once",
			"digest", e.digest, "other_digest", other)
	case cleared:
		log.Info("no other definition of this job found for a while: the fleet runs one again", "digest", e.digest, "after", mismatchHold)
	}
}

// errRetired ends the ctx of an entry that Update replaced or Remove
// took out, once nothing of it runs here any more.
var errRetired = errors.New("scheduler: job definition retired")

// retireIfIdle ends e's ctx if its loop has returned after Update or
// Remove and no claim or run of it is left on this replica, so that the
// ctx of a definition replaced does not live on until the stop. Nothing
// starts on e afterwards: its loop is over, and it is no longer among the
// Scheduler's jobs for a manual run.
func (e *entry) retireIfIdle() {
	select {
	case <-e.quit:
	default:
		return // still the job's definition
	}
	select {
	case <-e.done:
	default:
		return // the loop may still fire a tick: Update or Remove calls this again once it has returned
	}
	e.mu.Lock()
	idle := e.inflight+e.manuals == 0
	e.mu.Unlock()
	if idle {
		e.cancel(errRetired)
	}
}

// cancelled reports whether e's ctx has ended: the Scheduler
// stops, or Remove cancelled its runs.
func (e *entry) cancelled() bool { return e.ctx.Err() != nil }

// ownerClientID is the lock Client's ID in an owner id: what is before its
// last two colons (the Client's instance and a number).
func ownerClientID(owner string) string {
	i := strings.LastIndexByte(owner, ':')
	if i <= 0 {
		return owner
	}
	if j := strings.LastIndexByte(owner[:i], ':'); j > 0 {
		return owner[:j]
	}
	return owner[:i]
}
