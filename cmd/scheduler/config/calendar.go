package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/robfig/cron/v3"

	"github.com/lockcron/lockcron/scheduler"
)

// Calendar is a calendar "name" { ... } block: times in which the ticks
// of the jobs whose exclude names it are not run (scheduler.Calendar),
// each in TimeZone, default the job's. A tick falls in it when its day
// (in the zone) is one of Dates, one of Yearly or in one of Ranges, or
// when its minute matches one of Cron. It is safe for concurrent use.
type Calendar struct {
	name string
	Pos  Pos
	// Dates are days ("2026-12-25").
	Dates []Date
	// Yearly are days of every year ("*-12-25"): Year is 0.
	Yearly []Date
	// Ranges are inclusive spans of days (["2026-12-20", "2027-01-04"]).
	Ranges [][2]Date
	// Cron are 5-field cron expressions (robfig/cron's standard parser,
	// descriptors too, but not @every, which names no times) naming
	// excluded minutes ("* * * * SAT,SUN").
	Cron []string
	// TimeZone is the zone the calendar is read in; "" for the job's
	// (Location nil).
	TimeZone string
	Location *time.Location

	crons []cron.Schedule
}

// A Date is a day of the calendar, without a zone.
type Date struct {
	Year  int // 0 in a yearly date
	Month time.Month
	Day   int
}

func (d Date) String() string {
	if d.Year == 0 {
		return fmt.Sprintf("*-%02d-%02d", d.Month, d.Day)
	}
	return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day)
}

func (d Date) before(o Date) bool {
	return d.Year < o.Year || d.Year == o.Year && (d.Month < o.Month || d.Month == o.Month && d.Day < o.Day)
}

// Name names the calendar (scheduler.Calendar).
func (c *Calendar) Name() string { return c.name }

// Contains reports whether t falls in the calendar: t is read in the
// calendar's zone if it has one, else in t's own (the scheduler gives a
// tick in its job's zone).
func (c *Calendar) Contains(t time.Time) bool {
	return c.End(t).After(t)
}

// End returns, for a t that Contains, a later time until which every
// time from t falls in the calendar (scheduler.Calendar's End): the start
// of the day after t's day, or after the end of a range that holds t
// (midnight in the calendar's zone, else t's), or the end of t's minute
// for a cron; the latest of those that hold t. It returns t for a t the
// calendar does not contain.
func (c *Calendar) End(t time.Time) time.Time {
	if c.Location != nil {
		t = t.In(c.Location)
	}
	end := t
	later := func(u time.Time) {
		if u.After(end) {
			end = u
		}
	}
	y, m, d := t.Date()
	day := Date{y, m, d}
	midnightAfter := func(x Date) time.Time { return time.Date(x.Year, x.Month, x.Day+1, 0, 0, 0, 0, t.Location()) }
	if slices.Contains(c.Dates, day) || slices.Contains(c.Yearly, Date{0, m, d}) {
		later(midnightAfter(day))
	}
	for _, r := range c.Ranges {
		if !day.before(r[0]) && !r[1].before(day) {
			later(midnightAfter(r[1]))
		}
	}
	minute := t.Truncate(time.Minute)
	for _, s := range c.crons {
		if s.Next(minute.Add(-time.Nanosecond)).Equal(minute) {
			later(minute.Add(time.Minute))
		}
	}
	return end
}

// calendarParser reads a calendar's cron: five fields, or a descriptor.
var calendarParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseDate reads "2026-12-25", or "*-12-25" if yearly is allowed; the
// message says what is wrong.
func parseDate(s string, yearly bool) (Date, string) {
	if rest, ok := strings.CutPrefix(s, "*-"); ok {
		if !yearly {
			return Date{}, fmt.Sprintf("%q: a range's ends are whole dates (\"2026-12-20\"), not yearly ones", s)
		}
		t, err := time.Parse("2006-01-02", "2000-"+rest) // a leap year: *-02-29 is a day
		if err != nil {
			return Date{}, fmt.Sprintf("%q is not a yearly date (\"*-12-25\"): %v", s, dateErr(err))
		}
		return Date{0, t.Month(), t.Day()}, ""
	}
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		return Date{}, fmt.Sprintf("%q is not a date (\"2026-12-25\", or \"*-12-25\" for every year): %v", s, dateErr(err))
	}
	return Date{t.Year(), t.Month(), t.Day()}, ""
}

// dateErr is the part of time.Parse's error that says what is wrong.
func dateErr(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}

// decodeCalendars decodes the calendar blocks, before the jobs, whose
// exclude names them.
func (d *decoder) decodeCalendars() map[string]*Calendar {
	out := make(map[string]*Calendar)
	for _, b := range d.raw.Calendars {
		cp := func(key ...string) []string { return append([]string{"calendar", b.Name}, key...) }
		switch first, dup := out[b.Name]; {
		case b.Name == "" || strings.ContainsFunc(b.Name, unicode.IsControl):
			d.errf(cp(), "%q is not a name: give each calendar block a plain name", b.Name)
			continue
		case dup:
			d.errAt(b.At, cp(), "a calendar %q is at line %d already: give each its own name", b.Name, first.Pos.Line)
			continue
		}
		c := &Calendar{name: b.Name, Pos: posOf(b.At), Cron: b.Cron}
		for _, s := range b.Dates {
			day, msg := parseDate(strings.TrimSpace(s), true)
			switch {
			case msg != "":
				d.errf(cp("dates"), "%s", msg)
			case day.Year == 0:
				c.Yearly = append(c.Yearly, day)
			default:
				c.Dates = append(c.Dates, day)
			}
		}
		for _, r := range b.Ranges {
			if len(r) != 2 {
				d.errf(cp("ranges"), "%q: a range is [from, to], two dates", r)
				continue
			}
			from, msg1 := parseDate(strings.TrimSpace(r[0]), false)
			to, msg2 := parseDate(strings.TrimSpace(r[1]), false)
			switch {
			case msg1 != "" || msg2 != "":
				d.errf(cp("ranges"), "%s", strings.Trim(msg1+"; "+msg2, "; "))
			case to.before(from):
				d.errf(cp("ranges"), "[%q, %q]: the end is before the start", r[0], r[1])
			default:
				c.Ranges = append(c.Ranges, [2]Date{from, to})
			}
		}
		for _, spec := range b.Cron {
			s, err := calendarParser.Parse(spec)
			if err != nil {
				d.errf(cp("cron"), "%q: %v (five fields: minute hour day-of-month month day-of-week, such as \"* * * * SAT,SUN\")", spec, err)
				continue
			}
			if _, ok := s.(*cron.SpecSchedule); !ok {
				// @every names a period from whenever it is asked, not
				// times of the day: it would exclude nothing.
				d.errf(cp("cron"), "%q: not a set of times but a period: give five fields (minute hour day-of-month month day-of-week, such as \"* * * * SAT,SUN\") or a descriptor such as @daily", spec)
				continue
			}
			c.crons = append(c.crons, s)
		}
		if d.set(cp("time_zone")...) {
			switch loc, err := time.LoadLocation(b.TimeZone); {
			case b.TimeZone == "" || b.TimeZone == "Local":
				d.errf(cp("time_zone"), "%q: name a zone such as \"Europe/Berlin\" or \"UTC\" (leave it out for the job's)", b.TimeZone)
			case err != nil:
				d.errf(cp("time_zone"), "unknown time zone %q", b.TimeZone)
			default:
				c.TimeZone, c.Location = b.TimeZone, loc
			}
		}
		if len(b.Dates)+len(b.Ranges)+len(b.Cron) == 0 {
			d.errf(cp(), "empty: give dates, ranges or cron")
		}
		out[b.Name] = c
	}
	return out
}

// decodeExclude resolves a job's exclude to its calendars, and returns
// the job's digest with theirs (a changed calendar changes its jobs).
func (d *decoder) decodeExclude(b *jobBlock, jp func(...string) []string, cals map[string]*Calendar, used map[string]bool, digest string) ([]scheduler.Calendar, string) {
	if len(b.Exclude) == 0 {
		return nil, digest
	}
	names := make([]string, 0, len(cals))
	for n := range cals {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []scheduler.Calendar
	blocks := []any{digest}
	for _, n := range b.Exclude {
		c, ok := cals[n]
		if !ok {
			hint := "there are none: add a calendar \"" + n + "\" { ... } block"
			if len(names) > 0 {
				hint = "the calendars are " + strings.Join(names, ", ")
			}
			if s := Suggest(n, names); s != "" {
				hint = fmt.Sprintf("did you mean %q? %s", s, hint)
			}
			d.errf(jp("exclude"), "%q is not a calendar of this file (%s)", n, hint)
			continue
		}
		used[n] = true
		out = append(out, c)
		i := slices.IndexFunc(d.raw.Calendars, func(cb calendarBlock) bool { return cb.Name == n })
		blocks = append(blocks, d.raw.Calendars[i]) // its place is not part of it (json:"-")
	}
	data, _ := json.Marshal(blocks)
	sum := sha256.Sum256(data)
	return out, hex.EncodeToString(sum[:])[:jobDigestLen]
}

// checkCalendarsUsed warns of a calendar no job excludes.
func (d *decoder) checkCalendarsUsed(cals map[string]*Calendar, used map[string]bool) {
	for n := range cals {
		if !used[n] {
			d.warnf([]string{"calendar", n}, "not used: no job's exclude names it")
		}
	}
}
