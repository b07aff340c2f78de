package daemon

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Notes are printed in tables with their control characters escaped; the
// rest as it is.
func TestPrintable(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"vendor maintenance, CHG-1182", "vendor maintenance, CHG-1182"},
		{"Wartung für café ☕", "Wartung für café ☕"},
		{"disk full\nsee INC-12", `disk full\nsee INC-12`},
		{"a\tb\r", `a\tb\r`},
		{"\x1b[2J\x1b[31mgone", `\x1b[2J\x1b[31mgone`},
		{"del\x7f c1\u0085\u009f", `del\x7f c1\u0085\u009f`},
		{"", ""},
	} {
		if got := printable(c.in); got != c.want {
			t.Errorf("printable(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// `scheduler jobs` prints a pause's parts that are known, its note
// escaped, and "no note" for none: a pause an older version wrote has
// neither author nor time.
func TestPauseText(t *testing.T) {
	at := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	until := at.Add(2 * time.Hour)
	for _, c := range []struct {
		name string
		p    PauseJSON
		want string
	}{
		{"with an end", PauseJSON{By: "cli:alice", At: at, Note: "vendor maintenance", Until: &until}, "until 2026-12-01T06:00:00Z by cli:alice: vendor maintenance"},
		{"until a resume", PauseJSON{By: "ops", At: at, Note: "why"}, "by ops at 2026-12-01T04:00:00Z: why"},
		{"escaped note", PauseJSON{By: "ops", At: at, Note: "a\nb\x1b[2J"}, `by ops at 2026-12-01T04:00:00Z: a\nb\x1b[2J`},
		{"older version", PauseJSON{}, "paused: no note"},
		{"older version, until", PauseJSON{Until: &until}, "until 2026-12-01T06:00:00Z: no note"},
	} {
		if got := pauseText(&c.p); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The page shows a pause's author and time when known; a pause an older
// version wrote (no author, time or note) shows "no note", with no empty
// "by" and no year 1.
func TestPagePauseOfOlderVersion(t *testing.T) {
	at := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		name      string
		p         PauseJSON
		want, not []string
	}{
		{"known", PauseJSON{By: "cli:alice", At: at, Note: "vendor maintenance"}, []string{"by cli:alice, <time", "until resumed:", `<q class="pause-note">vendor maintenance</q>`}, []string{"no note"}},
		{"older version", PauseJSON{}, []string{"until resumed:", "no note"}, []string{"by ", "0001-01-01", "<q"}},
	} {
		d := &pageData{Title: "jobs", Nav: "jobs", Now: time.Now(), Jobs: []jobRow{{
			JobJSON: JobJSON{Name: "nightly", Schedule: "@daily", Lock: "nightly", Paused: true, Pause: &c.p},
			Loc:     time.UTC,
		}}}
		var buf bytes.Buffer
		if err := pages["jobs.html"].ExecuteTemplate(&buf, "layout.html", d); err != nil {
			t.Fatal(err)
		}
		html := buf.String()
		i := strings.Index(html, `class="pause-info"`)
		if i < 0 {
			t.Fatalf("%s: no pause shown:\n%s", c.name, html)
		}
		info := html[i:]
		info = info[:strings.Index(info, "</small>")]
		for _, w := range c.want {
			if !strings.Contains(info, w) {
				t.Errorf("%s: pause shown as %q, want %q in it", c.name, info, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(info, w) {
				t.Errorf("%s: pause shown as %q, want no %q", c.name, info, w)
			}
		}
	}
}
