package scheduler

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/lockcron/lockcron/jobs"
)

// A Job is a name, a schedule and the work to run at each of its ticks,
// with the policies that say how its runs share the fleet. The zero value
// of every policy is its default.
type Job struct {
	// Name is unique within a Scheduler; it names the job in the ledger,
	// logs, spans and metrics. It must not hold { or }.
	Name string
	// Schedule is a cron expression: five fields, or six with seconds
	// first; a descriptor (@hourly, @daily, @every 30s); with an optional
	// CRON_TZ=Zone/Name prefix. @every d fires at the multiples of d since
	// the Unix epoch, so that every replica computes the same ticks. A field
	// may hold Jenkins' H, a value picked by a hash of Name: H, H/n, H(a-b),
	// H(a-b)/n (see the package doc, "Spreading the load").
	Schedule string
	// Jitter, if above 0, moves every tick of Schedule later by an offset
	// in [0, Jitter) derived from a hash of Name, the same on every replica
	// and across restarts, and never as far as the next tick; the ticks so
	// moved (whole milliseconds) are the job's ticks everywhere: ledger,
	// catch-up, Status.Next. At most MaxJitter. Default 0: the ticks of
	// Schedule.
	Jitter time.Duration
	// Run is the work. It gets a ctx that ends on timeout, on lock loss
	// (cause lock.ErrLockLost) and on shutdown (cause ErrClosed), and that
	// carries its jobs.Info (jobs.InfoFrom). A panic in it is recovered
	// into an error wrapping jobs.ErrPanic.
	Run jobs.Runner

	// LockName is the name of the lock the runs take. Default Name. Jobs that
	// share a lock never run at the same time; each keeps its own ledger.
	LockName string
	// LockKind is the kind of lock: LockReentrant (default).
	LockKind LockKind
	// Timeout bounds each try; 0 means none. A try that times out fails
	// with an error wrapping jobs.ErrTimeout.
	Timeout time.Duration
	// Overlap says what a tick does while a run of an earlier tick holds
	// the lock: OverlapSkip (default), OverlapQueue or OverlapReplace.
	Overlap Overlap
	// Misfire says what happens to ticks missed while every replica was
	// down: MisfireSkip (default) or MisfireRunOnce.
	Misfire Misfire
	// MisfireGrace is how late the latest missed tick may be for
	// MisfireRunOnce to run it. Default DefaultMisfireGrace.
	MisfireGrace time.Duration
	// StartDeadline, if above 0, is how late after its tick a run of the
	// job may start, measured on the lock store's clock (Redis TIME, the
	// same for every replica). A tick whose run cannot start by then,
	// whatever held it up (the lock held by another run, the overlap
	// queue, the fallback of replicas not first in rank, the concurrency
	// group, a retry's backoff, a takeover after its claimant died or gave
	// it back, a misfire catch-up), is not run: the replica whose claim
	// took it records it once across the fleet as OutcomeDeadlineMissed.
	// A retry that would start after it is not made. Manual runs
	// (Trigger) have none. Default 0: no deadline, as Kubernetes'
	// startingDeadlineSeconds left out.
	StartDeadline time.Duration
	// AlertAfter, if above 0, is how long a run of the job may go before
	// it is announced as running long: once per run, by the replica that
	// runs it, with a warning in the log, a call of WithOnRunningLong (the
	// daemon's notify event running_long) and a mark in JobView; the
	// gauge lockcron.job.running says how long the run has gone. It is
	// measured from the run's start (its claim taking the lock), retries
	// included, on the running replica's clock; manual runs have it too.
	// The run is not stopped (Timeout does that). Default 0: no
	// announcement, as an Airflow task without an sla.
	AlertAfter time.Duration
	// PauseAfterFailures, if above 0, pauses the job fleet-wide after so
	// many failed runs in a row (OutcomeFailed, after its retries;
	// whichever replicas ran them): the finish of the run that brings the
	// count there pauses the job's ledger in the same step, once across
	// the fleet, with the note "paused after N failed runs in a row" and
	// the replica as its author; that replica logs a warning and calls
	// WithOnRun with a Run of OutcomeAutoPaused. A run that succeeds
	// (OutcomeRan) and a resume set the count back to 0; other outcomes
	// leave it. Manual runs are not counted. Default 0: never, as dkron's
	// jobs without their stop-after-failures.
	PauseAfterFailures int
	// Retries is how many times a failed try is tried again within the
	// same tick, under the same lease. Default 0.
	Retries int
	// Backoff is the wait before the first retry; it doubles with each
	// retry, up to MaxBackoff. Default DefaultBackoff.
	Backoff time.Duration
	// OnShutdown says what happens to a run interrupted by this replica's
	// stop: ShutdownHandoff (default) or ShutdownAbandon.
	OnShutdown ShutdownPolicy
	// Location is the time zone of a Schedule without CRON_TZ=. Default
	// the Scheduler's (WithLocation, UTC).
	Location *time.Location
	// MaxConcurrency, if above 0, limits how many runs of the jobs that
	// share ConcurrencyGroup go at once across the fleet: a run holds one
	// permit of lock.Client.Semaphore(group, MaxConcurrency) besides its
	// job's lock, waiting for it under its job's lock. Every job of a group
	// must give the same MaxConcurrency. Default 0: no limit.
	MaxConcurrency int
	// ConcurrencyGroup names the semaphore of MaxConcurrency. Default the
	// job's LockName.
	ConcurrencyGroup string
	// HistoryKeep is how many entries the job's run history keeps
	// (Scheduler.History). Default the Scheduler's (WithHistory, 100).
	HistoryKeep int
	// HistoryMaxAge is how long an entry of the run history is kept.
	// Default the Scheduler's (WithHistory, 30 days).
	HistoryMaxAge time.Duration
	// Exclude are calendars whose times the job's ticks are not run in
	// (Calendar): a tick that falls in one is not claimed, and it is
	// recorded once across the fleet in the history as OutcomeExcluded,
	// its reason naming the calendar. The names are part of the
	// definition digest (Digest), not what the calendars hold (the daemon
	// puts that in Revision). Default none.
	Exclude []Calendar
	// Revision names the version of what Run does, which the Scheduler
	// cannot see (a func): the daemon sets it to a digest of the job's
	// config block. It is part of the job's definition digest (Digest),
	// which each claim records in the job's ledger so that replicas that
	// run another definition of the job are noticed. Default "".
	Revision string
	// Replicas says which replicas run each tick: ReplicasOne (default),
	// once across the fleet; or ReplicasAll, every replica that runs the
	// job, once each, with no fleet-wide lock (see the package doc,
	// "Every replica"). ReplicasAll refuses MaxConcurrency and
	// PauseAfterFailures, and OnShutdown ShutdownHandoff; its OnShutdown
	// defaults to ShutdownAbandon.
	Replicas Replicas
	// Params are the names of the parameters a manual run of the job
	// accepts (TriggerParams): each made of a-z, 0-9 and _. A run gets
	// those it was given in jobs.Info.Params. Default none: a manual run
	// takes no parameters.
	Params []string
	// After names the jobs this one follows, instead of a Schedule (which
	// must then be ""): it runs once across the fleet for each run of its
	// parents that ended with an outcome in When, with the parent's tick
	// as its tick; with several parents (which must share a schedule), once
	// all of them have finished that tick so (see the package doc, "Jobs
	// that follow jobs"). Default none: the job runs on its Schedule.
	After []string
	// When is the outcome of the parents' runs that starts this job
	// (After): WhenSuccess (default), WhenFailure or WhenAlways.
	When When
}

// LockKind is the kind of lock a job's runs take.
type LockKind string

const (
	// LockReentrant is lock.Client.Mutex: Redisson's RLock.
	LockReentrant LockKind = "reentrant"
	// LockFair is lock.Client.FairMutex: claims that wait for the lock (a
	// tick queued behind a run, overlap queue; a run of the same tick on
	// another replica) take it first come, first served across replicas
	// and jobs sharing the lock, and an unlock wakes only the first of
	// them (lock.Client.FairLedger).
	LockFair LockKind = "fair"
)

// Overlap is what a tick does while a run of an earlier tick holds the
// job's lock.
type Overlap string

const (
	// OverlapSkip skips the tick, counted as skipped_busy.
	OverlapSkip Overlap = "skip"
	// OverlapQueue runs the tick when the earlier run ends. At most one
	// tick waits so on each replica; a further one is skipped_busy.
	OverlapQueue Overlap = "queue"
	// OverlapReplace ends the earlier run, wherever in the fleet it runs
	// (its ctx ends with cause ErrReplaced; outcome replaced), and runs
	// the tick as soon as the lock is free. At most one tick waits so on
	// each replica; a further one is skipped_busy.
	OverlapReplace Overlap = "replace"
)

// Misfire is what happens, when a replica starts, to ticks that were due
// while every replica was down: the ledger's latest claimed tick tells.
type Misfire string

const (
	// MisfireSkip drops them, counted as missed.
	MisfireSkip Misfire = "skip"
	// MisfireRunOnce runs the latest of them once, if it is no older than
	// MisfireGrace; the others are counted as missed.
	MisfireRunOnce Misfire = "run_once"
)

// ShutdownPolicy is what happens to a run interrupted by this replica's
// stop.
type ShutdownPolicy string

const (
	// ShutdownHandoff gives the tick back: another replica that waits for
	// it runs it at once (outcome handed_off here). A replica that dies
	// mid-run (SIGKILL) has its tick run again by the next replica to take
	// the lock, within one lease.
	ShutdownHandoff ShutdownPolicy = "handoff"
	// ShutdownAbandon marks the tick done (outcome interrupted); a tick
	// whose replica died is counted as interrupted by the replica that
	// finds it, and not run again.
	ShutdownAbandon ShutdownPolicy = "abandon"
)

// Defaults of Job fields.
const (
	DefaultMisfireGrace = time.Hour
	DefaultBackoff      = time.Second
	MaxBackoff          = time.Minute
)

// parser reads five fields, six with seconds first, and descriptors.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// schedule gives the tick after t.
type schedule interface{ Next(t time.Time) time.Time }

// A Schedule gives the tick after a time.
type Schedule interface {
	// Next returns the first tick strictly after t.
	Next(t time.Time) time.Time
}

// ParseSchedule reads spec as Job.Schedule does, in loc where spec has no
// CRON_TZ= prefix (UTC if loc is nil). The error says what is wrong with
// spec; it does not wrap ErrInvalid.
//
// H in spec needs a job's name to hash: ParseSchedule refuses it; use
// ParseJobSchedule.
func ParseSchedule(spec string, loc *time.Location) (Schedule, error) {
	if loc == nil {
		loc = time.UTC
	}
	return parseSchedule(spec, loc)
}

// inZone evaluates a cron schedule in a zone, unless it names its own.
type inZone struct {
	s   cron.Schedule
	loc *time.Location
}

func (z inZone) Next(t time.Time) time.Time { return z.s.Next(t.In(z.loc)) }

// every fires at the multiples of d since the Unix epoch.
type every time.Duration

func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e).Nanoseconds()
	n := t.UnixNano()
	return time.Unix(0, (n/d+1)*d).In(t.Location())
}

// zone is the name of the time zone j's schedule is read in: the one its
// CRON_TZ= (or TZ=) prefix names, else j.Location's.
func (j *Job) zone() string {
	s := strings.TrimSpace(j.Schedule)
	if strings.HasPrefix(s, "CRON_TZ=") || strings.HasPrefix(s, "TZ=") {
		if tz, _, ok := strings.Cut(s, " "); ok {
			_, name, _ := strings.Cut(tz, "=")
			return name
		}
	}
	if j.Location == nil {
		return time.UTC.String()
	}
	return j.Location.String()
}

// parseSchedule reads a schedule without a job: no H, no jitter.
func parseSchedule(spec string, loc *time.Location) (schedule, error) {
	return parseJobSchedule(spec, "", 0, loc)
}

// parseJobSchedule reads the Schedule of a job named name (H fields are
// hashed from it; "" refuses them) with the given Jitter (not negative).
func parseJobSchedule(spec, name string, jitter time.Duration, loc *time.Location) (schedule, error) {
	s, err := parseBase(spec, name, loc)
	if err != nil || jitter <= 0 {
		return s, err
	}
	return jittered{base: s, max: jitter, frac: jitterHash(name)}, nil
}

// parseBase reads a schedule without its jitter.
func parseBase(spec, name string, loc *time.Location) (schedule, error) {
	s := strings.TrimSpace(spec)
	prefix, rest := "", s
	if strings.HasPrefix(rest, "CRON_TZ=") || strings.HasPrefix(rest, "TZ=") {
		if zone, after, ok := strings.Cut(rest, " "); ok {
			_, tz, _ := strings.Cut(zone, "=")
			if _, err := time.LoadLocation(tz); err != nil {
				return nil, fmt.Errorf("time zone %q: %w", tz, err)
			}
			prefix, rest = zone+" ", strings.TrimSpace(after)
		}
	}
	if d, ok := strings.CutPrefix(rest, "@every "); ok {
		dur, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil {
			return nil, fmt.Errorf("@every: %w", err)
		}
		if dur < time.Second || dur%time.Second != 0 {
			return nil, fmt.Errorf("@every %v: the period must be whole seconds, at least 1s", dur)
		}
		return every(dur), nil
	}
	fields, err := expandH(rest, name)
	if err != nil {
		return nil, err
	}
	if fields != rest {
		s = prefix + fields // the parser reads the numbers H stands for
	}
	cs, err := parser.Parse(s)
	if err != nil {
		return nil, err
	}
	return inZone{s: cs, loc: loc}, nil
}

// Validate checks j as Scheduler.Add does and fills in its defaults
// (Lock, LockKind, Overlap, Misfire, OnShutdown, MisfireGrace, Backoff,
// ConcurrencyGroup, Location UTC). It returns every problem
// found, each a *FieldError (which wraps ErrInvalid) naming the setting at
// fault, joined with errors.Join; nil if j is valid.
func (j *Job) Validate() error {
	_, err := j.validate(time.UTC)
	return err
}

// FieldError is one invalid setting of a Job: Field is the setting, named
// as in the config file ("schedule", "lock_name", "lock_kind", "history.keep"),
// and Msg what is wrong with it. It wraps ErrInvalid.
type FieldError struct {
	Job, Field, Msg string
}

// Error returns "scheduler: job NAME: FIELD: MSG: scheduler: invalid".
func (e *FieldError) Error() string {
	return fmt.Sprintf("scheduler: job %q: %s: %s: %v", e.Job, e.Field, e.Msg, ErrInvalid)
}

// Unwrap returns ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// validate checks j and fills in its defaults.
func (j *Job) validate(defaultLoc *time.Location) (schedule, error) {
	var errs []error
	bad := func(field string, format string, args ...any) {
		errs = append(errs, &FieldError{Job: j.Name, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if j.Name == "" {
		return nil, fmt.Errorf("scheduler: job with schedule %q: empty name: %w", j.Schedule, ErrInvalid)
	}
	for _, c := range []struct {
		bad        bool
		field, msg string
	}{
		{strings.ContainsAny(j.Name, "{}"), "name", "must not hold { or }"},
		{strings.HasSuffix(j.Name, manualSuffix), "name", fmt.Sprintf("must not end with %q, which names the ledger of a job's manual runs", manualSuffix)},
		{strings.Contains(j.Name, afterSuffix), "name", fmt.Sprintf("must not hold %q, which names the ledgers of the runs that follow manual runs", afterSuffix)},
		{j.Run == nil, "run", "no Runner"},
		{strings.ContainsAny(j.LockName, "{}"), "lock_name", fmt.Sprintf("%q must not hold { or }", j.LockName)},
		{j.Jitter < 0, "jitter", fmt.Sprintf("%v is negative", j.Jitter)},
		{j.Jitter > MaxJitter, "jitter", fmt.Sprintf("%v is above MaxJitter (%v)", j.Jitter, MaxJitter)},
		{j.Timeout < 0, "timeout", fmt.Sprintf("%v is negative", j.Timeout)},
		{j.Retries < 0, "retries", fmt.Sprintf("%d is negative", j.Retries)},
		{j.Backoff < 0, "backoff", fmt.Sprintf("%v is negative", j.Backoff)},
		{j.MisfireGrace < 0, "misfire_grace", fmt.Sprintf("%v is negative", j.MisfireGrace)},
		{j.StartDeadline < 0, "start_deadline", fmt.Sprintf("%v is negative", j.StartDeadline)},
		{j.AlertAfter < 0, "alert_after", fmt.Sprintf("%v is negative", j.AlertAfter)},
		{j.PauseAfterFailures < 0, "pause_after_failures", fmt.Sprintf("%d is negative", j.PauseAfterFailures)},
		{j.MaxConcurrency < 0, "max_concurrency", fmt.Sprintf("%d is negative", j.MaxConcurrency)},
		{j.HistoryKeep < 0, "history.keep", fmt.Sprintf("%d is negative", j.HistoryKeep)},
		{j.HistoryMaxAge < 0, "history.max_age", fmt.Sprintf("%v is negative", j.HistoryMaxAge)},
		{strings.ContainsAny(j.ConcurrencyGroup, "{}"), "concurrency_group", fmt.Sprintf("%q must not hold { or }", j.ConcurrencyGroup)},
	} {
		if c.bad {
			bad(c.field, "%s", c.msg)
		}
	}
	if j.ConcurrencyGroup == "" && j.MaxConcurrency > 0 {
		j.ConcurrencyGroup = j.LockName
		if j.ConcurrencyGroup == "" {
			j.ConcurrencyGroup = j.Name
		}
	}
	if j.LockName == "" {
		j.LockName = j.Name
	}
	switch j.LockKind {
	case "":
		j.LockKind = LockReentrant
	case LockReentrant:
	case LockFair:
	default:
		bad("lock_kind", "%q is not one of %q, %q", j.LockKind, LockReentrant, LockFair)
	}
	switch j.Overlap {
	case "":
		j.Overlap = OverlapSkip
		if len(j.After) > 0 {
			j.Overlap = OverlapQueue // a job that follows others: its runs queue (validateChain)
		}
	case OverlapSkip, OverlapQueue, OverlapReplace:
	default:
		bad("overlap", "%q is not one of %q, %q, %q", j.Overlap, OverlapSkip, OverlapQueue, OverlapReplace)
	}
	switch j.Misfire {
	case "":
		j.Misfire = MisfireSkip
	case MisfireSkip, MisfireRunOnce:
	default:
		bad("misfire", "%q is not one of %q, %q", j.Misfire, MisfireSkip, MisfireRunOnce)
	}
	j.validateReplicas(bad)
	switch j.OnShutdown {
	case "":
		j.OnShutdown = ShutdownHandoff
	case ShutdownHandoff, ShutdownAbandon:
	default:
		bad("on_shutdown", "%q is not one of %q, %q", j.OnShutdown, ShutdownHandoff, ShutdownAbandon)
	}
	if j.MisfireGrace == 0 {
		j.MisfireGrace = DefaultMisfireGrace
	}
	if j.Backoff == 0 {
		j.Backoff = DefaultBackoff
	}
	if j.Location == nil {
		j.Location = defaultLoc
	}
	var s schedule = never{} // a job that follows others has no ticks of its own
	if len(j.After) == 0 || j.Schedule != "" {
		var err error
		if s, err = parseJobSchedule(j.Schedule, j.Name, j.Jitter, j.Location); err != nil {
			bad("schedule", "%q: %v", j.Schedule, err)
		}
	}
	j.validateChain(bad)
	for i, c := range j.Exclude {
		if c == nil {
			bad("exclude", "calendar %d is nil", i)
		}
	}
	errs = append(errs, j.checkParams()...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return s, nil
}
