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

// exclusion returns why tick of e is excluded (its cause and reason), or
// ok false if it is not, by the job's calendars and the freezes known
// here (readFreezes).
func (s *Scheduler) exclusion(e *entry, tick time.Time) (cause, reason string, ok bool) {
	return excludedBy(e, tick, s.knownFreezes())
}

// excludedBy returns why tick of e is excluded: by the first of the job's
// calendars that contains it, else by the first of fs that covers it; ok
// false if it is not.
func excludedBy(e *entry, tick time.Time, fs []Freeze) (cause, reason string, ok bool) {
	if len(e.job.Exclude) > 0 {
		at := tick.In(e.loc)
		for _, c := range e.job.Exclude {
			if c.Contains(at) {
				return "calendar:" + c.Name(), "excluded by calendar " + c.Name(), true
			}
		}
	}
	for _, f := range fs {
		if covers(f, e.job.Name, tick) {
			return "freeze:" + f.ID, "freeze " + f.ID + ": " + f.Note, true
		}
	}
	return "", "", false
}

// maxScan bounds how many ticks Jobs looks at for a job's next ticks to
// run: a minutely job under a freeze of a week passes over 10,080.
const maxScan = 20_000

// upcoming returns e's next n ticks after now that will run, and the
// first n of those before them that will not (their calendars and fs
// applied).
func upcoming(e *entry, now time.Time, n int, fs []Freeze) (next []time.Time, skipped []Skip) {
	t := now
	for range maxScan {
		if t = e.sched.Next(t); t.IsZero() || len(next) == n {
			break
		}
		if cause, reason, ok := excludedBy(e, t, fs); ok {
			if len(skipped) < n {
				skipped = append(skipped, Skip{Tick: t, Cause: cause, Reason: reason})
			}
			continue
		}
		next = append(next, t)
	}
	return next, skipped
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
