package main_test

import (
	"encoding/json"
	"fmt"
	"os"
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
// SIGKILL in the middle of a run and started again with the same replica
// id runs neither that tick (it is recorded interrupted) nor any tick
// twice; `scheduler jobs` lists the last outcome of each replica.
func TestReplicasAllRunsOnEveryReplica(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	text := strings.Replace(header(srv.Addr(), "5s"), "redis {", "lock {\n  lease = \"8s\"\n}\nredis {", 1) +
		// r2 hangs in its run while the file "hang" is there.
		execJob("cache", "@every 1s", "1s", `if [ "$LOCKCRON_REPLICA" = r2 ] && [ -e hang ]; then echo "hang $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> ticks.log; sleep 60; fi
echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> ticks.log`,
			`replicas = "all"`)
	cfg := writeConfig(t, dir, text)
	ps := startFleet(t, dir, cfg, 3)
	path := filepath.Join(dir, "ticks.log")
	ids := []string{"r1", "r2", "r3"}
	// runs is how many times each tick ran on each replica.
	runs := func() map[time.Time]map[string]int {
		by := make(map[time.Time]map[string]int)
		for _, r := range parseRecords(t, fileLines(t, path)) {
			if r.word != "run" {
				continue
			}
			if by[r.tick] == nil {
				by[r.tick] = make(map[string]int)
			}
			by[r.tick][r.replica]++
		}
		return by
	}
	// fullAfter reports whether a tick after from ran on every replica.
	fullAfter := func(from time.Time) bool {
		for tick, reps := range runs() {
			if tick.After(from) && len(reps) == len(ids) {
				return true
			}
		}
		return false
	}
	testkit.Eventually(t, 30*time.Second, "a tick run on all three replicas", func() bool { return fullAfter(time.Time{}) })

	// r2 dies in the middle of a run, and comes back with the same id.
	hang := filepath.Join(dir, "hang")
	if err := os.WriteFile(hang, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	hung := waitRecord(t, 20*time.Second, path, "r2 hanging in a run", func(r record) bool { return r.word == "hang" })
	byName(ps, "r2").signal(t, syscall.SIGKILL)
	byName(ps, "r2").awaitExit(t, 10*time.Second)
	if err := os.Remove(hang); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	ps[1] = startReplica(t, dir, cfg, "r2")
	testkit.Eventually(t, 60*time.Second, "a tick after the restart run on all three replicas", func() bool {
		return fullAfter(restarted.Add(time.Second))
	})

	out := mustCLI(t, 0, dir, "jobs", "-config", cfg).stdout
	if !strings.Contains(out, "Last outcome per replica") || !strings.Contains(out, "per replica, below") {
		t.Errorf("scheduler jobs lists no outcome per replica:\n%s", out)
	}
	for _, id := range ids {
		if !strings.Contains(out, "cache  "+id+" ") {
			t.Errorf("scheduler jobs does not list replica %s:\n%s", id, out)
		}
	}
	var hist []struct {
		Tick    time.Time `json:"tick"`
		Replica string    `json:"replica"`
		Outcome string    `json:"outcome"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, 0, dir, "history", "cache", "-json", "-config", cfg).stdout), &hist); err != nil {
		t.Fatal(err)
	}
	interrupted := false
	for _, h := range hist {
		if h.Tick.Equal(hung.tick) && h.Replica == "r2" {
			interrupted = h.Outcome == "interrupted"
		}
	}
	if !interrupted {
		t.Errorf("the tick r2 died in, %s, is not in the history as interrupted on r2: %+v", hung.tick.Format(time.RFC3339), hist)
	}

	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		p.awaitExit(t, 15*time.Second)
	}
	for tick, by := range runs() {
		for id, n := range by {
			if n > 1 {
				t.Errorf("tick %s ran %d times on %s", tick.Format(time.RFC3339), n, id)
			}
		}
	}
	if runs()[hung.tick]["r2"] != 0 {
		t.Errorf("r2 ran the tick it died in, %s, again after its restart", hung.tick.Format(time.RFC3339))
	}
	for _, r := range parseRecords(t, fileLines(t, path)) {
		if r.attempt != 1 {
			t.Errorf("%s %s on %s: attempt %d, want 1 (a run on every replica is never taken over)", r.word, r.tick.Format(time.RFC3339), r.replica, r.attempt)
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
		{"held per replica, triggered on every replica", `/per replica/.test(` + row("cache") + `.querySelector('td.holder').innerText) && /every replica/.test(` + row("cache") + `.querySelector('button[data-action="trigger"]').title)`},
		{"r2's line in words, marked ✗", `/r2: failed/.test(` + li("r2", "failed") + `.innerText) && ` + li("r2", "failed") + `.querySelector('.cell').textContent === '✗'`},
	} {
		if !eval[bool](t, ctx, "!!("+c.js+")") {
			t.Errorf("jobs page: %s: not so; the page says:\n%s", c.what, mainText(ctx))
		}
	}
}
