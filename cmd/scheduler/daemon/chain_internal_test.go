package daemon

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/scheduler"
)

// The page shows a job's parents (with when) and children, each a link to
// its job; `scheduler jobs` lists them after its table.
func TestJobsShowParentsAndChildren(t *testing.T) {
	views := []JobJSON{
		{Name: "extract", Schedule: "@hourly", Lock: "extract", Children: []string{"load"}},
		{Name: "load", Lock: "load", After: []string{"extract"}, When: scheduler.WhenSuccess},
	}
	d := &pageData{Title: "jobs", Nav: "jobs", Now: time.Now()}
	for _, v := range views {
		d.Jobs = append(d.Jobs, jobRow{JobJSON: v, Loc: time.UTC})
	}
	var buf bytes.Buffer
	if err := pages["jobs.html"].ExecuteTemplate(&buf, "layout.html", d); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	for _, want := range []string{`data-child="load"`, `data-parent="extract"`, "on success"} {
		if !strings.Contains(html, want) {
			t.Errorf("the page lacks %q:\n%s", want, html)
		}
	}
	buf.Reset()
	if err := printJobs(&buf, views); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"after extract", "AFTER", "extract (on success)"} {
		if !strings.Contains(out, want) {
			t.Errorf("scheduler jobs lacks %q:\n%s", want, out)
		}
	}
}
