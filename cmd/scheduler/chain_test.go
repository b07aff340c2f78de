package main_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// chainConfig is extract (every 2s; its ticks at :X0 fail) and load,
// which follows it; each writes a line per run: "ok|fail TICK REPLICA
// ATTEMPT" to extract.log, "load TICK REPLICA ATTEMPT PARENT" to load.log.
func chainConfig(addr string) string {
	return header(addr, "5s") + execJob("extract", "@every 2s", "1s",
		`case "$LOCKCRON_TICK" in
  *0Z) echo "fail $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> extract.log; exit 1;;
esac
echo "ok $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> extract.log`) + `
job "load" {
  after = ["extract"]
  exec {
    command = ["sh", "-c", "echo \"load $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $LOCKCRON_PARENT\" >> load.log"]
    grace = "1s"
  }
}
`
}

// checkChainRuns checks that load ran once for each successful run of
// extract up to last, with its tick and LOCKCRON_PARENT, and never after
// a failed one; it returns the number of loads checked.
func checkChainRuns(t *testing.T, dir string, last time.Time) int {
	t.Helper()
	ok := make(map[time.Time]bool)
	for _, r := range parseRecords(t, fileLines(t, filepath.Join(dir, "extract.log"))) {
		if r.word == "ok" {
			ok[r.tick] = true
		}
	}
	loads := make(map[time.Time]int)
	for _, r := range parseRecords(t, fileLines(t, filepath.Join(dir, "load.log"))) {
		loads[r.tick]++
		if !ok[r.tick] {
			t.Errorf("load ran for tick %s, which extract did not run successfully", r.tick.Format(time.RFC3339))
		}
		if want := "extract@" + r.tick.UTC().Format(time.RFC3339); len(r.rest) != 1 || r.rest[0] != want {
			t.Errorf("load of %s: LOCKCRON_PARENT %q, want %q", r.tick.Format(time.RFC3339), r.rest, want)
		}
	}
	n := 0
	for tick := range ok {
		if tick.After(last) {
			continue
		}
		n++
		if loads[tick] != 1 {
			t.Errorf("load ran %d times for extract's tick %s, want once", loads[tick], tick.Format(time.RFC3339))
		}
	}
	return n
}

// loadsUpTo reports whether load ran for every successful extract up to
// last.
func loadsUpTo(t *testing.T, dir string, last time.Time) bool {
	t.Helper()
	loads := make(map[time.Time]bool)
	for _, r := range parseRecords(t, fileLines(t, filepath.Join(dir, "load.log"))) {
		loads[r.tick] = true
	}
	for _, r := range parseRecords(t, fileLines(t, filepath.Join(dir, "extract.log"))) {
		if r.word == "ok" && !r.tick.After(last) && !loads[r.tick] {
			return false
		}
	}
	return true
}

// A chain extract → load on three replica processes: load runs once per
// successful extract, never after a failed one, with extract's tick and
// LOCKCRON_PARENT.
func TestChainOnFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, chainConfig(srv.Addr()))
	ps := startFleet(t, dir, cfg, 3)
	last := time.Now().Add(16 * time.Second).Truncate(2 * time.Second)
	extract := filepath.Join(dir, "extract.log")
	// The page names each job's parents and children.
	ctx := newBrowser(t)
	open(t, ctx, "http://"+ps[0].admin+"/")
	waitJS(t, ctx, "load's row names extract, and extract's names load",
		row("load")+`.querySelector('a[data-parent="extract"]') && `+row("extract")+`.querySelector('a[data-child="load"]')`)
	waitRecord(t, 40*time.Second, extract, "extract's tick 16s after the start", func(r record) bool { return !r.tick.Before(last) })
	// load's history on its page names the parent run.
	open(t, ctx, "http://"+ps[0].admin+"/jobs/load")
	waitJS(t, ctx, "load's history names extract's run", `document.querySelector('#runs [data-parent-run^="extract@"]')`)
	testkit.Eventually(t, 30*time.Second, "load after every successful extract", func() bool { return loadsUpTo(t, dir, last) })
	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		p.awaitExit(t, 15*time.Second)
	}
	if n := checkChainRuns(t, dir, last); n < 4 {
		t.Errorf("%d successful runs of extract checked, want at least 4", n)
	}
	fails := 0
	for _, r := range parseRecords(t, fileLines(t, extract)) {
		if r.word == "fail" {
			fails++
		}
	}
	if fails == 0 {
		t.Error("no run of extract failed: the test shows nothing about failed parents")
	}
	res := mustCLI(t, 0, dir, "jobs", "-config", cfg)
	for _, want := range []string{"after extract", "extract (on success)"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("scheduler jobs lacks %q:\n%s", want, res.stdout)
		}
	}
}

// Fan-in on three replica processes: report follows a and b, which share
// a schedule (b's ticks at :X0 fail): it runs once for each tick both ran
// successfully, with that tick, and never for one b failed.
func TestChainFanInOnFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("a", "@every 2s", "1s", `echo "ok $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> a.log`)+
		execJob("b", "@every 2s", "1s", `case "$LOCKCRON_TICK" in
  *0Z) echo "fail $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> b.log; exit 1;;
esac
echo "ok $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> b.log`)+`
job "report" {
  after = ["a", "b"]
  exec {
    command = ["sh", "-c", "echo \"report $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $LOCKCRON_PARENT\" >> report.log"]
    grace = "1s"
  }
}
`)
	ps := startFleet(t, dir, cfg, 3)
	last := time.Now().Add(14 * time.Second).Truncate(2 * time.Second)
	oks := func(name string) map[time.Time]bool {
		m := make(map[time.Time]bool)
		for _, r := range parseRecords(t, fileLines(t, filepath.Join(dir, name))) {
			if r.word == "ok" {
				m[r.tick] = true
			}
		}
		return m
	}
	reports := func() map[time.Time][]record {
		m := make(map[time.Time][]record)
		for _, r := range parseRecords(t, fileLines(t, filepath.Join(dir, "report.log"))) {
			m[r.tick] = append(m[r.tick], r)
		}
		return m
	}
	waitRecord(t, 40*time.Second, filepath.Join(dir, "b.log"), "b's tick 14s after the start", func(r record) bool { return !r.tick.Before(last) })
	testkit.Eventually(t, 30*time.Second, "report after every tick both a and b ran", func() bool {
		a, b, rep := oks("a.log"), oks("b.log"), reports()
		for tick := range a {
			if b[tick] && !tick.After(last) && len(rep[tick]) == 0 {
				return false
			}
		}
		return true
	})
	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		p.awaitExit(t, 15*time.Second)
	}
	a, b, rep := oks("a.log"), oks("b.log"), reports()
	both, bFailed := 0, 0
	for _, r := range parseRecords(t, fileLines(t, filepath.Join(dir, "b.log"))) {
		if r.word == "fail" && !r.tick.After(last) {
			bFailed++
		}
	}
	for tick, rs := range rep {
		if !a[tick] || !b[tick] {
			t.Errorf("report ran for tick %s, which a and b did not both run successfully", tick.Format(time.RFC3339))
		}
		want := tick.UTC().Format(time.RFC3339)
		for _, r := range rs {
			if len(r.rest) != 1 || (r.rest[0] != "a@"+want && r.rest[0] != "b@"+want) {
				t.Errorf("report of %s: LOCKCRON_PARENT %q, want a@ or b@ that tick", want, r.rest)
			}
		}
	}
	for tick := range a {
		if !b[tick] || tick.After(last) {
			continue
		}
		both++
		if n := len(rep[tick]); n != 1 {
			t.Errorf("report ran %d times for tick %s, which a and b both ran, want once", n, tick.Format(time.RFC3339))
		}
	}
	if both < 4 || bFailed == 0 {
		t.Errorf("%d ticks both ran and %d b failed, want at least 4 and 1: the test shows too little", both, bFailed)
	}
}

// The replica that finished extract is SIGKILLed before load could start
// (load's lock is held meanwhile): another replica, started afterwards,
// runs load for that tick, once.
func TestChainSurvivesKillBetweenParentAndChild(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, chainConfig(srv.Addr()))
	ctx := context.Background()
	locks, err := lock.New(srv.Client(), lock.WithClientID("test"))
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	held, err := locks.Mutex("load").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r1 := startReplica(t, dir, cfg, "r1")
	// extract's finish recorded its run for load: r1 is now between the
	// two, its claim of load waiting for the lock.
	rdb := srv.Client()
	var first time.Time
	testkit.Eventually(t, 30*time.Second, "a successful run of extract recorded", func() bool {
		ms, err := rdb.ZRange(ctx, "lockcron:{extract}:ledger:extract:chain", 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			var tick int64
			var outcome string
			if _, err := fmt.Sscanf(m, "%d\n%s", &tick, &outcome); err == nil && outcome == "ran" {
				first = time.UnixMilli(tick).UTC()
				return true
			}
		}
		return false
	})
	r1.signal(t, syscall.SIGKILL)
	r1.awaitExit(t, 10*time.Second)
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	ps := []*proc{startReplicaNoWait(t, dir, cfg, "r2"), startReplicaNoWait(t, dir, cfg, "r3")}
	for _, p := range ps {
		p.waitReady(t)
	}
	load := filepath.Join(dir, "load.log")
	rec := waitRecord(t, 30*time.Second, load, "load for the tick of the killed replica", func(r record) bool { return r.tick.Equal(first) })
	if rec.replica == "r1" {
		t.Errorf("load of %s ran on r1, which was killed before it could", first.Format(time.RFC3339))
	}
	last := time.Now().Add(6 * time.Second).Truncate(2 * time.Second)
	waitRecord(t, 30*time.Second, filepath.Join(dir, "extract.log"), "a later tick of extract", func(r record) bool { return !r.tick.Before(last) })
	testkit.Eventually(t, 30*time.Second, "load after every successful extract", func() bool { return loadsUpTo(t, dir, last) })
	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		p.awaitExit(t, 15*time.Second)
	}
	checkChainRuns(t, dir, last)
	t.Logf("extract's tick %s finished on r1, killed; load ran on %s (attempt %d)", first.Format(time.RFC3339), rec.replica, rec.attempt)
}
