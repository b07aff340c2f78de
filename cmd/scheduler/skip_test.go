package main_test

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/scheduler"
)

// A replica SIGKILLed mid-run leaves its job's lock held until the lease
// ends: the ticks that come meanwhile are skipped (overlap skip), and the
// history says so in one entry, the skips coalesced with their count and
// range, naming the holder and its expired membership; `scheduler history`
// shows it, in JSON and in the table.
func TestSIGKILLedHolderSkipsLeaveOneEntry(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	const lease = 8 * time.Second
	// The first run outlasts the test (the period is 1s); the others,
	// among them the interrupted tick's re-run, end at once.
	script := `if mkdir first.lock 2>/dev/null; then
  sleep 60 & pid=$!
  echo "start $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $(date +%s.%N)" >> runs.log
  wait $pid
else
  echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $(date +%s.%N)" >> runs.log
fi`
	text := strings.Replace(header(srv.Addr(), "5s"), "redis {", "lock {\n  lease = \""+lease.String()+"\"\n}\nredis {", 1)
	cfg := writeConfig(t, dir, text+execJob("long", "@every 1s", "1s", script, `overlap = "skip"`))
	ps := startFleet(t, dir, cfg, 3)

	path := filepath.Join(dir, "runs.log")
	first := waitRecord(t, 15*time.Second, path, "the long run's start", func(r record) bool { return r.word == "start" })
	victim := byName(ps, first.replica)
	if victim == nil {
		t.Fatalf("the run started on %q, not one of the replicas", first.replica)
	}
	history := func() []scheduler.Run {
		t.Helper()
		r := mustCLI(t, 0, dir, "history", "long", "-json", "-limit", "1000", "-config", cfg)
		var runs []scheduler.Run
		if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
			t.Fatalf("history -json: %v\n%s", err, r.stdout)
		}
		return runs
	}
	// Two ticks skipped while it lives, then the kill.
	live := "lock held by " + victim.name + " (run of " + first.tick.UTC().Format(time.RFC3339) + " since "
	testkit.Eventually(t, 15*time.Second, "two busy ticks recorded while the run lives", func() bool {
		runs := history()
		return len(runs) > 0 && runs[0].Outcome == scheduler.OutcomeSkippedBusy && runs[0].Count >= 2 && strings.HasPrefix(runs[0].Reason, live)
	})
	killed := time.Now()
	victim.signal(t, syscall.SIGKILL)
	victim.awaitExit(t, 5*time.Second)

	// Its tick is run again once the lease has ended.
	again := waitRecord(t, lease+15*time.Second, path, "the interrupted tick run again", func(r record) bool {
		return r.word == "run" && r.tick.Equal(first.tick) && r.attempt == 2
	})
	t.Logf("SIGKILL of %s; its tick %s run again by %s %v later", victim.name, first.tick.Format(time.RFC3339), again.replica,
		unixTime(t, again.rest[0]).Sub(killed).Round(time.Millisecond))

	var busy []scheduler.Run
	var runs []scheduler.Run
	testkit.Eventually(t, 15*time.Second, "the re-run and a later run in the history", func() bool {
		runs = history()
		busy = busy[:0]
		later := false
		for _, r := range runs {
			// The ticks skipped while the victim's lock was held (the
			// re-run of its tick may hold the lock over a tick too: an
			// entry of its own, naming its replica).
			if r.Outcome == scheduler.OutcomeSkippedBusy && strings.HasPrefix(r.Reason, "lock held by "+victim.name) {
				busy = append(busy, r)
			}
			later = later || (r.Outcome == scheduler.OutcomeRan && r.Tick.After(first.tick))
		}
		return later
	})
	var lines []string
	for _, r := range runs {
		lines = append(lines, r.Tick.Format(time.RFC3339)+" "+string(r.Outcome)+" "+r.Replica+" "+r.Reason)
	}
	t.Logf("history (newest first):\n%s", strings.Join(lines, "\n"))
	if len(busy) != 1 {
		t.Fatalf("%d skipped_busy entries naming %s, want one for the ticks skipped while its lock was held", len(busy), victim.name)
	}
	b := busy[0]
	t.Logf("busy entry: %d ticks from %s to %s, recorded by %s: %s", b.Count, b.First.Format(time.RFC3339), b.Tick.Format(time.RFC3339), b.Replica, b.Reason)
	// The ticks from the one after the run's to about the lease after the
	// kill, in a row: 2 at least while it lived, and those until the lease
	// ended.
	if b.Count < 2 || !b.First.After(first.tick) || b.Tick.Sub(b.First) < time.Duration(b.Count-1)*time.Second {
		t.Errorf("busy entry: %d ticks from %s to %s; want 2 or more after %s", b.Count, b.First.Format(time.RFC3339),
			b.Tick.Format(time.RFC3339), first.tick.Format(time.RFC3339))
	}
	if gap := b.Tick.Sub(b.First)/time.Second + 1 - time.Duration(b.Count); gap != 0 {
		// A tick recorded after a later one (a loaded machine) is not
		// counted: the store records skips in tick order.
		t.Logf("note: %d ticks of the range not counted", gap)
	}
	if b.Tick.Before(killed.Add(time.Second)) {
		t.Errorf("busy entry ends at %s, before the lease after the kill (%s)", b.Tick.Format(time.RFC3339), killed.Format(time.RFC3339))
	}
	if want := "lock held by " + victim.name + ", whose membership expired at "; !strings.HasPrefix(b.Reason, want) {
		t.Errorf("reason %q, want it to start with %q", b.Reason, want)
	}

	// The job's page on a survivor shows the entry: its range, count and
	// reason.
	var survivor *proc
	for _, p := range ps {
		if p != victim {
			survivor = p
		}
	}
	ctx := newBrowser(t)
	open(t, ctx, "http://"+survivor.admin+"/jobs/long")
	sel := `document.querySelector('#runs tr[data-outcome="skipped_busy"]')`
	waitJS(t, ctx, "the busy entry in long's history", sel+` && `+sel+`.dataset.count === '`+strconv.FormatInt(b.Count, 10)+`'`)
	rowText := eval[string](t, ctx, sel+`.innerText`)
	for _, want := range []string{"skipped: busy", "×" + strconv.FormatInt(b.Count, 10), "lock held by " + victim.name + ", whose membership expired at"} {
		if !strings.Contains(rowText, want) {
			t.Errorf("the page's busy row %q does not show %q", rowText, want)
		}
	}
	if n := eval[int](t, ctx, sel+`.querySelectorAll('time').length`); n < 3 {
		t.Errorf("the page's busy row has %d times, want the range's two and the start", n)
	}

	// The table shows the range, the count and the reason.
	tbl := mustCLI(t, 0, dir, "history", "long", "-limit", "1000", "-config", cfg).stdout
	var row string
	for _, l := range strings.Split(tbl, "\n") {
		if strings.Contains(l, "skipped_busy") {
			row = l
		}
	}
	if !strings.Contains(row, b.First.UTC().Format(time.RFC3339)+"..") || !strings.Contains(row, "skipped_busy ×") ||
		!strings.Contains(row, "lock held by "+victim.name) {
		t.Errorf("history table's busy row %q; want the range, the count and the reason:\n%s", row, tbl)
	}
}
