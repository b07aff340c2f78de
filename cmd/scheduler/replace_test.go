package main_test

import (
	"encoding/json"
	"errors"
	"os"
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

// hangScript's first run (of the whole test) hangs: a shell waiting for
// its child `sleep 1000`, after it records "start TICK REPLICA ATTEMPT
// PGID"; with trap, the shell and its child ignore SIGTERM (the shell
// records "term TICK REPLICA ATTEMPT TIME" when it comes). Every other run
// records "run TICK REPLICA ATTEMPT TIME" and ends.
func hangScript(trap bool) string {
	child, wait := "sleep 1000 & pid=$!", "wait $pid"
	head := ""
	if trap {
		head = `trap 'echo "term $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $(date +%s.%N)" >> runs.log' TERM` + "\n  "
		child = "(trap '' TERM; exec sleep 1000) & pid=$!"
		wait = "while kill -0 $pid 2>/dev/null; do wait $pid; done"
	}
	return `if mkdir first.lock 2>/dev/null; then
  ` + head + child + `
  echo "start $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $(cut -d' ' -f5 /proc/$$/stat)" >> runs.log
  ` + wait + `
else
  echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT $(date +%s.%N)" >> runs.log
fi`
}

// groupGone reports whether no process is left in the process group.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// replaceHistory reads the job's history with `scheduler history -json`.
func replaceHistory(t *testing.T, dir, cfg, job string) []scheduler.Run {
	t.Helper()
	r := mustCLI(t, 0, dir, "history", job, "-json", "-limit", "1000", "-config", cfg)
	var runs []scheduler.Run
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatalf("history -json: %v\n%s", err, r.stdout)
	}
	return runs
}

// startedRun waits for the hanging run's start and returns it, with its
// process group.
func startedRun(t *testing.T, path string) (record, int) {
	t.Helper()
	first := waitRecord(t, 20*time.Second, path, "the hanging run's start", func(r record) bool { return r.word == "start" })
	if len(first.rest) != 1 {
		t.Fatalf("start record %+v: no process group", first)
	}
	pgid, err := strconv.Atoi(first.rest[0])
	if err != nil || pgid <= 1 {
		t.Fatalf("start record %+v: bad process group", first)
	}
	return first, pgid
}

// checkReplaced checks the history of a run of tick first replaced and the
// next tick (period later) run once, within grace of its time, and that
// the first tick did not run again.
func checkReplaced(t *testing.T, dir, cfg, job, path string, first record, period, grace time.Duration) {
	t.Helper()
	next := first.tick.Add(period)
	var runs []scheduler.Run
	testkit.Eventually(t, 20*time.Second, "the replaced run and the next tick's in the history", func() bool {
		runs = replaceHistory(t, dir, cfg, job)
		var replaced, ran bool
		for _, r := range runs {
			replaced = replaced || r.Outcome == scheduler.OutcomeReplaced && r.Tick.Equal(first.tick)
			ran = ran || r.Outcome == scheduler.OutcomeRan && r.Tick.Equal(next)
		}
		return replaced && ran
	})
	var lines []string
	for _, r := range runs {
		lines = append(lines, r.Tick.Format(time.RFC3339)+" "+string(r.Outcome)+" "+r.Replica+" "+r.Reason)
	}
	t.Logf("history (newest first):\n%s", strings.Join(lines, "\n"))
	for _, r := range runs {
		if r.Tick.Equal(first.tick) && r.Outcome != scheduler.OutcomeReplaced {
			t.Errorf("tick %s: history entry %s, want replaced alone", first.tick.Format(time.RFC3339), r.Outcome)
		}
		if r.Tick.Equal(first.tick) && !strings.HasPrefix(r.Reason, "replaced by tick ") {
			t.Errorf("tick %s: reason %q, want it to name the replacing tick", first.tick.Format(time.RFC3339), r.Reason)
		}
	}
	counts := make(map[time.Time]int)
	for _, r := range parseRecords(t, fileLines(t, path)) {
		if r.word != "term" {
			counts[r.tick]++
		}
	}
	if counts[first.tick] != 1 {
		t.Errorf("tick %s ran %d times, want once (replaced, not run again)", first.tick.Format(time.RFC3339), counts[first.tick])
	}
	if counts[next] != 1 {
		t.Errorf("tick %s, the one that replaced it, ran %d times, want once", next.Format(time.RFC3339), counts[next])
	}
	// It ran as soon as the lock was free: within the replaced run's grace
	// (its own process gone at SIGTERM, or SIGKILLed after the grace), with
	// room for a loaded machine.
	if r, ok := findRecord(t, path, func(r record) bool { return r.word == "run" && r.tick.Equal(next) }); ok {
		late := unixTime(t, r.rest[0]).Sub(next)
		t.Logf("tick %s started %v after its time", next.Format(time.RFC3339), late.Round(time.Millisecond))
		if late > grace+5*time.Second {
			t.Errorf("tick %s started %v after its time, want within its grace %v (and 5s)", next.Format(time.RFC3339), late, grace)
		}
	}
}

// overlap = "replace" on three replicas: the next tick ends a hanging exec
// job (a shell waiting for its child), wherever it runs: its process group
// gets SIGTERM and is gone; the history says replaced, with the replacing
// tick; that tick runs once.
func TestReplaceEndsHangingExecJob(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	const job = "stuck"
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob(job, "@every 2s", "2s", hangScript(false), `overlap = "replace"`))
	startFleet(t, dir, cfg, 3)
	path := filepath.Join(dir, "runs.log")
	first, pgid := startedRun(t, path)
	testkit.Eventually(t, first.tick.Add(2*time.Second).Sub(time.Now())+10*time.Second, "the hanging run's process group gone", func() bool {
		return groupGone(pgid)
	})
	t.Logf("tick %s ran on %s (group %d), ended by the next tick; gone %v after it", first.tick.Format(time.RFC3339), first.replica, pgid,
		time.Since(first.tick.Add(2*time.Second)).Round(time.Millisecond))
	checkReplaced(t, dir, cfg, job, path, first, 2*time.Second, 2*time.Second)
}

// An exec job that ignores SIGTERM is SIGKILLed once its grace has passed:
// its group is still there after the SIGTERM, and gone after the grace.
func TestReplaceKillsAJobThatTrapsSIGTERM(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	// The grace is shorter than the period, so that the next tick is the
	// one that runs (with a longer grace, a still later tick replaces the
	// one that waits, before it runs).
	const job, grace = "stubborn", 2 * time.Second
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob(job, "@every 4s", grace.String(), hangScript(true), `overlap = "replace"`))
	startFleet(t, dir, cfg, 2)
	path := filepath.Join(dir, "runs.log")
	first, pgid := startedRun(t, path)
	term := waitRecord(t, 15*time.Second, path, "the SIGTERM of the hanging run", func(r record) bool { return r.word == "term" })
	if groupGone(pgid) {
		t.Fatalf("group %d gone at once after SIGTERM; its processes ignore it", pgid)
	}
	testkit.Eventually(t, grace+10*time.Second, "the stubborn run's process group gone", func() bool { return groupGone(pgid) })
	gone := time.Now()
	termAt := unixTime(t, term.rest[0])
	t.Logf("SIGTERM at %s, group gone %v later (grace %v)", termAt.Format(time.RFC3339Nano), gone.Sub(termAt).Round(time.Millisecond), grace)
	if gone.Sub(termAt) < grace-200*time.Millisecond {
		t.Errorf("group gone %v after SIGTERM, before its grace of %v", gone.Sub(termAt), grace)
	}
	checkReplaced(t, dir, cfg, job, path, first, 4*time.Second, grace)
}

// The replica that runs the hanging job is SIGKILLed: its lock is held
// until its lease ends. The next tick's claim, on a survivor, records the
// request in the ledger as it waits; once the lease ends it takes the
// dead replica's tick over, records it replaced without running it again,
// and runs its own.
func TestReplaceHolderKilled(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	const job, lease = "orphan", 8 * time.Second
	text := strings.Replace(header(srv.Addr(), "5s"), "redis {", "lock {\n  lease = \""+lease.String()+"\"\n}\nredis {", 1)
	cfg := writeConfig(t, dir, text+execJob(job, "@every 2s", "1s", hangScript(false), `overlap = "replace"`))
	ps := startFleet(t, dir, cfg, 3)
	path := filepath.Join(dir, "runs.log")
	first, pgid := startedRun(t, path)
	victim := byName(ps, first.replica)
	if victim == nil {
		t.Fatalf("the run started on %q, not one of the replicas", first.replica)
	}
	victim.signal(t, syscall.SIGKILL)
	victim.awaitExit(t, 5*time.Second)
	testkit.Eventually(t, 10*time.Second, "the killed replica's job gone", func() bool { return groupGone(pgid) })
	var runs []scheduler.Run
	testkit.Eventually(t, lease+20*time.Second, "the killed replica's tick recorded replaced", func() bool {
		runs = replaceHistory(t, dir, cfg, job)
		for _, r := range runs {
			if r.Outcome == scheduler.OutcomeReplaced && r.Tick.Equal(first.tick) {
				return r.Replica != victim.name
			}
		}
		return false
	})
	waitRecord(t, 20*time.Second, path, "a later tick run", func(r record) bool { return r.word == "run" && r.tick.After(first.tick) })
	for _, r := range parseRecords(t, fileLines(t, path)) {
		if r.tick.Equal(first.tick) && r.word != "start" {
			t.Errorf("tick %s ran again: %+v", first.tick.Format(time.RFC3339), r)
		}
	}
}

// overlap = "replace" across replica processes, forced: r1's schedule has
// the job's ticks at seconds 0, 4, 8..., r2's those at 2, 6, 10... (one
// job: the same lock and ledger), so each tick is claimed by one replica
// alone, and the run that hangs, wherever it runs, is ended by the other
// replica's tick: its process group is gone, the history has it replaced
// on its replica and the next tick run on the other.
func TestReplaceAcrossReplicaProcesses(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	const job = "stuck-across"
	text := func(schedule string) string {
		return header(srv.Addr(), "5s") + execJob(job, schedule, "2s", hangScript(false), `overlap = "replace"`)
	}
	cfg := writeConfig(t, dir, text("*/4 * * * * *"))
	cfgB := filepath.Join(dir, "lockcron-b.hcl")
	if err := os.WriteFile(cfgB, []byte(text("2/4 * * * * *")), 0o600); err != nil {
		t.Fatal(err)
	}
	ps := []*proc{startReplicaNoWait(t, dir, cfg, "r1"), startReplicaNoWait(t, dir, cfgB, "r2")}
	for _, p := range ps {
		p.waitReady(t)
	}
	path := filepath.Join(dir, "runs.log")
	first, pgid := startedRun(t, path)
	testkit.Eventually(t, first.tick.Add(2*time.Second).Sub(time.Now())+10*time.Second, "the hanging run's process group gone", func() bool {
		return groupGone(pgid)
	})
	checkReplaced(t, dir, cfg, job, path, first, 2*time.Second, 2*time.Second)
	next := first.tick.Add(2 * time.Second)
	var replacedOn, ranOn string
	for _, r := range replaceHistory(t, dir, cfg, job) {
		switch {
		case r.Outcome == scheduler.OutcomeReplaced && r.Tick.Equal(first.tick):
			replacedOn = r.Replica
		case r.Outcome == scheduler.OutcomeRan && r.Tick.Equal(next):
			ranOn = r.Replica
		}
	}
	if replacedOn != first.replica || ranOn == "" || ranOn == replacedOn {
		t.Errorf("tick %s replaced on %q (ran on %q), tick %s ran on %q; want the replacement across the two replicas",
			first.tick.Format(time.RFC3339), replacedOn, first.replica, next.Format(time.RFC3339), ranOn)
	}
}
