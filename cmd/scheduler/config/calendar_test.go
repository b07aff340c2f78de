package config_test

import (
	"strings"
	"testing"
	"time"
)

// calendarJob excludes holidays, in Europe/Berlin.
const calendarJob = `
job "x" {
  schedule  = "0 * * * *"
  time_zone = "Europe/Berlin"
  exclude   = ["holidays"]
  exec { command = ["true"] }
}
`

func TestCalendarContains(t *testing.T) {
	cfg := mustLoad(t, `
calendar "holidays" {
  dates  = ["2026-12-25", "*-01-01", "*-02-29"]
  ranges = [["2026-12-30", "2027-01-03"]]
  cron   = ["* * * * SAT,SUN"]
}
calendar "nights" {
  cron  = ["30 2 * * *"]
  dates = ["2026-10-25"]
}
calendar "tokyo" {
  dates     = ["2026-07-01"]
  time_zone = "Asia/Tokyo"
}
job "y" {
  schedule  = "@hourly"
  time_zone = "Europe/Berlin"
  exclude   = ["tokyo", "nights"]
  exec { command = ["true"] }
}
`+calendarJob)
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings %q", cfg.Warnings)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := func(s string) time.Time {
		tm, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	hol, tokyo, nights := cfg.Jobs[1].Exclude[0], cfg.Jobs[0].Exclude[0], cfg.Jobs[0].Exclude[1]
	if hol.Name() != "holidays" || tokyo.Name() != "tokyo" || nights.Name() != "nights" {
		t.Fatalf("calendars %q, %q, %q", hol.Name(), tokyo.Name(), nights.Name())
	}
	for _, c := range []struct {
		name string
		cal  interface{ Contains(time.Time) bool }
		t    time.Time
		want bool
	}{
		{"a date", hol, at("2026-12-25 10:00"), true},
		{"the day before it", hol, at("2026-12-24 23:59"), false},
		{"a date in the job's zone, not UTC's", hol, at("2026-12-25 00:30"), true}, // 2026-12-24 23:30 UTC
		{"a yearly date", hol, at("2031-01-01 12:00"), true},
		{"a yearly 29 February", hol, at("2028-02-29 12:00"), true},
		{"1 March of a common year", hol, at("2027-03-01 12:00"), false},
		{"a range's start", hol, at("2026-12-30 00:00"), true},
		{"a range across the year end", hol, at("2027-01-02 12:00"), true},
		{"a range's end", hol, at("2027-01-03 23:59"), true},
		{"after a range", hol, at("2027-01-04 00:00"), false},
		{"cron: a Saturday", hol, at("2026-11-28 09:00"), true},
		{"cron: a Monday", hol, at("2026-11-30 09:00"), false},
		{"cron: a minute's end", hol, at("2026-11-30 09:00").Add(59 * time.Second), false},
		// 29 March 2026: Berlin's clocks go from 02:00 to 03:00. The
		// minute 02:30 does not exist, so "30 2 * * *" holds no tick that
		// day (the job's "0 * * * *" fires at 01:00 and 03:00).
		{"cron: 02:30 of a day", nights, at("2026-03-28 02:30"), true},
		{"cron: 02:31", nights, at("2026-03-28 02:31"), false},
		{"cron on the spring DST day, 01:59 + 1m", nights, at("2026-03-29 01:59").Add(time.Minute), false},
		{"cron on the spring DST day, 03:30", nights, at("2026-03-29 03:30"), false},
		// 25 October 2026: 02:00 to 03:00 CEST comes twice, then CET.
		// Both 02:30s are in the calendar, as the date is (all 25 hours).
		{"cron on the autumn DST day, the first 02:30", nights, time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), true},
		{"cron on the autumn DST day, the second 02:30", nights, time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), true},
		{"the autumn DST day's last hour", nights, at("2026-10-25 23:00"), true},
		{"the day after it", nights, at("2026-10-26 00:00"), false},
		{"its own zone: Tokyo's 1 July", tokyo, time.Date(2026, 6, 30, 15, 0, 0, 0, time.UTC), true},
		{"its own zone: UTC's 1 July, Tokyo's 2 July", tokyo, time.Date(2026, 7, 1, 15, 0, 0, 0, time.UTC), false},
	} {
		if got := c.cal.Contains(c.t); got != c.want {
			t.Errorf("%s: Contains(%v) = %v, want %v", c.name, c.t, got, c.want)
		}
	}
	// End: where the span that holds a time ends, the latest of the parts
	// that hold it, midnight in the calendar's zone (else the time's).
	tokyoZone, _ := time.LoadLocation("Asia/Tokyo")
	for _, c := range []struct {
		name string
		cal  any
		t    time.Time
		want time.Time
	}{
		{"a range with a yearly date in it", hol, at("2026-12-30 10:00"), at("2027-01-04 00:00")},
		{"a date", hol, at("2026-12-25 10:00"), at("2026-12-26 00:00")},
		{"a cron's minute", hol, at("2026-11-28 09:00").Add(30 * time.Second), at("2026-11-28 09:01")},
		{"a date on the autumn DST day (25 hours)", nights, at("2026-10-25 01:00"), at("2026-10-26 00:00")},
		{"a date in its own zone", tokyo, time.Date(2026, 6, 30, 15, 0, 0, 0, time.UTC), time.Date(2026, 7, 2, 0, 0, 0, 0, tokyoZone)},
		{"a time not held", hol, at("2026-11-30 09:00"), at("2026-11-30 09:00")},
	} {
		if got := c.cal.(interface{ End(time.Time) time.Time }).End(c.t); !got.Equal(c.want) {
			t.Errorf("%s: End(%v) = %v, want %v", c.name, c.t, got, c.want)
		}
	}
	if cfg.Jobs[1].Digest == mustLoad(t, `calendar "holidays" { dates = ["2026-12-26"] }`+calendarJob).Jobs[0].Digest {
		t.Error("a job's digest does not change with its calendar")
	}
}

func TestCalendarBadInput(t *testing.T) {
	for _, c := range []struct {
		name, src, want string
	}{
		{"a date that does not exist", `calendar "holidays" { @@dates = ["2026-02-30"] }`, `calendar.holidays.dates: "2026-02-30" is not a date ("2026-12-25", or "*-12-25" for every year): day out of range`},
		{"a yearly date that does not exist", `calendar "holidays" { @@dates = ["*-04-31"] }`, `calendar.holidays.dates: "*-04-31" is not a yearly date`},
		{"a range ending before its start", `calendar "holidays" { @@ranges = [["2027-01-04", "2026-12-20"]] }`, `calendar.holidays.ranges: ["2027-01-04", "2026-12-20"]: the end is before the start`},
		{"a range of three dates", `calendar "holidays" { @@ranges = [["2027-01-04", "2027-01-05", "2027-01-06"]] }`, `calendar.holidays.ranges:`},
		{"a bad cron", `calendar "holidays" { @@cron = ["* * * SAT"] }`, `calendar.holidays.cron: "* * * SAT": expected exactly 5 fields`},
		{"an @every cron", `calendar "holidays" { @@cron = ["@every 1h"] }`, `calendar.holidays.cron: "@every 1h": not a set of times but a period`},
		{"an unknown zone", `calendar "holidays" {
  dates = ["*-12-25"]
  @@time_zone = "Mars/Olympus"
}`, `calendar.holidays.time_zone: unknown time zone "Mars/Olympus"`},
		{"an empty calendar", `@@calendar "holidays" { }`, `calendar.holidays: empty: give dates, ranges or cron`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, places, err := load(t, c.src+calendarJob)
			es := errorList(t, err)
			if len(es) != 1 || !strings.HasPrefix(es[0].Error(), places[0]+": "+c.want) {
				t.Errorf("errors %v, want one at %s: %s", es, places[0], c.want)
			}
		})
	}
	t.Run("an exclude naming no calendar", func(t *testing.T) {
		_, places, err := load(t, `calendar "holidays" { dates = ["*-12-25"] }
job "x" {
  schedule = "@hourly"
  @@exclude  = ["holidyas"]
  exec { command = ["true"] }
}
`)
		es := errorList(t, err)
		want := places[0] + `: job "x": exclude: "holidyas" is not a calendar of this file (did you mean "holidays"? the calendars are holidays)`
		if len(es) != 1 || es[0].Error() != want {
			t.Errorf("errors %v, want %s", es, want)
		}
	})
	t.Run("an unused calendar", func(t *testing.T) {
		cfg, places, err := load(t, `@@calendar "weekends" { cron = ["* * * * SAT,SUN"] }`+job)
		if err != nil {
			t.Fatal(err)
		}
		want := places[0] + ": calendar.weekends: not used: no job's exclude names it"
		if len(cfg.Warnings) != 1 || cfg.Warnings[0] != want {
			t.Errorf("warnings %q, want %q", cfg.Warnings, want)
		}
	})
}
