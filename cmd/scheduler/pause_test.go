package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// httpBody is httpDo with a JSON request body ("" none).
func httpBody(t *testing.T, method, url, token, body string) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, []byte(err.Error()), nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, []byte(err.Error()), nil
	}
	return resp.StatusCode, b, resp.Header
}

// pauseNote is the body a test sends to path: a pause's note for
// /api/jobs/{name}/pause, else none.
func pauseNote(path string) string {
	if strings.HasSuffix(path, "/pause") {
		return `{"note": "test"}`
	}
	return ""
}

// apiJobOf reads /api/jobs/{name} of a replica.
func apiJobOf(t *testing.T, p *proc, job string) daemon.JobJSON {
	t.Helper()
	st, b, _ := httpDo(t, "GET", "http://"+p.admin+"/api/jobs/"+job, "")
	var j daemon.JobJSON
	if st != 200 || json.Unmarshal(b, &j) != nil {
		t.Fatalf("%s: /api/jobs/%s: %d %s", p.name, job, st, b)
	}
	return j
}

// A pause with -until lifts itself on both replicas: no tick runs before
// until on either, ticks run after it on the fleet, with no resume; the
// pause's note, author and end are in /api/jobs/{name} and `scheduler
// jobs -json` until then, and in the audit trail.
func TestPauseUntilLiftsItself(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("tick", "@every 1s", "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> tick.log`))
	ps := startFleet(t, dir, cfg, 2)
	waitSubscribed(t, srv, 2)
	tickLog := filepath.Join(dir, "tick.log")
	waitRecord(t, 10*time.Second, tickLog, "a run of tick", func(record) bool { return true })

	r := mustCLI(t, 0, dir, "pause", "tick", "-note", "db migration, see CHG-7", "-until", "6s", "-config", cfg)
	paused := time.Now()
	until := paused.Add(6 * time.Second)
	if strings.TrimSpace(r.stdout) != "tick: paused" {
		t.Errorf("pause printed %q", r.stdout)
	}
	// Shown alike by both replicas and the command.
	for _, p := range ps {
		j := apiJobOf(t, p, "tick")
		if pj := j.Pause; !j.Paused || pj == nil || pj.Note != "db migration, see CHG-7" || !strings.HasPrefix(pj.By, "cli:") || pj.Until == nil ||
			pj.Until.Sub(until).Abs() > 2*time.Second || pj.At.Sub(paused).Abs() > 2*time.Second {
			t.Errorf("%s: /api/jobs/tick: paused %v, pause %+v; want the note, by cli:, until about %v", p.name, j.Paused, pj, until)
		}
	}
	if js := jobsJSON(t, dir, cfg); !js[0].Paused || js[0].Pause == nil || js[0].Pause.Note != "db migration, see CHG-7" || js[0].Pause.Until == nil {
		t.Errorf("jobs -json: %+v; want the pause with its note and end", js[0])
	}
	if out := mustCLI(t, 0, dir, "jobs", "-config", cfg).stdout; !regexp.MustCompile(`(?m)^tick .* until \S+ by cli:\S+: db migration, see CHG-7$`).MatchString(out) {
		t.Errorf("jobs does not show the pause:\n%s", out)
	}
	if es := auditCLI(t, dir, nil, "-config", cfg); len(es) == 0 || es[0].Action != "pause" || !strings.HasPrefix(es[0].Note, "db migration, see CHG-7 (until ") {
		t.Errorf("audit: %+v; want the pause with its note and end", es)
	}

	// Ticks run again after until, on the fleet, without a resume.
	after := waitRecord(t, 30*time.Second, tickLog, "a run of tick after until", func(r record) bool { return r.tick.After(paused) })
	for _, rec := range parseRecords(t, fileLines(t, tickLog)) {
		// The store's clock decides: allow it a little skew from ours.
		if rec.tick.After(paused) && rec.tick.Before(until.Add(-time.Second)) {
			t.Errorf("tick %s ran on %s during the pause (until %s)", rec.tick.Format(time.RFC3339), rec.replica, until.Format(time.RFC3339Nano))
		}
	}
	t.Logf("paused until %s; the first tick after it: %s on %s", until.Format(time.RFC3339Nano), after.tick.Format(time.RFC3339), after.replica)
	// Both replicas see it over, and each takes its part: a tick after
	// until is claimed by either, so both record ticks not paused.
	for _, p := range ps {
		testkit.Eventually(t, 20*time.Second, p.name+": tick active again", func() bool {
			j := apiJobOf(t, p, "tick")
			return !j.Paused && j.Pause == nil && j.LastTick != nil && j.LastTick.After(until) && j.LastOutcome != "paused"
		})
	}
}

// After 3 failed runs in a row (pause_after_failures = 3, on two
// replicas), the job pauses itself with a note saying so: one auto_paused
// webhook, one audit entry by the replica, and no more runs.
func TestAutoPauseAfterFailures(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ops := newHookSink(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("flaky", "@every 1s", "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> flaky.log; echo "disk full" >&2; exit 1`,
			`pause_after_failures = 3`)+`
notify "ops" {
  url = "`+ops.srv.URL+`/ops"
}
`)
	ps := startFleet(t, dir, cfg, 2)
	flakyLog := filepath.Join(dir, "flaky.log")
	events := func(outcome string) []daemon.NotificationJSON {
		var out []daemon.NotificationJSON
		for _, b := range ops.all() {
			var n daemon.NotificationJSON
			if json.Unmarshal(b, &n) == nil && string(n.Outcome) == outcome {
				out = append(out, n)
			}
		}
		return out
	}
	testkit.Eventually(t, 45*time.Second, "an auto_paused webhook", func() bool { return len(events("auto_paused")) > 0 })
	ap := events("auto_paused")[0]
	const note = "paused after 3 failed runs in a row"
	if ap.Job != "flaky" || ap.Error != note || !strings.Contains(ap.Summary, "paused itself") {
		t.Errorf("auto_paused webhook: %+v", ap)
	}
	j := apiJobOf(t, ps[0], "flaky")
	if !j.Paused || j.Pause == nil || j.Pause.Note != note || j.Pause.By != "replica:"+ap.Replica || j.Pause.Until != nil || j.Fleet.Failures != 3 {
		t.Fatalf("/api/jobs/flaky: paused %v, pause %+v, failures %d; want paused by replica:%s with the note, 3 failures", j.Paused, j.Pause, j.Fleet.Failures, ap.Replica)
	}
	runs := len(fileLines(t, flakyLog))
	// No more runs: let a few ticks pass on both replicas.
	last := time.Now().Add(4 * time.Second)
	for _, p := range ps {
		testkit.Eventually(t, 20*time.Second, p.name+": ticks paused", func() bool {
			j := apiJobOf(t, p, "flaky")
			return j.LastTick != nil && j.LastTick.After(last) && j.LastOutcome == "paused"
		})
	}
	if n := len(fileLines(t, flakyLog)); n != runs || n != 3 {
		t.Errorf("%d runs, %d after the auto-pause; want 3 and none", n, n-runs)
	}
	if n, f := len(events("auto_paused")), len(events("failed")); n != 1 || f != 3 {
		t.Errorf("%d auto_paused and %d failed webhooks, want 1 and 3", n, f)
	}
	if es := auditCLI(t, dir, nil, "-config", cfg); len(es) != 1 || es[0].Action != "pause" || es[0].Target != "flaky" ||
		es[0].Actor != "replica:"+ap.Replica || es[0].Replica != ap.Replica || es[0].Note != note {
		t.Errorf("audit: %+v; want one pause by replica:%s with the note", es, ap.Replica)
	}
	// Logged by the replica whose finish paused the job: one.
	const warning = "job paused fleet-wide: its failed runs in a row reached its pause_after_failures; resume it to run it again"
	logged := 0
	for _, p := range ps {
		if _, ok := p.logs.find(warning); ok {
			logged++
		}
	}
	if logged != 1 {
		t.Errorf("%d replicas logged %q, want 1", logged, warning)
	}
}

// Bad input to a pause, through the API and the command: an until in the
// past, a note of 10 kB, a note with control characters, no note; each
// refused with a clear error, 400
// from the API, and nothing changed.
func TestPauseBadInput(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("tick", "@yearly", "1s", `true`))
	p := startReplica(t, dir, cfg, "r1")
	big := strings.Repeat("x", 10_000)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, c := range []struct {
		name, body, want string
		args             []string
	}{
		{"until in the past", `{"note": "late", "until": "` + past + `"}`, "is not in the future", []string{"-note", "late", "-until", past}},
		{"negative duration", `{"note": "late", "until": "-5m"}`, "is not in the future", []string{"-note", "late", "-until", "-5m"}},
		{"until unreadable", `{"note": "x", "until": "tomorrow"}`, "neither a time in RFC 3339", []string{"-note", "x", "-until", "tomorrow"}},
		{"note of 10 kB", `{"note": "` + big + `"}`, "note: 10000 bytes, at most 1000", []string{"-note", big}},
		{"note with a line break", `{"note": "disk full\nsee INC-12"}`, "has a control character", []string{"-note", "disk full\nsee INC-12"}},
		{"note with a terminal escape", `{"note": "\u001b[2Jgone"}`, "has a control character", []string{"-note", "\x1b[2Jgone"}},
		{"no note", `{"until": "1h"}`, "note: missing", []string{"-until", "1h"}},
		{"empty body", ``, "note: missing", nil},
		{"unknown field", `{"note": "x", "reason": "y"}`, "unknown field", nil},
	} {
		st, b, _ := httpBody(t, "POST", "http://"+p.admin+"/api/jobs/tick/pause", "", c.body)
		if st != 400 || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: API: %d %.200s, want 400 with %q", c.name, st, b, c.want)
		}
		if c.args != nil {
			r := cli(t, dir, append(append([]string{"pause", "tick"}, c.args...), "-config", cfg)...)
			if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Count(r.stderr, "\n") > 3 {
				t.Errorf("%s: command: exit %d %.300q, want a clear error with %q", c.name, r.code, r.stderr, c.want)
			}
		}
	}
	if j := apiJobOf(t, p, "tick"); j.Paused || j.Pause != nil {
		t.Errorf("after bad input: paused %v, %+v; want nothing changed", j.Paused, j.Pause)
	}
	if es := auditCLI(t, dir, nil, "-config", cfg); len(es) != 0 {
		t.Errorf("audit after bad input: %+v, want none", es)
	}
}
