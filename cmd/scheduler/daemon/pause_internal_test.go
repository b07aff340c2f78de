package daemon

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/scheduler"
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

// The audit entries of auto-pauses are appended off the caller's
// goroutine: add returns at once while Redis does not answer, the entries
// are appended once it does, and stop drains them; a stop whose deadline
// passes while Redis does not answer gives up on the queued ones, and
// does not wait for each append's timeout.
func TestAutoPausesDoNotBlock(t *testing.T) {
	srv := redistest.Start(t)
	cfg := &config.Config{ReplicaID: "r1", Audit: config.Audit{Keep: 10, MaxAge: time.Hour},
		Redis: &config.Redis{URL: config.NewSecret("redis://" + srv.Addr()), KeyPrefix: "t"}}
	aud, closeAudit, err := openAudit(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAudit()
	var mu sync.Mutex
	var warnings []string
	warn := func(msg string, _ ...any) {
		mu.Lock()
		warnings = append(warnings, msg)
		mu.Unlock()
	}
	r := scheduler.Run{Job: "flaky", Replica: "r1", Outcome: scheduler.OutcomeAutoPaused, Error: "paused after 3 failed runs in a row"}

	ap := startAutoPauses(aud, warn)
	srv.Pause()
	start := time.Now()
	ap.add(r)
	ap.add(r)
	if d := time.Since(start); d > time.Second {
		t.Errorf("add took %v while Redis did not answer, want no wait", d)
	}
	srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ap.stop(ctx)
	es, err := aud.list(ctx, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[0].Action != "pause" || es[0].Target != "flaky" || es[0].Actor != "replica:r1" || es[0].Note != r.Error {
		t.Fatalf("audit after the stop: %+v, want two pause entries of flaky by replica:r1 with the note", es)
	}
	ap.add(r) // after the stop: dropped, with a warning
	mu.Lock()
	n := len(warnings)
	mu.Unlock()
	if n != 1 {
		t.Errorf("warnings %q, want one for the entry added after the stop", warnings)
	}

	// The append under way ends by its own deadline (auditTimeout: a
	// Redis client does not stop a read when its ctx is cancelled); the
	// queued ones are given up at once.
	ap = startAutoPauses(aud, warn)
	srv.Pause()
	defer srv.Resume()
	for range 3 {
		ap.add(r)
	}
	sctx, scancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer scancel()
	start = time.Now()
	ap.stop(sctx)
	if d := time.Since(start); d > auditTimeout+3*time.Second {
		t.Errorf("stop took %v with its deadline 100ms away and Redis not answering, want one append's timeout (%v) at most", d, auditTimeout)
	}
}
