package main_test

// Browser tests of the status page: headless Chromium (Debian's chromium
// package), driven with chromedp, against real `scheduler run` replicas
// and a real redis-server, as in e2e_test.go. Each test starts a browser
// of its own with a deadline; a missing Chromium fails the test.
//
// LOCKCRON_SCREENSHOT=docs/jobs.png (a path relative to this directory, or
// absolute) makes TestBrowserJobsTable wait for full outcome strips and
// save a screenshot of the jobs page there, for the README:
//
//	LOCKCRON_SCREENSHOT=$PWD/docs/jobs.png go test -run TestBrowserJobsTable ./cmd/scheduler
//
// With LOCKCRON_SCREENSHOT_ALL=1 it also saves the page at 375px width and
// in dark mode beside it (NAME-narrow.png, NAME-dark.png).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// chromiumPath is Debian's chromium.
const chromiumPath = "/usr/bin/chromium"

// browserTimeout bounds each test's browser: generous, for a loaded
// 2-core machine.
const browserTimeout = 3 * time.Minute

// pageWait bounds a wait for something to show on a page.
const pageWait = 45 * time.Second

// newBrowser starts a headless Chromium for t and returns the context of
// its first tab. The browser ends with the test (or at browserTimeout).
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("no chromium at %s (%v): install it (Debian/Ubuntu: apt-get install -y chromium)", chromiumPath, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath),
		chromedp.Headless,
		chromedp.NoSandbox, // root in CI
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := context.WithTimeout(context.Background(), browserTimeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
		cancel()
	})
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return bctx
}

// newTab opens another tab in the browser of ctx; it closes with the test.
func newTab(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	tctx, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(tctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return tctx
}

// browse does steps in the tab, or fails the test.
func browse(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// clickPause clicks the Pause button of job, answering the page's prompt
// for a note with note (window.prompt replaced for the click).
func clickPause(t *testing.T, ctx context.Context, what, job, note string) {
	t.Helper()
	q, _ := json.Marshal(note)
	eval[bool](t, ctx, `(window.prompt = function () { return `+string(q)+`; }, true)`)
	browse(t, ctx, what, chromedp.Click(button(job, "pause")))
}

// open loads url in the tab and waits for the page's live part.
func open(t *testing.T, ctx context.Context, url string) {
	t.Helper()
	browse(t, ctx, "open "+url, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("#live")))
}

// eval evaluates a JS expression in the tab's page.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// mainText is the text of the page's live part, for failure messages.
func mainText(ctx context.Context) string {
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('live') || document.body).innerText`))
	if err != nil {
		return "(page text unreadable: " + err.Error() + ")"
	}
	return s
}

// waitJS polls a JS boolean expression in the tab until it holds, or
// fails the test with the page's text.
func waitJS(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(pageWait)
	var last error
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+js+")"))
		if err == nil && ok {
			return
		}
		last = err
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("%s: not within %v (last error: %v); the page says:\n%s", what, pageWait, last, mainText(ctx))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// row is a JS expression for the jobs table's row of job.
func row(job string) string {
	return fmt.Sprintf(`document.querySelector('#jobs tr[data-job=%s]')`, strconv.Quote(job))
}

// button is the CSS selector of a job's button.
func button(job, action string) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(`#jobs tr[data-job=%s] button[data-action=%q]`, strconv.Quote(job), action))
}

// msgHas is a JS expression: the page's message holds every one of words.
func msgHas(words ...string) string {
	var conds []string
	for _, w := range words {
		conds = append(conds, fmt.Sprintf(`m.textContent.includes(%s)`, strconv.Quote(w)))
	}
	return `(() => { const m = document.getElementById('msg'); return !!m && !m.hidden && ` + strings.Join(conds, " && ") + `; })()`
}

// clearToken empties the token box (chromedp.Clear sets the attribute,
// which does not clear what was typed).
func clearToken(t *testing.T, ctx context.Context) {
	t.Helper()
	if !eval[bool](t, ctx, `(() => { const i = document.getElementById('token'); i.value = ''; return i.value === ''; })()`) {
		t.Fatalf("the token box is not cleared")
	}
}

// apiJob reads GET /api/jobs/{name}.
func apiJob(t *testing.T, base, name string) daemon.JobDetailJSON {
	t.Helper()
	return apiJobAs(t, base, name, "")
}

// apiJobAs reads GET /api/jobs/{name} with a token.
func apiJobAs(t *testing.T, base, name, token string) daemon.JobDetailJSON {
	t.Helper()
	st, b, _ := httpDo(t, "GET", base+"/api/jobs/"+name, token)
	var j daemon.JobDetailJSON
	if st != 200 || json.Unmarshal(b, &j) != nil {
		t.Fatalf("GET /api/jobs/%s: %d %s", name, st, b)
	}
	return j
}

// ---------------------------------------------------------------------
// (a) The jobs table after runs
// ---------------------------------------------------------------------

func TestBrowserJobsTable(t *testing.T) {
	t.Parallel()
	shot := os.Getenv("LOCKCRON_SCREENSHOT")
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("backup", "@every 1s", "1s", `sleep 0.05`)+
		// Fails one tick in three, with an error on stderr.
		execJob("flaky", "@every 1s", "1s", `[ $(( $(date +%s) % 3 )) -ne 0 ] || { echo "disk full: /var/spool/report" >&2; exit 1; }`)+
		execJob("report", "CRON_TZ=Europe/Berlin */2 * * * * *", "1s", `sleep 0.2`)+
		execJob("nightly", "0 30 2 * * *", "1s", `true`)+
		// Its first tick holds the lock for a minute; the next ones skip.
		execJob("archive", "@every 1s", "1s", `trap 'exit 143' TERM; sleep 60 & wait $!`))
	ps := startFleet(t, dir, cfg, 2)
	base := "http://" + ps[0].admin
	ctx := newBrowser(t)
	open(t, ctx, base+"/")

	cells := func(job, outcome string) string {
		return fmt.Sprintf(`%s.querySelectorAll('.strip .cell[data-outcome=%q]').length`, row(job), outcome)
	}
	// Runs show up by themselves: the page refreshes its table.
	waitJS(t, ctx, "backup: 3 runs in its strip", cells("backup", "ran")+` >= 3`)
	waitJS(t, ctx, "flaky: a failed run and a good one", cells("flaky", "failed")+` >= 1 && `+cells("flaky", "ran")+` >= 1`)
	waitJS(t, ctx, "report: a run", cells("report", "ran")+` >= 1`)

	for _, c := range []struct{ what, js string }{
		{"five rows, in config order", `Array.from(document.querySelectorAll('#jobs tbody tr')).map(r => r.dataset.job).join() === 'backup,flaky,report,nightly,archive'`},
		{"report's zone", row("report") + `.querySelector('td[data-label="Schedule"]').innerText.includes('Europe/Berlin')`},
		{"report's next ticks in its zone", `/CES?T/.test(` + row("report") + `.querySelector('.ticks').innerText)`},
		{"three next ticks", row("backup") + `.querySelectorAll('.ticks li').length === 3`},
		{"backup's last run: outcome, replica and duration", `/ran[\s\S]*on r[12] in \d/.test(` + row("backup") + `.querySelector('.last').innerText)`},
		{"nightly has not run", row("nightly") + `.querySelector('.last').innerText.includes('no run yet')`},
		{"not paused", row("backup") + `.dataset.paused === 'false' && ` + row("backup") + `.querySelector('td.state').innerText.includes('active')`},
		{"each cell has a mark and a title (readable without colour)", `Array.from(document.querySelectorAll('.strip .cell')).every(c => c.textContent.trim() !== '' && /(ran|failed|skipped: busy) on r[12]/.test(c.title))`},
		{"failed cells are marked ✗", `Array.from(document.querySelectorAll('.strip .cell[data-outcome="failed"]')).every(c => c.textContent === '✗')`},
		{"a strip's tally in words", `/\d+ ran, \d+ failed|\d+ failed, \d+ ran/.test(` + row("flaky") + `.querySelector('td.runs-cell').innerText)`},
		{"buttons", row("backup") + `.querySelector('button[data-action="trigger"]') && ` + row("backup") + `.querySelector('button[data-action="pause"]')`},
		{"no token input without admin.token", `document.getElementById('token') === null`},
		{"the replica serving the page", `document.getElementById('replica').textContent === 'r1'`},
		{"the config's digest and when it was loaded", `document.getElementById('config').dataset.digest === '` + fileSHA256(t, cfg) + `' && /loaded/.test(document.getElementById('config').innerText)`},
		{"each job's revision", `Array.from(document.querySelectorAll('#jobs tbody tr')).every(r => /^[0-9a-f]{16}$/.test(r.dataset.revision))`},
		{"no other version in the fleet", `document.querySelector('[data-other-digest]') === null`},
	} {
		if !eval[bool](t, ctx, "!!("+c.js+")") {
			t.Errorf("jobs page: %s: not so; the page says:\n%s", c.what, mainText(ctx))
		}
	}

	// archive's ticks skipped while its first run holds the lock are one
	// cell of its strip, which says how many, and why.
	busy := row("archive") + `.querySelectorAll('.strip .cell[data-outcome="skipped_busy"]')`
	waitJS(t, ctx, "archive's skipped ticks in one cell", busy+`.length === 1 && /^\d+ ticks, [\s\S]*skipped: busy on r[12]: lock held by r[12] \(run of /.test(`+busy+`[0].title)`)

	// archive holds its lock: its row says who and since when, and the
	// locks page lists it.
	waitJS(t, ctx, "archive held", row("archive")+`.dataset.held === 'true' && /r[12][\s\S]*since \d\d:\d\d:\d\d/.test(`+row("archive")+`.querySelector('td.holder').innerText)`)
	// The error tail of a failed run is on the job's page.
	open(t, ctx, base+"/jobs/flaky")
	waitJS(t, ctx, "flaky's history shows the error tail", `Array.from(document.querySelectorAll('#runs tr[data-outcome="failed"] pre.err')).some(p => p.textContent.includes('disk full: /var/spool/report'))`)

	open(t, ctx, base+"/locks")
	waitJS(t, ctx, "the locks page lists archive held", `/r[12]:/.test(document.querySelector('#locks tr[data-lock="archive"]').innerText)`)

	// At 375px the jobs table collapses into cards: nothing scrolls
	// sideways.
	browse(t, ctx, "375px wide", chromedp.EmulateViewport(375, 800, chromedp.EmulateScale(1)))
	open(t, ctx, base+"/")
	waitJS(t, ctx, "the table at 375px", cells("backup", "ran")+` >= 1`)
	if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 375 {
		t.Errorf("at 375px the page is %dpx wide: it scrolls sideways", w)
	}
	if !eval[bool](t, ctx, `getComputedStyle(document.querySelector('#jobs thead')).display === 'none'`) {
		t.Errorf("at 375px the jobs table keeps its header row: it does not collapse")
	}
	if shot != "" && os.Getenv("LOCKCRON_SCREENSHOT_ALL") != "" {
		screenshot(t, ctx, strings.TrimSuffix(shot, ".png")+"-narrow.png")
	}
	browse(t, ctx, "back to 1280px", chromedp.ResetViewport())

	if shot == "" {
		return
	}
	// The screenshot: full strips, one job paused, a run under way.
	waitJS(t, ctx, "full strips", cells("backup", "ran")+` >= 20 && `+row("report")+`.querySelectorAll('.strip .cell').length >= 8`)
	if st, b, _ := httpDo(t, "POST", base+"/api/jobs/nightly/pause", ""); st != 200 {
		t.Fatalf("pause nightly: %d %s", st, b)
	}
	browse(t, ctx, "1280px", chromedp.EmulateViewport(1280, 640, chromedp.EmulateScale(1)))
	open(t, ctx, base+"/")
	waitJS(t, ctx, "nightly paused", row("nightly")+`.dataset.paused === 'true'`)
	screenshot(t, ctx, shot)
	if os.Getenv("LOCKCRON_SCREENSHOT_ALL") != "" {
		if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}},
		}); err != nil {
			t.Fatalf("dark mode: %v", err)
		}
		screenshot(t, ctx, strings.TrimSuffix(shot, ".png")+"-dark.png")
		open(t, ctx, base+"/jobs/flaky")
		screenshot(t, ctx, strings.TrimSuffix(shot, ".png")+"-history-dark.png")
	}
}

// screenshot saves the tab's whole page as a PNG at path.
func screenshot(t *testing.T, ctx context.Context, path string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

// ---------------------------------------------------------------------
// (b) Trigger, then the run in the job's history
// ---------------------------------------------------------------------

func TestBrowserTriggerShowsInHistory(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("once", "@yearly", "1s", `echo "run $LOCKCRON_TICK $LOCKCRON_REPLICA $LOCKCRON_ATTEMPT" >> once.log`)+
		execJob("tick", "@every 1s", "1s", `true`))
	ps := startFleet(t, dir, cfg, 2)
	waitSubscribed(t, srv, 2)
	base := "http://" + ps[0].admin
	ctx := newBrowser(t)
	open(t, ctx, base+"/")
	if !eval[bool](t, ctx, row("once")+`.querySelector('.last').innerText.includes('no run yet')`) {
		t.Errorf("once ran before the trigger:\n%s", mainText(ctx))
	}

	browse(t, ctx, "click Trigger", chromedp.Click(button("once", "trigger")))
	waitJS(t, ctx, "the page says once was triggered", msgHas("once: triggered", "heard it"))
	rec := waitRecord(t, 20*time.Second, filepath.Join(dir, "once.log"), "the triggered run of once", func(record) bool { return true })

	open(t, ctx, base+"/jobs/once")
	manual := `document.querySelector('#runs tr[data-trigger="1"]')`
	waitJS(t, ctx, "the manual run in once's history", manual+` && `+manual+`.dataset.outcome === 'ran'`)
	text := eval[string](t, ctx, manual+`.innerText`)
	for _, want := range []string{"manual #1", rec.replica, "ran"} {
		if !strings.Contains(text, want) {
			t.Errorf("once's history row %q does not show %q", text, want)
		}
	}
	// The job's row above the history counts it too.
	waitJS(t, ctx, "once's last run in its row", row("once")+`.querySelector('.last').innerText.includes('ran')`)

	// Paging: two runs a page, and the older link goes back in time.
	testkit.Eventually(t, 30*time.Second, "tick ran 4 times", func() bool { return len(apiJob(t, base, "tick").Runs) >= 4 })
	open(t, ctx, base+"/jobs/tick?limit=2")
	first := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#runs tbody tr')).map(r => r.querySelector('time').getAttribute('datetime'))`)
	if len(first) != 2 {
		t.Fatalf("tick's history with limit=2 shows %d runs", len(first))
	}
	browse(t, ctx, "click Older", chromedp.Click(chromedp.CSS("#older")), chromedp.WaitReady(chromedp.CSS("#runs")))
	waitJS(t, ctx, "the older page", `location.search.includes('before=')`)
	older := eval[[]string](t, ctx, `Array.from(document.querySelectorAll('#runs tbody tr')).map(r => r.querySelector('time').getAttribute('datetime'))`)
	if len(older) == 0 || older[0] >= first[1] {
		t.Errorf("older page %v does not come after %v", older, first)
	}
}

// ---------------------------------------------------------------------
// (c) Pause on one replica's page shows on both
// ---------------------------------------------------------------------

func TestBrowserPauseShowsOnBothReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("tick", "@every 1s", "1s", `true`))
	ps := startFleet(t, dir, cfg, 2)
	tab1 := newBrowser(t)
	tab2 := newTab(t, tab1)
	open(t, tab1, "http://"+ps[0].admin+"/")
	open(t, tab2, "http://"+ps[1].admin+"/")
	for i, tab := range []context.Context{tab1, tab2} {
		waitJS(t, tab, fmt.Sprintf("r%d's page: tick active", i+1), row("tick")+` && `+row("tick")+`.dataset.paused === 'false'`)
	}

	clickPause(t, tab1, "click Pause on r1's page", "tick", "nightly import broken, see INC-42")
	waitJS(t, tab1, "r1's page says tick is paused", msgHas("tick: paused on every replica"))
	paused := row("tick") + `.dataset.paused === 'true' && ` + row("tick") + `.querySelector('td.state').innerText.includes('paused') && !!` + row("tick") + `.querySelector('button[data-action="resume"]')`
	// r2's page was not reloaded: it refreshes itself.
	waitJS(t, tab1, "r1's page shows tick paused", paused)
	waitJS(t, tab2, "r2's page shows tick paused", paused)
	waitJS(t, tab2, "r2's page shows who paused tick and why", row("tick")+`.querySelector('.pause-note').textContent === 'nightly import broken, see INC-42' && `+
		row("tick")+`.querySelector('.pause-info').dataset.pauseBy === 'loopback'`)

	browse(t, tab2, "click Resume on r2's page", chromedp.Click(button("tick", "resume")))
	waitJS(t, tab2, "r2's page says tick is resumed", msgHas("tick: resumed on every replica"))
	active := row("tick") + `.dataset.paused === 'false' && !!` + row("tick") + `.querySelector('button[data-action="pause"]')`
	waitJS(t, tab1, "r1's page shows tick active again", active)
	waitJS(t, tab2, "r2's page shows tick active again", active)
}

// ---------------------------------------------------------------------
// (c2) A run past alert_after: a badge on every replica's page
// ---------------------------------------------------------------------

// Two replicas, a job with alert_after = "2s" whose first run goes on
// until the test lets it end: both replicas' pages (which refresh
// themselves) show the job's row with a "running long" badge, whichever
// replica runs it; when the run ends, the badge goes.
func TestBrowserRunningLongBadge(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("slow", "@every 3s", "1s", `if [ ! -e started ]; then touch started; while [ ! -e release ]; do sleep 0.1; done; fi`,
			`alert_after = "2s"`)+
		execJob("quick", "@every 1s", "1s", `true`))
	ps := startFleet(t, dir, cfg, 2)
	tab1 := newBrowser(t)
	tab2 := newTab(t, tab1)
	open(t, tab1, "http://"+ps[0].admin+"/")
	open(t, tab2, "http://"+ps[1].admin+"/")
	badge := func(job string) string {
		return row(job) + ` && ` + row(job) + `.querySelector('td.state .badge.long')`
	}
	long := badge("slow") + ` && ` + badge("slow") + `.innerText === 'running long' && ` + badge("slow") + `.dataset.runningLong !== ''`
	waitJS(t, tab1, "r1's page: slow running long", long)
	waitJS(t, tab2, "r2's page: slow running long", long)
	for i, tab := range []context.Context{tab1, tab2} {
		if eval[bool](t, tab, "!!("+badge("quick")+")") {
			t.Errorf("r%d's page: quick, whose runs end at once, has the badge:\n%s", i+1, mainText(tab))
		}
	}

	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	gone := row("slow") + ` && !` + row("slow") + `.querySelector('td.state .badge.long')`
	waitJS(t, tab1, "r1's page: the badge gone", gone)
	waitJS(t, tab2, "r2's page: the badge gone", gone)
}

// ---------------------------------------------------------------------
// (d) With admin.token: the page asks for it; a wrong one is refused
// ---------------------------------------------------------------------

func TestBrowserToken(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	const token = "s3cret-browser-token"
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("tick", "@every 1s", "1s", `true`))
	// The token comes from the environment, as LOCKCRON_ADMIN__TOKEN.
	p := startProc(t, "r1", dir, baseEnv("LOCKCRON_REPLICA_ID=r1", "LOCKCRON_ADMIN__TOKEN="+token), schedBin, "run", "-config", cfg)
	p.waitReady(t)
	base := "http://" + p.admin
	ctx := newBrowser(t)
	open(t, ctx, base+"/")

	// No token: the page is locked, shows no job, and asks for one.
	waitJS(t, ctx, "the locked page with the token box", `!!document.getElementById('locked') && !!document.getElementById('token')`)
	if eval[bool](t, ctx, `!!`+row("tick")) {
		t.Errorf("the page without a token shows the jobs")
	}

	// A wrong token: refused, and the page stays locked.
	browse(t, ctx, "type a wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "not-the-token"), chromedp.Click(chromedp.CSS("#token-use")))
	waitJS(t, ctx, "the page says the token is wrong", msgHas("Wrong token")+` && document.getElementById('locked-why').textContent.includes('wrong token')`)

	// The right one shows the jobs, and works the buttons.
	clearToken(t, ctx)
	browse(t, ctx, "type the token", chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#token-use")))
	waitJS(t, ctx, "the jobs, once the token is given", `!document.getElementById('locked') && !!`+row("tick"))
	clickPause(t, ctx, "click Pause with the token", "tick", "test")
	waitJS(t, ctx, "the page says tick is paused", msgHas("tick: paused on every replica"))
	waitJS(t, ctx, "the page shows tick paused", row("tick")+`.dataset.paused === 'true'`)
	if !apiJobAs(t, base, "tick", token).Paused {
		t.Errorf("the API does not show tick paused")
	}

	// Kept for the session: a page loaded again shows the jobs at once.
	open(t, ctx, base+"/")
	waitJS(t, ctx, "the jobs after a reload, without asking again", `!document.getElementById('locked') && !!`+row("tick"))
	if v := eval[string](t, ctx, `document.getElementById('token').value`); v != token {
		t.Errorf("after a reload the token input holds %q, want the token kept in sessionStorage", v)
	}
	if html := eval[string](t, ctx, `document.documentElement.outerHTML`); strings.Contains(html, token) {
		t.Errorf("the page's HTML shows the token")
	}
}

// ---------------------------------------------------------------------
// (e) Scoped tokens: a read token shows the pages, asked for once; the
// buttons it may not use are refused with the API's reason
// ---------------------------------------------------------------------

func TestBrowserReadToken(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := tokenConfig(t, dir, srv.Addr())
	p := startProc(t, "r1", dir, baseEnv(append([]string{"LOCKCRON_REPLICA_ID=r1"}, tokenEnv...)...), schedBin, "run", "-config", cfg)
	p.waitReady(t)
	base := "http://" + p.admin
	ctx := newBrowser(t)

	// Asked once: the token, entered on the first page (Enter submits)...
	open(t, ctx, base+"/")
	waitJS(t, ctx, "the locked page", `!!document.getElementById('locked') && document.activeElement === document.getElementById('token')`)
	browse(t, ctx, "enter the read token", chromedp.SendKeys(chromedp.CSS("#token"), readTok+"\r"))
	waitJS(t, ctx, "the jobs, once the read token is given", `!document.getElementById('locked') && !!`+row("tick")+` && document.getElementById('replica').textContent === 'r1'`)
	if v := eval[string](t, ctx, `sessionStorage.getItem('lockcron-admin-token')`); v != readTok {
		t.Errorf("sessionStorage holds %q, want the read token", v)
	}
	// ... serves the other pages of the session without asking again.
	open(t, ctx, base+"/jobs/tick")
	waitJS(t, ctx, "the job page, without asking again", `!document.getElementById('locked') && !!document.getElementById('runs')`)
	open(t, ctx, base+"/locks")
	waitJS(t, ctx, "the locks page, without asking again", `!document.getElementById('locked') && !!document.querySelector('main h1')`)
	open(t, ctx, base+"/")
	waitJS(t, ctx, "the jobs page again", `!document.getElementById('locked') && !!`+row("tick"))

	// A read token may not trigger or pause: refused, with the 403's message.
	browse(t, ctx, "click Trigger with a read token", chromedp.Click(button("tick", "trigger")))
	waitJS(t, ctx, "the page shows the refusal of trigger", msgHas("Refused: tick was not triggered", `token "viewer" has scope read: trigger needs a token of scope operate or admin`))
	clickPause(t, ctx, "click Pause with a read token", "tick", "test")
	waitJS(t, ctx, "the page shows the refusal of pause", msgHas("Refused: tick was not paused", "pause needs a token of scope operate or admin"))
	j := apiJobAs(t, base, "tick", readTok)
	if j.Paused || j.Fleet.Triggers != 0 {
		t.Errorf("a read token's clicks changed the job: paused %v, triggers %d", j.Paused, j.Fleet.Triggers)
	}

	// An operate token in the box works them.
	clearToken(t, ctx)
	browse(t, ctx, "type the operate token", chromedp.SendKeys(chromedp.CSS("#token"), operateTok))
	clickPause(t, ctx, "click Pause with an operate token", "tick", "test")
	waitJS(t, ctx, "the page says tick is paused", msgHas("tick: paused on every replica"))
	if html := eval[string](t, ctx, `document.documentElement.outerHTML`); strings.Contains(html, readTok) || strings.Contains(html, operateTok) {
		t.Errorf("the page's HTML shows a token")
	}
}

// ---------------------------------------------------------------------
// While connecting to Redis
// ---------------------------------------------------------------------

func TestPageWhileConnecting(t *testing.T) {
	t.Parallel()
	srv, addr := deadRedis(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, withRedis(header(addr, "5s"), `timeout = "1s"`, `connect_timeout = "5m"`)+
		execJob("tick", "@every 1s", "1s", `true`))
	p := startReplicaNoWait(t, dir, cfg, "r1")
	base := "http://" + adminAddr(t, p)
	for _, path := range []string{"/", "/jobs/tick", "/locks"} {
		st, b, _ := httpDo(t, "GET", base+path, "")
		if st != 503 || !strings.Contains(string(b), "connecting to redis") {
			t.Errorf("GET %s while connecting: %d, want 503 and a page that says \"connecting to redis\":\n%s", path, st, b)
		}
	}
	ctx := newBrowser(t)
	open(t, ctx, base+"/")
	if !eval[bool](t, ctx, `!!document.getElementById('connecting') && !!`+row("tick")+` && `+row("tick")+`.querySelector('button[data-action="trigger"]').disabled`) {
		t.Errorf("the page while connecting does not say so, with the configured job and its buttons off:\n%s", mainText(ctx))
	}

	// Redis comes: the page, left open, shows the job running.
	srv.Restart()
	p.waitLog(t, 30*time.Second, "scheduler started", nil)
	waitJS(t, ctx, "the page once connected", `!document.getElementById('connecting') && `+row("tick")+`.querySelectorAll('.strip .cell').length >= 1`)
}

// ---------------------------------------------------------------------
// The JSON routes
// ---------------------------------------------------------------------

func TestPageAPI(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("tick", "@every 1s", "1s", `true`)+
		execJob("berlin", "CRON_TZ=Europe/Berlin 0 0 3 * * *", "1s", `true`))
	p := startReplica(t, dir, cfg, "r1")
	waitSubscribed(t, srv, 1)
	base := "http://" + p.admin

	var j daemon.JobDetailJSON
	testkit.Eventually(t, 30*time.Second, "tick ran 3 times", func() bool { j = apiJob(t, base, "tick"); return len(j.Runs) >= 3 })
	if j.Name != "tick" || j.Zone != "UTC" || len(j.Next) != 3 || j.Fleet.Since == nil || j.Fleet.Outcome != "ran" {
		t.Errorf("GET /api/jobs/tick: %+v", j.JobJSON)
	}
	if r := j.Runs[0]; r.Job != "tick" || r.Outcome != "ran" || r.Replica != "r1" || r.ID == "" || r.Token == 0 || !r.Tick.After(j.Runs[1].Tick) {
		t.Errorf("GET /api/jobs/tick: runs not newest first, or incomplete: %+v", j.Runs[:2])
	}
	if b := apiJob(t, base, "berlin"); b.Zone != "Europe/Berlin" || len(b.Runs) != 0 {
		t.Errorf("GET /api/jobs/berlin: zone %q, %d runs", b.Zone, len(b.Runs))
	}

	runs := func(query string) (int, []byte) {
		st, b, _ := httpDo(t, "GET", base+"/api/jobs/tick/runs"+query, "")
		return st, b
	}
	st, b := runs("?limit=2")
	var page1 []struct{ ID string }
	if err := json.Unmarshal(b, &page1); st != 200 || err != nil || len(page1) != 2 {
		t.Fatalf("runs?limit=2: %d %v %s", st, err, b)
	}
	st, b = runs("?limit=1&before=" + page1[0].ID)
	var page2 []struct{ ID string }
	if err := json.Unmarshal(b, &page2); st != 200 || err != nil || len(page2) != 1 || page2[0].ID != page1[1].ID {
		t.Errorf("runs?limit=1&before=%s: %d %s, want the run %s", page1[0].ID, st, b, page1[1].ID)
	}
	if st, b = runs(""); st != 200 {
		t.Errorf("runs: %d %s", st, b)
	}
	for _, c := range []struct {
		query, param string
	}{
		{"?limit=0", "limit"}, {"?limit=1001", "limit"}, {"?limit=ten", "limit"}, {"?before=yesterday", "before"},
	} {
		st, b := runs(c.query)
		if st != 400 || !strings.Contains(string(b), "parameter "+c.param) {
			t.Errorf("runs%s: %d %s, want 400 naming the parameter %s", c.query, st, b, c.param)
		}
	}
	for _, path := range []string{"/api/jobs/nope", "/api/jobs/nope/runs", "/jobs/nope"} {
		st, b, _ := httpDo(t, "GET", base+path, "")
		if st != 404 || !strings.Contains(string(b), "nope") || !strings.Contains(string(b), "tick") || !strings.Contains(string(b), "berlin") {
			t.Errorf("GET %s: %d %s, want 404 naming the job and the known ones", path, st, b)
		}
	}

	// The POST routes still work beside the GET ones; without a token,
	// from loopback only, never cross-origin, never to a DNS name.
	if st, b, _ := httpDo(t, "POST", base+"/api/jobs/berlin/trigger", ""); st != 200 || !strings.Contains(string(b), `"heard_by": 1`) {
		t.Errorf("POST trigger: %d %s", st, b)
	}
	if st, b, _ := httpDo(t, "POST", base+"/api/jobs/nope/pause", ""); st != 404 || !strings.Contains(string(b), "tick") {
		t.Errorf("POST pause of an unknown job: %d %s", st, b)
	}
	if st, _, _ := httpDo(t, "POST", base+"/api/jobs/tick/runs", ""); st != 404 {
		t.Errorf("POST /api/jobs/tick/runs: %d, want 404 (unknown action)", st)
	}
	for _, h := range []struct{ name, value string }{{"Sec-Fetch-Site", "cross-site"}, {"Host", "rebound.example:80"}} {
		st, b := httpHeader(t, "POST", base+"/api/jobs/tick/pause", h.name, h.value)
		if st != 403 || !strings.Contains(string(b), "refused") {
			t.Errorf("POST with %s: %s: %d %s, want 403 with a reason", h.name, h.value, st, b)
		}
	}
	if apiJob(t, base, "tick").Paused {
		t.Errorf("a refused call paused the job")
	}
	for _, path := range []string{"/static/style.css", "/static/page.js"} {
		if st, _, _ := httpDo(t, "GET", base+path, ""); st != 200 {
			t.Errorf("GET %s: %d", path, st)
		}
	}
}

// httpHeader sends a request with one header set (Host sets the
// request's Host) and returns the status and body.
func httpHeader(t *testing.T, method, url, name, value string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if name == "Host" {
		req.Host = value
	} else {
		req.Header.Set(name, value)
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}
