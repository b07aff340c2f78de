package main_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/scheduler"
)

// historyOf reads `scheduler history JOB -json`.
func historyOf(t *testing.T, dir, cfg, job string) []scheduler.Run {
	t.Helper()
	r := mustCLI(t, 0, dir, "history", job, "-json", "-limit", "1000", "-config", cfg)
	var runs []scheduler.Run
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("history -json: %v\n%s", err, r.stdout)
	}
	return runs
}

// excludedOnce returns the job's excluded history entries by tick, and
// fails the test for a tick recorded twice: an entry that coalesces
// several ticks (count, first) stands for each tick of its range, a second
// apart (the test's jobs tick every second).
func excludedOnce(t *testing.T, runs []scheduler.Run) map[time.Time]scheduler.Run {
	t.Helper()
	out := make(map[time.Time]scheduler.Run)
	for _, r := range runs {
		if r.Outcome != scheduler.OutcomeExcluded {
			continue
		}
		ticks := []time.Time{r.Tick}
		if r.Count > 1 {
			ticks = nil
			for tick := r.First; !tick.After(r.Tick); tick = tick.Add(time.Second) {
				ticks = append(ticks, tick)
			}
			if int64(len(ticks)) != r.Count {
				t.Errorf("entry of %d ticks from %v to %v: %d ticks a second apart", r.Count, r.First, r.Tick, len(ticks))
			}
		}
		for _, tick := range ticks {
			if _, dup := out[tick]; dup {
				t.Errorf("tick %v recorded excluded twice", tick)
			}
			out[tick] = r
		}
	}
	return out
}

// The tests on two replica processes: a job whose calendar holds
// today runs on neither, its ticks recorded excluded once each; a freeze
// made with the command stops the other job's ticks on both, recorded
// excluded with its note, `jobs` shows the ticks that will run, and it
// lifts itself at its until; unfreeze ends one at once; bad input to the
// command and the API is refused, and nothing is changed.
func TestCalendarAndFreezeOnTwoReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	now := time.Now().UTC()
	cal := `
calendar "today" {
  dates = ["` + now.Format(time.DateOnly) + `", "` + now.Add(24*time.Hour).Format(time.DateOnly) + `"]
}
`
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+cal+
		execJob("holiday", "@every 1s", "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA" >> holiday.log`, `exclude = ["today"]`)+
		execJob("report", "@every 1s", "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA" >> report.log`))
	ps := startFleet(t, dir, cfg, 2)
	report := filepath.Join(dir, "report.log")
	waitRecord(t, 20*time.Second, report, "report runs", func(record) bool { return true })

	// Bad input, through the command and the API: refused, nothing made.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-until", "5s"}, 2, "-note is missing"},
		{[]string{"-until=-1m", "-note", "n"}, 2, `until "-1m": `},
		{[]string{"-until", "2020-01-01T00:00:00Z", "-note", "n"}, 2, "is not in the future"},
		{[]string{"-until", "5s", "-note", strings.Repeat("x", 10_000)}, 1, "note: 10000 bytes, over the 1000"},
		{[]string{"-until", "5s", "-note", "frozen\x1b[2J"}, 1, "has a control character"},
		{[]string{"-jobs", "nothing*", "-until", "5s", "-note", "n"}, 1, `jobs: "nothing*" matches no job`},
	} {
		r := cli(t, dir, append([]string{"freeze", "-config", cfg}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("freeze %q: exit %d, stderr %q; want exit %d saying %q", c.args, r.code, r.stderr, c.code, c.want)
		}
	}
	if r := cli(t, dir, "unfreeze", "f42", "-config", cfg); r.code != 1 || !strings.Contains(r.stderr, `unknown freeze "f42"`) {
		t.Errorf("unfreeze f42: exit %d, stderr %q", r.code, r.stderr)
	}
	base := "http://" + ps[0].admin
	for _, body := range []string{`{"until": "5s"}`, `{"until": "2020-01-01T00:00:00Z", "note": "n"}`, `{"jobs": "[", "until": "5s", "note": "n"}`, `{"until": "5s", "note": "` + strings.Repeat("x", 10_000) + `"}`, `{"until": "5s", "note": "a\nb"}`, `not json`} {
		resp, err := http.Post(base+"/api/freezes", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("POST /api/freezes %.60s: %d, want 400", body, resp.StatusCode)
		}
	}
	if st, b, _ := httpDo(t, "DELETE", base+"/api/freezes/f42", ""); st != http.StatusNotFound {
		t.Errorf("DELETE /api/freezes/f42: %d %s, want 404", st, b)
	}
	if st, b, _ := httpDo(t, "GET", base+"/api/freezes", ""); st != 200 || strings.TrimSpace(string(b)) != "[]" {
		t.Fatalf("GET /api/freezes after bad input: %d %s, want []", st, b)
	}

	// The calendar: holiday's ticks are excluded on both replicas, once.
	testkit.Eventually(t, 20*time.Second, "three excluded ticks of holiday", func() bool {
		return len(excludedOnce(t, historyOf(t, dir, cfg, "holiday"))) >= 3
	})

	// A freeze made with the command.
	until := time.Now().Add(6 * time.Second).Truncate(time.Second).UTC()
	r := mustCLI(t, 0, dir, "freeze", "-jobs", "rep*", "-until", until.Format(time.RFC3339), "-note", "release freeze", "-config", cfg)
	id := strings.TrimSpace(r.stdout)
	if id != "f1" {
		t.Fatalf("freeze printed %q, want the freeze's id f1", r.stdout)
	}
	frozeAt := time.Now()
	var fs []scheduler.Freeze
	if st, b, _ := httpDo(t, "GET", "http://"+ps[1].admin+"/api/freezes", ""); st != 200 || json.Unmarshal(b, &fs) != nil || len(fs) != 1 || fs[0].Note != "release freeze" || fs[0].Jobs != "rep*" || !fs[0].Until.Equal(until) {
		t.Errorf("GET /api/freezes on r2: %d %s", st, b)
	}
	for _, j := range jobsJSON(t, dir, cfg) {
		switch j.Name {
		case "report":
			if len(j.Next) != 3 || j.Next[0].Before(until) || len(j.Skipped) == 0 || j.Skipped[0].Cause != "freeze:f1" || j.Skipped[0].Reason != "freeze f1: release freeze" {
				t.Errorf("jobs: report: next %v, skipped %+v; want ticks from %v, the ones before skipped by f1", j.Next, j.Skipped, until)
			}
		case "holiday":
			// The calendar holds today and tomorrow (UTC, the job's zone):
			// the next ticks that run are the day after tomorrow's first;
			// the first tick of each day is listed skipped.
			tomorrow := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
			after := tomorrow.AddDate(0, 0, 1)
			want := []time.Time{after, after.Add(time.Second), after.Add(2 * time.Second)}
			if len(j.Next) != 3 || !j.Next[0].Equal(want[0]) || !j.Next[2].Equal(want[2]) || len(j.Skipped) != 2 || !j.Skipped[1].Tick.Equal(tomorrow) ||
				j.Skipped[0].Reason != "excluded by calendar today" || j.NoneBefore != nil {
				t.Errorf("jobs: holiday: next %v, skipped %+v, none before %v; want %v, the first tick of today and of tomorrow skipped", j.Next, j.Skipped, j.NoneBefore, want)
			}
		}
	}
	if st, b, _ := httpDo(t, "GET", base+"/", ""); st != 200 || !strings.Contains(string(b), `data-cause="freeze:f1"`) || !strings.Contains(string(b), `data-outcome="excluded"`) {
		t.Errorf("status page: %d; want the ticks skipped by f1 and the excluded runs of holiday:\n%s", st, b)
	}
	if out := mustCLI(t, 0, dir, "jobs", "-config", cfg).stdout; !strings.Contains(out, "SKIPPED TICK") || !strings.Contains(out, "freeze f1: release freeze") {
		t.Errorf("jobs: no skipped ticks with their reason:\n%s", out)
	}
	// It lifts itself at until.
	waitRecord(t, 30*time.Second, report, "report runs after the freeze", func(r record) bool { return !r.tick.Before(until) })
	for _, rec := range parseRecords(t, fileLines(t, report)) {
		if rec.tick.After(frozeAt.Add(time.Second)) && rec.tick.Before(until) {
			t.Errorf("tick %v ran on %s during the freeze (until %v)", rec.tick, rec.replica, until)
		}
	}
	ex := excludedOnce(t, historyOf(t, dir, cfg, "report"))
	if len(ex) < 3 {
		t.Errorf("%d ticks of report recorded excluded, want about 5", len(ex))
	}
	for tk, run := range ex {
		if !tk.Before(until) || run.Reason != "freeze f1: release freeze" {
			t.Errorf("tick %v recorded excluded with %q", tk, run.Reason)
		}
	}

	// unfreeze ends a freeze at once.
	id2 := strings.TrimSpace(mustCLI(t, 0, dir, "freeze", "-until", "1h", "-note", "incident", "-config", cfg).stdout)
	testkit.Eventually(t, 20*time.Second, "a tick of report excluded by "+id2, func() bool {
		for _, run := range excludedOnce(t, historyOf(t, dir, cfg, "report")) {
			if run.Reason == "freeze "+id2+": incident" {
				return true
			}
		}
		return false
	})
	mustCLI(t, 0, dir, "unfreeze", id2, "-config", cfg)
	ended := time.Now()
	waitRecord(t, 20*time.Second, report, "report runs after the unfreeze", func(r record) bool { return r.tick.After(ended.Add(time.Second)) })

	// Through the API: in the audit trail with its id and until too.
	var apiFreeze scheduler.Freeze
	resp, err := http.Post(base+"/api/freezes", "application/json", strings.NewReader(`{"jobs": "holiday", "until": "1h", "note": "api freeze"}`))
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&apiFreeze)
	resp.Body.Close()
	if resp.StatusCode != 200 || err != nil || apiFreeze.ID == "" {
		t.Fatalf("POST /api/freezes: %d, %v, %+v", resp.StatusCode, err, apiFreeze)
	}
	if st, b, _ := httpDo(t, "DELETE", base+"/api/freezes/"+apiFreeze.ID, ""); st != 200 {
		t.Errorf("DELETE /api/freezes/%s: %d %s", apiFreeze.ID, st, b)
	}

	var actions []string
	for _, e := range auditCLI(t, dir, nil, "-config", cfg) {
		actions = append(actions, e.Action+" "+e.Target+" "+e.Note)
	}
	for _, want := range []string{"freeze f1 (rep*) release freeze (until " + until.Format(time.RFC3339) + ")", "freeze " + id2 + " (*) incident (until ", "unfreeze " + id2 + " ",
		"freeze " + apiFreeze.ID + " (holiday) api freeze (until " + apiFreeze.Until.UTC().Format(time.RFC3339) + ")", "unfreeze " + apiFreeze.ID + " "} {
		if !strings.Contains(strings.Join(actions, "\n"), want) {
			t.Errorf("audit trail %q lacks %q", actions, want)
		}
	}
	if lines := fileLines(t, filepath.Join(dir, "holiday.log")); len(lines) != 0 {
		t.Errorf("holiday ran on its calendar's day: %q", lines)
	}
}
