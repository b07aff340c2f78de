package main_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// TestReplicasAllRunsOnEveryReplica: a job with replicas = "all" runs each
// tick on each of three replica processes, once; a replica killed with
// SIGKILL and started again with the same replica id runs neither the
// tick it was killed in nor any tick twice; `scheduler jobs` lists the
// last outcome of each replica.
func TestReplicasAllRunsOnEveryReplica(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	text := strings.Replace(header(srv.Addr(), "5s"), "redis {", "lock {\n  lease = \"8s\"\n}\nredis {", 1) +
		execJob("cache", "@every 1s", "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> ticks.log; sleep 0.3`,
			`replicas = "all"`)
	cfg := writeConfig(t, dir, text)
	ps := startFleet(t, dir, cfg, 3)
	path := filepath.Join(dir, "ticks.log")
	ids := []string{"r1", "r2", "r3"}
	// fullAfter is the first tick after from that ran on every replica.
	fullAfter := func(from time.Time) (time.Time, bool) {
		by := make(map[time.Time]map[string]bool)
		for _, r := range parseRecords(t, fileLines(t, path)) {
			if by[r.tick] == nil {
				by[r.tick] = make(map[string]bool)
			}
			by[r.tick][r.replica] = true
		}
		var first time.Time
		for tick, reps := range by {
			if tick.After(from) && len(reps) == len(ids) && (first.IsZero() || tick.Before(first)) {
				first = tick
			}
		}
		return first, !first.IsZero()
	}
	testkit.Eventually(t, 30*time.Second, "a tick run on all three replicas", func() bool {
		_, ok := fullAfter(time.Time{})
		return ok
	})

	// r2 dies mid-run (its runs take 0.3s of each second) and comes back
	// with the same id.
	r2 := byName(ps, "r2")
	r2.signal(t, syscall.SIGKILL)
	r2.awaitExit(t, 10*time.Second)
	killed := time.Now()
	ps[1] = startReplica(t, dir, cfg, "r2")
	testkit.Eventually(t, 40*time.Second, "a tick after the restart run on all three replicas", func() bool {
		_, ok := fullAfter(killed.Add(time.Second))
		return ok
	})

	out := mustCLI(t, 0, dir, "jobs", "-config", cfg).stdout
	if !strings.Contains(out, "Last outcome per replica") || !strings.Contains(out, "per replica, below") {
		t.Errorf("scheduler jobs lists no outcome per replica:\n%s", out)
	}
	for _, id := range ids {
		if !strings.Contains(out, "cache  "+id+" ") && !strings.Contains(out, "cache "+id) {
			t.Errorf("scheduler jobs does not list replica %s:\n%s", id, out)
		}
	}

	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		p.awaitExit(t, 15*time.Second)
	}
	seen := make(map[string]int)
	for _, r := range parseRecords(t, fileLines(t, path)) {
		key := fmt.Sprintf("%s on %s", r.tick.Format(time.RFC3339), r.replica)
		seen[key]++
		if seen[key] == 2 {
			t.Errorf("tick %s ran twice", key)
		}
		if r.attempt != 1 {
			t.Errorf("tick %s: attempt %d, want 1 (a run on every replica is never taken over)", key, r.attempt)
		}
	}
}

// TestBrowserPerReplicaOutcomes: the jobs page shows, for a job with
// replicas = "all", the last outcome of each replica.
func TestBrowserPerReplicaOutcomes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		// Fails on r2 alone.
		execJob("cache", "@every 1s", "1s", `[ "$LOCKCRON_REPLICA" != r2 ] || { echo "no cache dir" >&2; exit 1; }`, `replicas = "all"`))
	ps := startFleet(t, dir, cfg, 2)
	ctx := newBrowser(t)
	open(t, ctx, "http://"+ps[0].admin+"/")
	li := func(replica, outcome string) string {
		return fmt.Sprintf(`%s.querySelector('.per-replica li[data-replica=%q][data-outcome=%q]')`, row("cache"), replica, outcome)
	}
	waitJS(t, ctx, "r1 ran and r2 failed, each in its line", li("r1", "ran")+` && `+li("r2", "failed"))
	for _, c := range []struct{ what, js string }{
		{"two lines, one per replica, in order", `Array.from(` + row("cache") + `.querySelectorAll('.per-replica li')).map(l => l.dataset.replica).join() === 'r1,r2'`},
		{"r1's line in words", `/r1: ran/.test(` + li("r1", "ran") + `.innerText)`},
		{"r2's line in words, marked ✗", `/r2: failed/.test(` + li("r2", "failed") + `.innerText) && ` + li("r2", "failed") + `.querySelector('.cell').textContent === '✗'`},
	} {
		if !eval[bool](t, ctx, "!!("+c.js+")") {
			t.Errorf("jobs page: %s: not so; the page says:\n%s", c.what, mainText(ctx))
		}
	}
}
