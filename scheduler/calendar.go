package scheduler

import (
	"strings"
	"time"
)

// A Calendar is a named set of times in which a job's ticks are not run
// (Job.Exclude), as Quartz's calendars: holidays, weekends, a maintenance
// window. Contains is asked of each tick by its scheduled time, in the
// job's time zone (Job.Location, or the zone of the schedule's CRON_TZ=),
// so every replica decides the same; a Calendar that has its own zone
// converts the time to it. A Calendar must be safe for concurrent use and
// give the same answer for the same time every time it is asked.
//
// A Calendar may also have a method End(t time.Time) time.Time that
// returns, for a t it contains, a later time until which every time is in
// it (the end of t's day, or of the range that holds t): the next ticks
// (Jobs) then pass over that span in one step. Without it they ask of each
// tick in turn, up to NextHorizon ahead, which for a frequent job under a
// long calendar is slow.
type Calendar interface {
	// Name names the calendar in the history entry's reason ("excluded by
	// calendar holidays") and in Skipped.
	Name() string
	// Contains reports whether t falls in the calendar.
	Contains(t time.Time) bool
}

// Skip is an upcoming tick of a job that will not be run, and why
// (JobView.Skipped).
type Skip struct {
	Tick time.Time `json:"tick"`
	// Cause is "calendar:NAME" or "freeze:ID".
	Cause string `json:"cause"`
	// Reason says it in words: "excluded by calendar holidays", "freeze
	// f3: release freeze".
	Reason string `json:"reason"`
}

// calendarEnd is a Calendar that also says how long it goes on holding a
// time (see Calendar).
type calendarEnd interface {
	End(t time.Time) time.Time
}

// exclusion returns why tick of e is excluded (its cause and reason), or
// ok false if it is not, by the job's calendars and the freezes known
// here (readFreezes).
func (s *Scheduler) exclusion(e *entry, tick time.Time) (cause, reason string, ok bool) {
	cause, reason, _, ok = excludedBy(e, tick, s.knownFreezes())
	return cause, reason, ok
}

// excludedBy returns why tick of e is excluded: by the first of the job's
// calendars that contains it, else by the first of fs that covers it; ok
// false if it is not. end is a time until which every tick is excluded
// by the same cause: the freeze's Until, the calendar's End; tick itself
// for a calendar that does not say.
func excludedBy(e *entry, tick time.Time, fs []Freeze) (cause, reason string, end time.Time, ok bool) {
	if len(e.job.Exclude) > 0 {
		at := tick.In(e.loc)
		for _, c := range e.job.Exclude {
			if c.Contains(at) {
				end = tick
				if ce, ok := c.(calendarEnd); ok {
					end = ce.End(at)
				}
				return "calendar:" + c.Name(), "excluded by calendar " + c.Name(), end, true
			}
		}
	}
	for _, f := range fs {
		if covers(f, e.job.Name, tick) {
			return "freeze:" + f.ID, "freeze " + f.ID + ": " + f.Note, f.Until, true
		}
	}
	return "", "", time.Time{}, false
}

// NextHorizon is how far past now, or past the last tick found, Jobs
// looks for a job's next tick that will run (JobView.NoneBefore): a year,
// so that a yearly job has its ticks shown.
const NextHorizon = 366 * 24 * time.Hour

// upcoming returns e's next n ticks after now that will run, and the
// first n of those before them that will not (their calendars and fs
// applied), looking up to NextHorizon past now or past the last tick
// found: noneBefore is the end of that span if fewer than n were found,
// zero if the schedule ended first. A tick in a freeze, or in a calendar
// that says its End, moves the search past their end at once: an @every
// 1s job under a day's freeze costs one step, not 86,400.
func upcoming(e *entry, now time.Time, n int, fs []Freeze) (next []time.Time, skipped []Skip, noneBefore time.Time) {
	horizon := now.Add(NextHorizon)
	t := now
	for len(next) < n {
		if t = e.sched.Next(t); t.IsZero() {
			return next, skipped, time.Time{}
		}
		if t.After(horizon) {
			return next, skipped, horizon
		}
		cause, reason, end, ok := excludedBy(e, t, fs)
		if !ok {
			next = append(next, t)
			horizon = t.Add(NextHorizon)
			continue
		}
		if len(skipped) < n {
			skipped = append(skipped, Skip{Tick: t, Cause: cause, Reason: reason})
		}
		if end.After(t) {
			t = end.Add(-time.Nanosecond) // the next tick is the first at or after end
		}
	}
	return next, skipped, time.Time{}
}

// jobLocation is the zone j's ticks are read in: its schedule's CRON_TZ=,
// else j.Location (UTC if nil).
func jobLocation(j *Job) *time.Location {
	if z := j.zone(); z != "" {
		if loc, err := time.LoadLocation(z); err == nil {
			return loc
		}
	}
	if j.Location != nil {
		return j.Location
	}
	return time.UTC
}

// calendarNames is the names of cs, joined with commas: part of the job's
// definition digest.
func calendarNames(cs []Calendar) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name()
	}
	return strings.Join(names, ",")
}
