package main_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/scheduler"
)

// scheduler history answers what ran, where, for how long and why it
// failed, the same from any replica's Redis, with the config's secrets
// out of the error text.
func TestHistoryCommand(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	const secret = "tok-7f3a9c21e5"
	// The admin token is a secret of the config: a job that prints it in
	// its error does not leave it in the history.
	text := strings.Replace(header(srv.Addr(), "5s"), `listen = "127.0.0.1:0"`, `listen = "127.0.0.1:0"
  token = "`+secret+`"`, 1)
	cfg := writeConfig(t, dir, text+
		execJob("flaky", "@every 1s", "1s", `if [ $(( $(date +%s) % 2 )) -eq 0 ]; then echo "upload refused with `+secret+`" >&2; exit 3; fi; sleep 0.1`))
	ps := startFleet(t, dir, cfg, 2)

	history := func(args ...string) []scheduler.Run {
		t.Helper()
		r := mustCLI(t, 0, dir, append([]string{"history", "flaky", "-json", "-config", cfg}, args...)...)
		var runs []scheduler.Run
		if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
			t.Fatalf("history -json: %v\n%s", err, r.stdout)
		}
		return runs
	}
	var runs []scheduler.Run
	testkit.Eventually(t, 45*time.Second, "a failed run and a good one in the history", func() bool {
		runs = history("-limit", "1000")
		var ok, failed bool
		for _, r := range runs {
			ok = ok || r.Outcome == scheduler.OutcomeRan
			failed = failed || r.Outcome == scheduler.OutcomeFailed
		}
		return ok && failed && len(runs) >= 4
	})
	for i, r := range runs {
		if r.ID == "" || r.Job != "flaky" || (r.Replica != "r1" && r.Replica != "r2") || r.Attempt != 1 || r.Token == 0 ||
			r.Start.IsZero() || r.End.Before(r.Start) || r.Duration <= 0 {
			t.Errorf("run %d incomplete: %+v", i, r)
		}
		if i > 0 && !r.Tick.Before(runs[i-1].Tick) {
			t.Errorf("runs not newest first: %v then %v", runs[i-1].Tick, r.Tick)
		}
		switch r.Outcome {
		case scheduler.OutcomeFailed:
			if !strings.Contains(r.Error, "upload refused with [redacted]") || !strings.Contains(r.Error, "exit status 3") {
				t.Errorf("failed run's error tail %q, want the job's stderr with the token redacted, and its exit", r.Error)
			}
		case scheduler.OutcomeRan:
			if r.Error != "" || r.Duration < 100*time.Millisecond {
				t.Errorf("good run: error %q, duration %v", r.Error, r.Duration)
			}
		}
	}

	// The table: a header and a row per run, with the replica, outcome and
	// error's last line.
	tbl := mustCLI(t, 0, dir, "history", "flaky", "-limit", "4", "-config", cfg).stdout
	rows := strings.Split(strings.TrimSpace(tbl), "\n")
	if len(rows) != 5 || !strings.HasPrefix(rows[0], "ID") || !strings.Contains(rows[0], "REPLICA") || !strings.Contains(rows[0], "DURATION") {
		t.Fatalf("history table:\n%s", tbl)
	}
	if strings.Contains(tbl, secret) {
		t.Errorf("the table shows the token:\n%s", tbl)
	}
	for _, row := range rows[1:] {
		if !strings.Contains(row, " r1 ") && !strings.Contains(row, " r2 ") {
			t.Errorf("row without its replica: %q", row)
		}
		if strings.Contains(row, " failed ") && !strings.Contains(row, "[redacted]") && !strings.Contains(row, "exit status 3") {
			t.Errorf("failed row without its error: %q", row)
		}
	}

	// The gauges that the alert rules of docs/operations.md use, on either replica:
	// the fleet's last success, within the last runs' times.
	for _, p := range ps {
		st, b, _ := httpDo(t, "GET", "http://"+p.admin+"/metrics", "")
		m := string(b)
		last, ok := testkit.Metric(m, "lockcron_job_last_success_timestamp_seconds", `lockcron_job="flaky"`)
		if st != 200 || !ok || time.Since(time.Unix(int64(last), 0)) > time.Minute {
			t.Errorf("%s: lockcron_job_last_success_timestamp_seconds{lockcron_job=\"flaky\"} = %v (%v), want a recent time", p.name, last, ok)
		}
		if next, ok := testkit.Metric(m, "lockcron_job_next_tick_timestamp_seconds", `lockcron_job="flaky"`); !ok || next < last {
			t.Errorf("%s: lockcron_job_next_tick_timestamp_seconds = %v, %v", p.name, next, ok)
		}
		if v, ok := testkit.Metric(m, "lockcron_job_paused", `lockcron_job="flaky"`); !ok || v != 0 {
			t.Errorf("%s: lockcron_job_paused = %v, %v; want 0", p.name, v, ok)
		}
		if v, ok := testkit.Metric(m, "lockcron_job_period_seconds", `lockcron_job="flaky"`); !ok || v != 1 {
			t.Errorf("%s: lockcron_job_period_seconds = %v, %v; want 1", p.name, v, ok)
		}
	}

	// Paging: -before the first of a page gives the runs after it.
	page := history("-limit", "2")
	next := history("-limit", "2", "-before", page[0].ID)
	if len(page) != 2 || len(next) != 2 || next[0].ID != page[1].ID {
		t.Errorf("-before %s gave %v, want it to start at %s", page[0].ID, next, page[1].ID)
	}
	for _, args := range [][]string{{"-limit", "0"}, {"-limit", "1001"}, {"-before", "yesterday"}} {
		r := mustCLI(t, 2, dir, append([]string{"history", "flaky", "-config", cfg}, args...)...)
		if !strings.Contains(r.stderr, args[0]) {
			t.Errorf("history %v: %q does not name the flag", args, r.stderr)
		}
	}
}
