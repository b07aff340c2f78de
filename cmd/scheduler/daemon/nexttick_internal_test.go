package daemon

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/scheduler"
)

// A job with no tick to run within the horizon is told apart from one
// whose schedule has no further tick, in the JSON, the table and the page.
func TestNoNextTickWithinHorizon(t *testing.T) {
	horizon := time.Date(2027, 11, 28, 22, 0, 0, 0, time.UTC)
	tick := time.Date(2026, 12, 25, 0, 0, 0, 0, time.UTC)
	js := JobsJSON([]scheduler.JobView{
		{Status: scheduler.Status{Job: "yearly", Schedule: "@yearly", Lock: "yearly"}, NoneBefore: horizon,
			Skipped: []scheduler.Skip{{Tick: tick, Cause: "calendar:always", Reason: "excluded by calendar always"}}},
		{Status: scheduler.Status{Job: "ended", Schedule: "0 0 30 2 *", Lock: "ended"}},
	})
	b, err := json.Marshal(js)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"none_before":"2027-11-28T22:00:00Z"`) || strings.Count(s, `"none_before"`) != 1 {
		t.Errorf("JSON: %s; want none_before on the yearly job alone", s)
	}
	var buf bytes.Buffer
	if err := printJobs(&buf, js); err != nil {
		t.Fatal(err)
	}
	table := buf.String()
	lines := strings.Split(table, "\n")
	if len(lines) < 3 || !strings.Contains(lines[1], "none before 2027-11-28T22:00:00Z") || !strings.Contains(lines[2], " none ") {
		t.Errorf("table: want none before the horizon for yearly, none for ended:\n%s", table)
	}
	d := &pageData{Title: "jobs", Nav: "jobs", Now: time.Now(), Jobs: []jobRow{{JobJSON: js[0], Loc: time.UTC}, {JobJSON: js[1], Loc: time.UTC}}}
	buf.Reset()
	if err := pages["jobs.html"].ExecuteTemplate(&buf, "layout.html", d); err != nil {
		t.Fatal(err)
	}
	if html := buf.String(); !strings.Contains(html, `data-none-before="2027-11-28T22:00:00Z"`) || !strings.Contains(html, `<span class="dim">none</span>`) {
		t.Errorf("page: want none before the horizon for yearly, none for ended:\n%s", html)
	}
}
