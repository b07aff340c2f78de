package daemon

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/scheduler"
)

// A job whose replica found another definition of it in the ledger shows
// it in its row, with both digests.
func TestPageShowsAnotherVersion(t *testing.T) {
	for _, other := range []string{"", "0123456789abcdef"} {
		d := &pageData{Title: "jobs", Nav: "jobs", Now: time.Now(), Jobs: []jobRow{{
			JobJSON: JobJSON{Name: "nightly", Schedule: "@daily", Lock: "nightly", Digest: "fedcba9876543210", OtherDigest: other},
			Loc:     time.UTC,
		}}}
		var buf bytes.Buffer
		if err := pages["jobs.html"].ExecuteTemplate(&buf, "layout.html", d); err != nil {
			t.Fatal(err)
		}
		html := buf.String()
		shown := strings.Contains(html, "another version in the fleet")
		switch {
		case other == "" && shown:
			t.Error("a job without another definition is shown with one")
		case other != "" && (!shown || !strings.Contains(html, `data-other-digest="`+other+`"`) || !strings.Contains(html, "fedcba9876543210")):
			t.Errorf("the row of a job with another definition lacks it or the digests:\n%s", html)
		}
	}
}

// The status page's URL in the log: a listener on every interface is
// reached on localhost.
func TestPageURL(t *testing.T) {
	for _, c := range []struct{ addr, want string }{
		{"127.0.0.1:9090", "http://127.0.0.1:9090/"},
		{"0.0.0.0:9090", "http://localhost:9090/"},
		{"[::]:9090", "http://localhost:9090/"},
		{"[::1]:9090", "http://[::1]:9090/"},
		{"10.0.0.5:8080", "http://10.0.0.5:8080/"},
	} {
		addr, err := net.ResolveTCPAddr("tcp", c.addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := pageURL(addr); got != c.want {
			t.Errorf("pageURL(%s) = %q, want %q", c.addr, got, c.want)
		}
	}
}

// A job's history shows an entry of skipped ticks with its range, its count
// and its reason, and a run's error as before.
func TestPageShowsSkippedTicks(t *testing.T) {
	first := time.Date(2026, 11, 27, 9, 0, 10, 0, time.UTC)
	last := first.Add(60 * time.Second)
	d := &pageData{Title: "sync", Nav: "jobs", Now: time.Now(), Runs: []runRow{
		{Run: scheduler.Run{ID: "2-0", Job: "sync", Tick: last, First: first, Count: 7, Replica: "r2", Outcome: scheduler.OutcomeSkippedBusy,
			Reason: "lock held by r3, whose membership expired at 2026-11-27T09:00:48Z"}, Loc: time.UTC},
		{Run: scheduler.Run{ID: "1-0", Job: "sync", Tick: first.Add(-10 * time.Second), Replica: "r3", Outcome: scheduler.OutcomeFailed, Error: "exit status 3"}, Loc: time.UTC},
	}}
	var buf bytes.Buffer
	if err := pages["job.html"].ExecuteTemplate(&buf, "layout.html", d); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	i := strings.Index(html, `id="run-2-0"`)
	j := strings.Index(html, `id="run-1-0"`)
	if i < 0 || j < i {
		t.Fatalf("the rows are not there:\n%s", html)
	}
	row := html[i:j]
	for _, want := range []string{`data-count="7"`, "2026-11-27 09:00:10 UTC", "2026-11-27 09:01:10 UTC", "×7", "skipped: busy",
		`<span class="reason">lock held by r3, whose membership expired at 2026-11-27T09:00:48Z</span>`} {
		if !strings.Contains(row, want) {
			t.Errorf("the skipped ticks' row lacks %q:\n%s", want, row)
		}
	}
	if other := html[j:]; strings.Contains(other[:strings.Index(other, "</tr>")], "×") || !strings.Contains(other, `<pre class="err">exit status 3</pre>`) {
		t.Errorf("the failed run's row:\n%s", other)
	}
}
