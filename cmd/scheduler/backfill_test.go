package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/creack/pty"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/scheduler"
)

// backfillScript is the job of the backfill tests: a line per run, with
// LOCKCRON_BACKFILL last, written as it starts; the run lasts 200 ms
// more, so that a kill that follows a line lands on its run.
const backfillScript = `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT b$LOCKCRON_BACKFILL" >> runs.log; sleep 0.2`

// pastTicks are the 50 latest past ticks of an @every 1h job.
func pastTicks() []time.Time {
	last := time.Now().UTC().Truncate(time.Hour)
	var ticks []time.Time
	for i := 49; i >= 0; i-- {
		ticks = append(ticks, last.Add(-time.Duration(i)*time.Hour))
	}
	return ticks
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// backfillRuns are the backfill runs in dir's runs.log, by tick.
func backfillRuns(t *testing.T, dir string) map[time.Time][]record {
	t.Helper()
	out := make(map[time.Time][]record)
	for _, r := range parseRecords(t, fileLines(t, filepath.Join(dir, "runs.log"))) {
		if len(r.rest) == 1 && r.rest[0] == "b1" {
			out[r.tick] = append(out[r.tick], r)
		}
	}
	return out
}

func countRuns(m map[time.Time][]record) int {
	n := 0
	for _, rs := range m {
		n += len(rs)
	}
	return n
}

// apiBackfills reads GET /api/backfills.
func apiBackfills(t *testing.T, base string) []scheduler.Backfill {
	t.Helper()
	st, b, _ := httpDo(t, "GET", base+"/api/backfills", "")
	var bs []scheduler.Backfill
	if st != 200 || json.Unmarshal(b, &bs) != nil {
		t.Fatalf("GET /api/backfills: %d %s", st, b)
	}
	return bs
}

// awaitBackfillState waits until the backfill id has state, as base's API
// says.
func awaitBackfillState(t *testing.T, base, id, state string, within time.Duration) scheduler.Backfill {
	t.Helper()
	var got scheduler.Backfill
	testkit.Eventually(t, within, "backfill "+id+" "+state, func() bool {
		for _, b := range apiBackfills(t, base) {
			if b.ID == id {
				got = b
				return b.State == state
			}
		}
		return false
	})
	return got
}

// progressRE is a progress line of the backfill command.
var progressRE = regexp.MustCompile(`^backfill (bf-[0-9a-f]{8}) of report: (\d+)/(\d+) ticks \(\d+%\), (about \d+[hms0-9]* left|finished|cancelled)$`)

// A backfill of 50 ticks at 20/s with -only-missing, after 10 of them
// ran, runs exactly the 40 others, once each, though the replica that
// carries it is SIGKILLed on the way; a cancelled one starts no tick
// after; -dry-run lists and runs nothing.
func TestBackfillFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	const lease = 8 * time.Second
	text := strings.Replace(header(srv.Addr(), "5s"), "redis {", "lock {\n  lease = \""+lease.String()+"\"\n}\nredis {", 1)
	cfg := writeConfig(t, dir, text+execJob("report", "@every 1h", "1s", backfillScript))
	ps := startFleet(t, dir, cfg, 3)
	waitSubscribed(t, srv, 3)
	ticks := pastTicks()

	// Ten ticks run first, followed to their end by the command.
	r := mustCLI(t, 0, dir, "backfill", "report", "-from", rfc(ticks[10]), "-to", rfc(ticks[19]), "-rate", "50/s", "-config", cfg)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) < 3 || !regexp.MustCompile(`^bf-[0-9a-f]{8}$`).MatchString(lines[0]) {
		t.Fatalf("backfill printed %q", r.stdout)
	}
	for _, l := range lines[1:] {
		if m := progressRE.FindStringSubmatch(l); m == nil || m[1] != lines[0] || m[3] != "10" {
			t.Errorf("progress line %q is not of the form %v", l, progressRE)
		}
	}
	if last := lines[len(lines)-1]; !strings.HasSuffix(last, ": 10/10 ticks (100%), finished") {
		t.Errorf("last progress line %q, want 10/10 finished", last)
	}
	if n := countRuns(backfillRuns(t, dir)); n != 10 {
		t.Fatalf("%d runs after the first backfill, want 10", n)
	}

	// The dry run lists the 40 missing ticks and runs nothing.
	r = mustCLI(t, 0, dir, "backfill", "report", "-from", rfc(ticks[0]), "-to", rfc(ticks[49]), "-only-missing", "-dry-run", "-config", cfg)
	var want []string
	for i, tk := range ticks {
		if i < 10 || i > 19 {
			want = append(want, rfc(tk))
		}
	}
	if got := strings.TrimSpace(r.stdout); got != strings.Join(want, "\n") {
		t.Errorf("dry run listed:\n%s\nwant the 40 missing ticks:\n%s", got, strings.Join(want, "\n"))
	}
	base := "http://" + ps[0].admin
	if bs := apiBackfills(t, base); len(bs) != 1 {
		t.Errorf("backfills after the dry run: %+v, want the first only", bs)
	}

	// The only-missing backfill, through the API; its carrier is killed
	// once it has run a tick.
	st, body, _ := httpBody(t, "POST", base+"/api/jobs/report/backfill", "",
		fmt.Sprintf(`{"from": %q, "to": %q, "only_missing": true, "rate": "20/s"}`, rfc(ticks[0]), rfc(ticks[49])))
	var b scheduler.Backfill
	if st != 200 || json.Unmarshal(body, &b) != nil || b.Total != 50 {
		t.Fatalf("POST backfill: %d %s", st, body)
	}
	var first record
	testkit.Eventually(t, 30*time.Second, "a tick of the only-missing backfill", func() bool {
		for tk, rs := range backfillRuns(t, dir) {
			if tk.Before(ticks[10]) || tk.After(ticks[19]) {
				first = rs[0]
				return true
			}
		}
		return false
	})
	victim := byName(ps, first.replica)
	victim.signal(t, syscall.SIGKILL)
	victim.awaitExit(t, 5*time.Second)
	var live *proc
	for _, p := range ps {
		if p != victim {
			live = p
		}
	}
	base = "http://" + live.admin
	killed := time.Now()
	end := awaitBackfillState(t, base, b.ID, "finished", lease+60*time.Second)
	t.Logf("SIGKILL of %s, which carried %s; finished by the others %v later", victim.name, b.ID, time.Since(killed).Round(time.Millisecond))
	if end.Done != 50 {
		t.Errorf("backfill at its end: %+v, want 50 of 50 done", end)
	}
	if rs := backfillRuns(t, dir)[first.tick]; len(rs) != 2 {
		t.Logf("the kill did not land on the run of tick %s (%d runs of it): the poll came late", rfc(first.tick), len(rs))
	}
	runs := backfillRuns(t, dir)
	twice := 0
	for i, tk := range ticks {
		switch rs := runs[tk]; {
		case len(rs) == 1:
		case len(rs) == 2 && rs[0].replica == victim.name && rs[1].attempt == 2 && twice == 0:
			// The tick the kill cut short (it wrote its line, and died
			// before its finish): run again once, as a scheduled tick is.
			twice++
			t.Logf("tick %s, cut short by the kill, run again by %s", rfc(tk), rs[1].replica)
		default:
			t.Errorf("tick %d (%s) ran %d times: %+v", i, rfc(tk), len(rs), rs)
		}
	}
	hist := mustCLI(t, 0, dir, "history", "report", "-json", "-limit", "1000", "-config", cfg)
	var hs []scheduler.Run
	if err := json.Unmarshal([]byte(hist.stdout), &hs); err != nil {
		t.Fatal(err)
	}
	inHist := make(map[time.Time]int)
	for _, h := range hs {
		if h.Backfill == b.ID && h.Outcome == scheduler.OutcomeRan {
			inHist[h.Tick.UTC()]++
		}
	}
	if len(inHist) != 40 {
		t.Errorf("the history has %d ticks of %s, want the 40 missing", len(inHist), b.ID)
	}
	for tk, n := range inHist {
		if n != 1 {
			t.Errorf("the history has tick %s of %s %d times", rfc(tk), b.ID, n)
		}
	}

	// A backfill followed by the command, cancelled from another.
	before := countRuns(backfillRuns(t, dir))
	follower := startProc(t, "backfill-cli", dir, baseEnv(), schedBin, "backfill", "report", "-from", rfc(ticks[0]), "-to", rfc(ticks[49]),
		"-rate", "5/s", "-config", cfg)
	testkit.Eventually(t, 30*time.Second, "three ticks of the backfill to cancel", func() bool {
		return countRuns(backfillRuns(t, dir)) >= before+3
	})
	id := strings.SplitN(follower.out.String(), "\n", 2)[0]
	// Another backfill over its ticks is refused, naming it.
	r = cli(t, dir, "backfill", "report", "-from", rfc(ticks[40]), "-to", rfc(ticks[49]), "-config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "overlaps that of backfill "+id+", running") {
		t.Errorf("an overlapping backfill: exit %d: %s", r.code, r.stderr)
	}
	st, body, _ = httpBody(t, "POST", base+"/api/jobs/report/backfill", "", fmt.Sprintf(`{"from": %q, "to": %q}`, rfc(ticks[0]), rfc(ticks[1])))
	if st != 409 || !strings.Contains(string(body), id) {
		t.Errorf("POST of an overlapping backfill: %d %s; want 409 naming %s", st, body, id)
	}
	carrierLock := "*:{report!backfill:" + id + "}"
	if keys, err := srv.Client().Keys(context.Background(), carrierLock).Result(); err != nil || len(keys) != 1 {
		t.Fatalf("carrier lock %s of the running backfill: %v, %v", carrierLock, keys, err)
	}
	r = mustCLI(t, 0, dir, "backfill", "-cancel", id, "-config", cfg)
	if got := strings.TrimSpace(r.stdout); got != id+": cancelled" {
		t.Errorf("backfill -cancel printed %q", got)
	}
	atCancel := countRuns(backfillRuns(t, dir))
	if code := follower.awaitExit(t, 10*time.Second); code != 0 {
		t.Errorf("the following command exited %d", code)
	}
	if out := follower.out.String(); !strings.Contains(out, ", cancelled\n") {
		t.Errorf("the following command printed %q, want its end as cancelled", out)
	}
	// Once its carrier has ended (its carrier lock is gone), nothing of it
	// can start: at most the run claimed before the cancel did.
	testkit.Eventually(t, 30*time.Second, "the cancelled backfill's carrier to end", func() bool {
		keys, err := srv.Client().Keys(context.Background(), carrierLock).Result()
		return err == nil && len(keys) == 0
	})
	if n := countRuns(backfillRuns(t, dir)); n > atCancel+1 {
		t.Errorf("%d runs started after the cancel, at most the one claimed then may", n-atCancel)
	}
	r = cli(t, dir, "backfill", "-cancel", id, "-config", cfg)
	if r.code != 0 {
		t.Errorf("a second cancel: exit %d: %s", r.code, r.stderr)
	}
	r = cli(t, dir, "backfill", "-cancel", b.ID, "-config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "has finished") {
		t.Errorf("cancel of a finished backfill: exit %d: %s", r.code, r.stderr)
	}
}

// Bad backfills are refused with a clear error, at the command and the
// API, and nothing is recorded.
func TestBackfillRefusesBadInput(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("report", "@every 1h", "1s", backfillScript)+
		execJob("fast", "@every 1s", "1s", "true"))
	p := startReplica(t, dir, cfg, "r1")
	base := "http://" + p.admin
	now := time.Now().UTC()
	from, to := rfc(now.Add(-5*time.Hour)), rfc(now.Add(-time.Hour))
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		says   string
		body   string
		status int
	}{
		{"from after to", []string{"report", "-from", to, "-to", from}, 1, "is after to",
			fmt.Sprintf(`{"from": %q, "to": %q}`, to, from), 400},
		{"unparsable from", []string{"report", "-from", "yesterday", "-to", to}, 2, `"yesterday" is not a time`,
			fmt.Sprintf(`{"from": "yesterday", "to": %q}`, to), 400},
		{"unparsable to", []string{"report", "-from", from, "-to", "12/01/2026"}, 2, `"12/01/2026" is not a time`,
			fmt.Sprintf(`{"from": %q, "to": "12/01/2026"}`, from), 400},
		{"over 100,000 ticks", []string{"fast", "-from", rfc(now.Add(-48 * time.Hour)), "-to", to}, 1, "more than 100000 ticks",
			fmt.Sprintf(`{"from": %q, "to": %q}`, rfc(now.Add(-48*time.Hour)), to), 400},
		{"bad rate", []string{"report", "-from", from, "-to", to, "-rate", "fast"}, 2, `rate: "fast" is not a rate`,
			fmt.Sprintf(`{"from": %q, "to": %q, "rate": "fast"}`, from, to), 400},
		{"rate below one a day", []string{"report", "-from", from, "-to", to, "-rate", "0.01/h"}, 2, `rate: "0.01/h" is not a rate`,
			fmt.Sprintf(`{"from": %q, "to": %q, "rate": "0.01/h"}`, from, to), 400},
		{"to in the future", []string{"report", "-from", from, "-to", rfc(now.Add(time.Hour))}, 1, "is in the future",
			fmt.Sprintf(`{"from": %q, "to": %q}`, from, rfc(now.Add(time.Hour))), 400},
		{"over the forced ceiling", []string{"fast", "-from", rfc(now.Add(-30 * 24 * time.Hour)), "-to", to, "-force"}, 1, "the most a forced backfill may hold",
			fmt.Sprintf(`{"from": %q, "to": %q, "force": true}`, rfc(now.Add(-30*24*time.Hour)), to), 400},
		{"unknown job", []string{"reprot", "-from", from, "-to", to}, 1, `unknown job "reprot"`,
			fmt.Sprintf(`{"from": %q, "to": %q}`, from, to), 404},
	} {
		r := cli(t, dir, append(append([]string{"backfill"}, c.args...), "-config", cfg)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.says) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d saying %q", c.name, r.code, r.stderr, c.code, c.says)
		}
		job := c.args[0]
		st, body, _ := httpBody(t, "POST", base+"/api/jobs/"+job+"/backfill", "", c.body)
		if st != c.status || !strings.Contains(string(body), strings.ReplaceAll(c.says, `"`, `\"`)) {
			t.Errorf("%s: POST: %d %s; want %d saying %q", c.name, st, body, c.status, c.says)
		}
	}
	// A forced dry run lists the first ticks and counts them all.
	r := mustCLI(t, 0, dir, "backfill", "fast", "-from", rfc(now.Add(-48*time.Hour)), "-to", to, "-force", "-dry-run", "-config", cfg)
	if n := strings.Count(r.stdout, "\n"); n != scheduler.MaxBackfillListed || !regexp.MustCompile(`: [0-9]{6} ticks, the first 10000 listed;`).MatchString(r.stderr) {
		t.Errorf("forced dry run: %d lines, stderr %q", n, r.stderr)
	}
	st, body, _ := httpBody(t, "POST", base+"/api/jobs/fast/backfill", "", fmt.Sprintf(`{"from": %q, "to": %q, "force": true, "dry_run": true}`, rfc(now.Add(-48*time.Hour)), to))
	var dry daemon.BackfillDryRunJSON
	if st != 200 || json.Unmarshal(body, &dry) != nil || len(dry.Ticks) != scheduler.MaxBackfillListed || dry.Total < 100_000 {
		t.Errorf("forced dry run through the API: %d, %d ticks of %d", st, len(dry.Ticks), dry.Total)
	}
	// A forced backfill is made.
	st, body, _ = httpBody(t, "POST", base+"/api/jobs/fast/backfill", "", fmt.Sprintf(`{"from": %q, "to": %q, "force": true, "rate": "1/h"}`, rfc(now.Add(-48*time.Hour)), to))
	var forced scheduler.Backfill
	if st != 200 || json.Unmarshal(body, &forced) != nil || forced.Total < 100_000 {
		t.Fatalf("forced backfill: %d %s", st, body)
	}
	if st, body, _ := httpDo(t, "DELETE", base+"/api/backfills/"+forced.ID, ""); st != 200 {
		t.Errorf("DELETE of the forced backfill: %d %s", st, body)
	}
	if bs := apiBackfills(t, base); len(bs) != 1 || bs[0].ID != forced.ID {
		t.Errorf("backfills recorded: %+v, want the forced one alone", bs)
	}
	if st, body, _ := httpDo(t, "DELETE", base+"/api/backfills/bf-00000000", ""); st != 404 {
		t.Errorf("DELETE of an unknown backfill: %d %s", st, body)
	}
	r = cli(t, dir, "backfill", "-cancel", "bf-00000000", "-config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, "no such backfill") {
		t.Errorf("cancel of an unknown backfill: exit %d: %s", r.code, r.stderr)
	}
	if lines := fileLines(t, filepath.Join(dir, "runs.log")); len(lines) != 0 {
		t.Errorf("runs: %q", lines)
	}
}

// ptyOut collects what a process writes to its pty.
type ptyOut struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *ptyOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *ptyOut) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// On a terminal the progress line is rewritten in place (\r), and Ctrl-C
// asks whether to cancel the backfill: yes cancels it.
func TestBackfillProgressOnTerminal(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("report", "@every 1h", "1s", backfillScript))
	p := startReplica(t, dir, cfg, "r1")
	ticks := pastTicks()
	cmd := exec.Command(schedBin, "backfill", "report", "-from", rfc(ticks[0]), "-to", rfc(ticks[49]), "-rate", "4/s", "-config", cfg)
	cmd.Dir, cmd.Env = dir, baseEnv("TERM=dumb")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	out := &ptyOut{}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, tty) // until the pty closes (EIO once the command exits)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = tty.Close()
		<-copied
	})
	testkit.Eventually(t, 30*time.Second, "three progress updates in place", func() bool {
		return strings.Count(out.String(), "\r") >= 3 && strings.Contains(out.String(), "/50 ticks")
	})
	// The id on a line of its own (\r\n: the terminal's), then each
	// update after a \r, clearing the rest of the line.
	updates := strings.Split(out.String(), "\r")
	line := regexp.MustCompile(`^backfill (bf-[0-9a-f]{8}) of report: \d+/50 ticks \(\d+%\), about \d+[hms0-9]* left\x1b\[K$`)
	if len(updates) < 4 || updates[1] != "\n" {
		t.Fatalf("the command printed %q, want its id on a line, then updates after \\r", out.String())
	}
	var id string
	for _, u := range updates[2 : len(updates)-1] { // the last may be cut short
		m := line.FindStringSubmatch(u)
		if m == nil || strings.Contains(u, "\n") {
			t.Fatalf("progress update %q is not of the form %v; all: %q", u, line, out.String())
		}
		id = m[1]
	}
	if !strings.HasPrefix(updates[0], id) {
		t.Errorf("the command printed %q first, want the id %s", updates[0], id)
	}
	if _, err := tty.Write([]byte{3}); err != nil { // Ctrl-C
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the question", func() bool {
		return strings.Contains(out.String(), "cancel backfill "+id+"? [y/N] ")
	})
	if _, err := tty.Write([]byte("y\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Errorf("the command: %v; it printed %q", err, out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("the command did not exit after the answer; it printed %q", out.String())
	}
	awaitBackfillState(t, "http://"+p.admin, id, "cancelled", 10*time.Second)
	testkit.Eventually(t, 10*time.Second, "the command's last words", func() bool {
		return strings.Contains(out.String(), "backfill "+id+" cancelled")
	})
}

// The job page shows a running backfill's progress, and its Cancel
// button cancels it.
func TestBrowserBackfillProgressAndCancel(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("report", "@every 1h", "1s", backfillScript))
	p := startReplica(t, dir, cfg, "r1")
	base := "http://" + p.admin
	ticks := pastTicks()
	st, body, _ := httpBody(t, "POST", base+"/api/jobs/report/backfill", "",
		fmt.Sprintf(`{"from": %q, "to": %q, "rate": "2/s"}`, rfc(ticks[0]), rfc(ticks[49])))
	var b scheduler.Backfill
	if st != 200 || json.Unmarshal(body, &b) != nil {
		t.Fatalf("POST backfill: %d %s", st, body)
	}
	ctx := newBrowser(t)
	open(t, ctx, base+"/jobs/report")
	item := fmt.Sprintf(`document.getElementById('backfill-%s')`, b.ID)
	waitJS(t, ctx, "the backfill's progress moves on the page", item+` && `+item+`.querySelector('progress').value >= 2 && `+
		item+`.querySelector('progress').max === 50 && /\d+\/50 ticks/.test(`+item+`.innerText)`)
	eval[bool](t, ctx, `(window.confirm = function () { return true; }, true)`)
	browse(t, ctx, "click Cancel", chromedp.Click(chromedp.CSS(`#backfill-`+b.ID+` button[data-action="cancel-backfill"]`)))
	waitJS(t, ctx, "the page says it is cancelled", msgHas("report: backfill cancelled"))
	got := awaitBackfillState(t, base, b.ID, "cancelled", 10*time.Second)
	if got.CancelledBy != "loopback" {
		t.Errorf("cancelled by %q, want loopback", got.CancelledBy)
	}
	waitJS(t, ctx, "the backfill leaves the page", `!`+item)
}
