package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// auditAPI reads GET /api/audit?query from base with token.
func auditAPI(t *testing.T, base, query, token string) []daemon.AuditEntry {
	t.Helper()
	st, b, _ := httpDo(t, "GET", base+"/api/audit?"+query, token)
	if st != 200 {
		t.Fatalf("GET /api/audit?%s: %d %s", query, st, b)
	}
	var es []daemon.AuditEntry
	if err := json.Unmarshal(b, &es); err != nil {
		t.Fatalf("GET /api/audit?%s: %v\n%s", query, err, b)
	}
	return es
}

// auditCLI runs `scheduler audit -json args...` and decodes it.
func auditCLI(t *testing.T, dir string, env []string, args ...string) []daemon.AuditEntry {
	t.Helper()
	r := cliEnv(t, dir, env, append([]string{"audit", "-json"}, args...)...)
	if r.code != 0 {
		t.Fatalf("scheduler audit %q: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	var es []daemon.AuditEntry
	if err := json.Unmarshal([]byte(r.stdout), &es); err != nil {
		t.Fatalf("scheduler audit -json: %v\n%s", err, r.stdout)
	}
	return es
}

// Two replicas on one Redis: each action through one replica's API, or
// through the command, is one entry in the audit trail, with its actor,
// replica, remote address and (empty) note; the trail pages the same from
// the API and the command; a bad limit is refused and changes nothing; a
// read needs a read token.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := tokenConfig(t, dir, srv.Addr())
	var ps []*proc
	for _, id := range []string{"r1", "r2"} {
		ps = append(ps, startProc(t, id, dir, baseEnv(append([]string{"LOCKCRON_REPLICA_ID=" + id}, tokenEnv...)...), schedBin, "run", "-config", cfg))
	}
	for _, p := range ps {
		p.waitReady(t)
	}
	waitSubscribed(t, srv, 2)
	r1, r2 := "http://"+ps[0].admin, "http://"+ps[1].admin
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	cliUser := "cli:" + u.Username
	cliEnvs := append([]string{"LOCKCRON_REPLICA_ID=ops-laptop"}, tokenEnv...)

	// latest checks that the trail has n entries and that the newest is
	// want, from either replica.
	latest := func(n int, want daemon.AuditEntry) {
		t.Helper()
		for _, base := range []string{r1, r2} {
			es := auditAPI(t, base, "limit=1000", readTok)
			if len(es) != n {
				t.Fatalf("%s: %d entries, want %d: %+v", base, len(es), n, es)
			}
			got := es[0]
			if got.Action != want.Action || got.Target != want.Target || got.Actor != want.Actor || got.Replica != want.Replica ||
				got.Note != want.Note || !strings.HasPrefix(got.Remote, want.Remote) || (want.Remote == "") != (got.Remote == "") || time.Since(got.Time) > time.Minute || got.ID == "" {
				t.Errorf("%s: newest entry %+v, want %+v", base, got, want)
			}
		}
	}

	// Through r1's API: one entry, by r1, though both replicas hear it.
	if st, b, _ := httpDo(t, "POST", r1+"/api/jobs/tick/trigger", operateTok); st != 200 || !strings.Contains(string(b), `"heard_by": 2`) {
		t.Fatalf("trigger: %d %s", st, b)
	}
	testkit.Eventually(t, 20*time.Second, "the manual run of tick", func() bool {
		return strings.Contains(mustCLI(t, 0, dir, "history", "tick", "-config", cfg, "-limit", "50").stdout, "manual #1")
	})
	latest(1, daemon.AuditEntry{Action: "trigger", Target: "tick", Actor: "oncall", Replica: "r1", Remote: "127.0.0.1:"})
	// Through r2's API.
	if st, b, _ := httpBody(t, "POST", r2+"/api/jobs/tick/pause", adminTok, `{"note": "disk full", "until": "1h"}`); st != 200 {
		t.Fatalf("pause: %d %s", st, b)
	}
	es := auditAPI(t, r2, "limit=1", readTok)
	if len(es) != 1 || !strings.HasPrefix(es[0].Note, "disk full (until ") {
		t.Fatalf("the pause's entry: %+v, want its note and its end", es)
	}
	latest(2, daemon.AuditEntry{Action: "pause", Target: "tick", Actor: "deploy", Replica: "r2", Remote: "127.0.0.1:", Note: es[0].Note})
	// Through the command: no replica's API, one entry of its own.
	if r := cliEnv(t, dir, cliEnvs, "resume", "tick", "-config", cfg); r.code != 0 {
		t.Fatalf("resume: %d %s", r.code, r.stderr)
	}
	latest(3, daemon.AuditEntry{Action: "resume", Target: "tick", Actor: cliUser, Replica: "ops-laptop"})
	if r := cliEnv(t, dir, cliEnvs, "trigger", "tick", "-config", cfg); r.code != 0 {
		t.Fatalf("trigger: %d %s", r.code, r.stderr)
	}
	latest(4, daemon.AuditEntry{Action: "trigger", Target: "tick", Actor: cliUser, Replica: "ops-laptop"})
	// A reload through the API: one entry, by the replica that took it.
	if st, b, _ := httpDo(t, "POST", r2+"/api/reload", adminTok); st != 200 {
		t.Fatalf("reload: %d %s", st, b)
	}
	latest(5, daemon.AuditEntry{Action: "reload", Target: cfg, Actor: "deploy", Replica: "r2", Remote: "127.0.0.1:"})
	// Refused calls are no change: no entry.
	if st, _, _ := httpDo(t, "POST", r1+"/api/jobs/tick/pause", readTok); st != 403 {
		t.Errorf("pause with a read token: %d, want 403", st)
	}
	if st, _, _ := httpDo(t, "POST", r1+"/api/jobs/nope/pause", operateTok); st != 404 {
		t.Errorf("pause of an unknown job: %d, want 404", st)
	}
	latest(5, daemon.AuditEntry{Action: "reload", Target: cfg, Actor: "deploy", Replica: "r2", Remote: "127.0.0.1:"})

	// Paging: the API and the command agree.
	all := auditAPI(t, r1, "", readTok)
	page := auditCLI(t, dir, cliEnvs, "-limit", "2", "-config", cfg)
	next := auditCLI(t, dir, cliEnvs, "-limit", "2", "-before", page[1].ID, "-config", cfg)
	apiPage := auditAPI(t, r2, "limit=2", readTok)
	apiNext := auditAPI(t, r2, "limit=2&before="+apiPage[1].ID, readTok)
	ids := func(es []daemon.AuditEntry) string {
		var s []string
		for _, e := range es {
			s = append(s, e.ID)
		}
		return strings.Join(s, " ")
	}
	if len(all) != 5 || ids(page) != ids(all[:2]) || ids(next) != ids(all[2:4]) || ids(apiPage) != ids(page) || ids(apiNext) != ids(next) {
		t.Errorf("pages: all %s; cli %s then %s; api %s then %s", ids(all), ids(page), ids(next), ids(apiPage), ids(apiNext))
	}
	tbl := cliEnv(t, dir, cliEnvs, "audit", "-limit", "5", "-config", cfg).stdout
	if rows := strings.Split(strings.TrimSpace(tbl), "\n"); len(rows) != 6 || !strings.HasPrefix(rows[0], "ID") || !strings.Contains(rows[1], "reload") || !strings.Contains(rows[3], cliUser) {
		t.Errorf("audit table:\n%s", tbl)
	}

	// Bad input: refused, naming the parameter or flag; nothing changed.
	for _, q := range []string{"limit=abc", "limit=0", "before=yesterday"} {
		st, b, _ := httpDo(t, "GET", r1+"/api/audit?"+q, readTok)
		name, _, _ := strings.Cut(q, "=")
		if st != 400 || !strings.Contains(string(b), "parameter "+name) {
			t.Errorf("GET /api/audit?%s: %d %s, want 400 naming %s", q, st, b, name)
		}
	}
	for _, args := range [][]string{{"-limit", "abc"}, {"-limit", "0"}, {"-before", "yesterday"}} {
		r := cliEnv(t, dir, cliEnvs, append([]string{"audit", "-config", cfg}, args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, args[0]) {
			t.Errorf("audit %v: exit %d %q, want 2 naming the flag", args, r.code, r.stderr)
		}
	}
	if n := len(auditAPI(t, r1, "", readTok)); n != 5 {
		t.Errorf("%d entries after bad reads, want 5", n)
	}

	// A reload of a file with a bad audit block is refused, naming the
	// setting, and changes nothing: no entry.
	good, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ block, field, msg string }{
		{"audit {\n  keep = -1\n}\n", "audit.keep", "keeps at least 1 entry"},
		{"audit {\n  max_age = \"x\"\n}\n", "audit.max_age", `\"x\" is not a duration`},
	} {
		if err := os.WriteFile(cfg, append([]byte(bad.block), good...), 0o600); err != nil {
			t.Fatal(err)
		}
		st, b, _ := httpDo(t, "POST", r1+"/api/reload", adminTok)
		if st != 422 || !strings.Contains(string(b), bad.field) || !strings.Contains(string(b), bad.msg) {
			t.Errorf("reload with %q: %d %s, want 422 naming %s", bad.block, st, b, bad.field)
		}
		if r := cliEnv(t, dir, cliEnvs, "validate", "-config", cfg); r.code != 1 || !strings.Contains(r.stderr, bad.field) {
			t.Errorf("validate with %q: exit %d %s", bad.block, r.code, r.stderr)
		}
	}
	if err := os.WriteFile(cfg, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if n := len(auditAPI(t, r1, "", readTok)); n != 5 {
		t.Errorf("%d entries after refused reloads, want 5", n)
	}

	// Reads need a read token.
	if st, b, _ := httpDo(t, "GET", r1+"/api/audit", ""); st != 401 || !strings.Contains(string(b), "needs a token of scope read") {
		t.Errorf("GET /api/audit without a token: %d %s", st, b)
	}
	if st, b, _ := httpDo(t, "GET", r1+"/audit", ""); st != 401 || !strings.Contains(string(b), "Token needed") || strings.Contains(string(b), "deploy") {
		t.Errorf("GET /audit without a token: %d %.300s", st, b)
	}
	for _, tok := range []string{readTok, operateTok, adminTok} {
		if n := len(auditAPI(t, r1, "", tok)); n != 5 {
			t.Errorf("with a token: %d entries", n)
		}
	}
}

// On the in-memory backend the trail is in the daemon, bounded by keep:
// the command goes through its admin API (actor loopback), and reads the
// trail from it.
func TestAuditInMemory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `admin {
  listen = "127.0.0.1:0"
}
audit {
  keep = 2
}
log {
  json = true
}
`+execJob("tick", "@yearly", "1s", `true`))
	p := startReplica(t, dir, cfg, "solo")
	env := []string{"LOCKCRON_ADMIN__LISTEN=" + p.admin}
	for _, args := range [][]string{{"pause", "tick", "-note", "test"}, {"resume", "tick"}, {"trigger", "tick"}} {
		action := args[0]
		if r := cliEnv(t, dir, env, append(args, "-config", cfg)...); r.code != 0 {
			t.Fatalf("%s: exit %d %s", action, r.code, r.stderr)
		}
	}
	// The config names admin.listen 127.0.0.1:0: the command asks the daemon
	// at LOCKCRON_ADMIN__LISTEN.
	es := auditCLI(t, dir, env, "-config", cfg)
	if len(es) != 2 || es[0].Action != "trigger" || es[1].Action != "resume" {
		t.Fatalf("in memory, keep = 2: %+v", es)
	}
	for _, e := range es {
		if e.Actor != "loopback" || e.Replica != "solo" || e.Target != "tick" || !strings.HasPrefix(e.Remote, "127.0.0.1:") {
			t.Errorf("entry %+v", e)
		}
	}
}

// The Audit page, beside Jobs and Locks, shows a row after a click on
// Trigger.
func TestBrowserAuditPage(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("once", "@yearly", "1s", `true`))
	p := startReplica(t, dir, cfg, "r1")
	waitSubscribed(t, srv, 1)
	base := "http://" + p.admin
	ctx := newBrowser(t)
	open(t, ctx, base+"/audit")
	if !strings.Contains(mainText(ctx), "No entries yet") {
		t.Errorf("a new trail:\n%s", mainText(ctx))
	}
	open(t, ctx, base+"/")
	browse(t, ctx, "click Trigger", chromedp.Click(button("once", "trigger")))
	waitJS(t, ctx, "the page says once was triggered", msgHas("once: triggered"))
	browse(t, ctx, "click Audit", chromedp.Click(chromedp.CSS(`nav a[href="/audit"]`)), chromedp.WaitReady(chromedp.CSS("#live")))
	rowJS := `document.querySelector('#audit tr[data-action="trigger"][data-target="once"]')`
	waitJS(t, ctx, "the trigger's row", rowJS+` !== null`)
	text := eval[string](t, ctx, rowJS+`.innerText`)
	for _, want := range []string{"trigger", "once", "loopback", "r1", "127.0.0.1:"} {
		if !strings.Contains(text, want) {
			t.Errorf("the audit row %q does not show %q", text, want)
		}
	}
	// One entry, the page's click: actor loopback, no note.
	if es := auditAPI(t, base, "", ""); len(es) != 1 || es[0].Actor != "loopback" || es[0].Note != "" || es[0].Replica != "r1" {
		t.Errorf("after one click, the trail is %+v", es)
	}
	if cur := eval[string](t, ctx, `document.querySelector('nav a[aria-current="page"]').innerText`); cur != "Audit" {
		t.Errorf("the nav marks %q", cur)
	}
	if t.Failed() {
		screenshot(t, ctx, filepath.Join(t.TempDir(), fmt.Sprintf("audit-%d.png", time.Now().Unix())))
	}
}
