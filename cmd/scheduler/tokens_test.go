package main_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/redistest"
)

// Scoped tokens (tokenConfig's), as the variables that hold them.
const (
	readTok    = "read-s3cret-token"
	operateTok = "operate-s3cret-token"
	adminTok   = "admin-s3cret-token"
)

// tokenEnv sets the variables of tokenConfig's tokens.
var tokenEnv = []string{"VIEW_TOKEN=" + readTok, "OPS_TOKEN=" + operateTok, "DEPLOY_TOKEN=" + adminTok}

// newTok is in the daemon's environment as NEW_TOKEN, for a token block
// that a reload adds.
const newTok = "new-s3cret-token"

// tokenConfig is a config with three scoped tokens, viewer (read), oncall
// (operate) and deploy (admin), and the job tick.
func tokenConfig(t *testing.T, dir, redisAddr string) string {
	t.Helper()
	text := strings.Replace(header(redisAddr, "5s"), `listen = "127.0.0.1:0"`, `listen = "127.0.0.1:0"
  token "viewer" {
    scope     = "read"
    value_env = "VIEW_TOKEN"
  }
  token "oncall" {
    scope     = "operate"
    value_env = "OPS_TOKEN"
  }
  token "deploy" {
    scope     = "admin"
    value_env = "DEPLOY_TOKEN"
  }`, 1)
	return writeConfig(t, dir, text+execJob("tick", "@every 1s", "1s", `true`))
}

// Each scope allowed and refused on the real routes of a daemon: reads
// need a read token, trigger, pause and resume operate, reload admin; 401
// without a token or with a wrong one, 403 for a scope too small, each
// with a message naming what is needed. The probes, /metrics and the
// page's static files stay open. The log names each call's token, never
// its value; the commands send $LOCKCRON_TOKEN, or the config's token of
// the smallest scope the call needs.
func TestScopedTokens(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	cfg := tokenConfig(t, dir, srv.Addr())
	p := startProc(t, "r1", dir, baseEnv(append([]string{"LOCKCRON_REPLICA_ID=r1", "NEW_TOKEN=" + newTok}, tokenEnv...)...), schedBin, "run", "-config", cfg)
	p.waitReady(t)
	waitSubscribed(t, srv, 1)
	base := "http://" + p.admin

	const needRead = "needs a token of scope read, operate or admin"
	for _, tc := range []struct {
		name, method, path, token string
		want                      int
		msg                       string
	}{
		{"healthz", "GET", "/healthz", "", 200, ""},
		{"readyz", "GET", "/readyz", "", 200, ""},
		{"metrics", "GET", "/metrics", "", 200, ""},
		{"static", "GET", "/static/page.js", "", 200, ""},
		{"jobs, no token", "GET", "/api/jobs", "", 401, "a token is required: reading the admin API " + needRead},
		{"jobs, wrong token", "GET", "/api/jobs", "nope", 401, "wrong token: it is none of the admin tokens; reading the admin API " + needRead},
		{"jobs, read", "GET", "/api/jobs", readTok, 200, `"name": "tick"`},
		{"job, operate", "GET", "/api/jobs/tick", operateTok, 200, `"name": "tick"`},
		{"runs, admin", "GET", "/api/jobs/tick/runs", adminTok, 200, ""},
		{"locks, no token", "GET", "/api/locks", "", 401, needRead},
		{"locks, read", "GET", "/api/locks", readTok, 200, ""},
		{"page, no token", "GET", "/", "", 401, "the status page " + needRead},
		{"page, read", "GET", "/", readTok, 200, `data-job="tick"`},
		{"job page, no token", "GET", "/jobs/tick", "", 401, "Token needed"},
		{"locks page, read", "GET", "/locks", readTok, 200, ""},
		{"replicas, no token", "GET", "/api/replicas", "", 401, needRead},
		{"replicas, read", "GET", "/api/replicas", readTok, 200, `"id": "r1"`},
		{"replicas page, no token", "GET", "/replicas", "", 401, "the status page " + needRead},
		{"replicas page, read", "GET", "/replicas", readTok, 200, `data-replica="r1"`},
		{"trigger, no token", "POST", "/api/jobs/tick/trigger", "", 401, "trigger needs a token of scope operate or admin"},
		{"trigger, read", "POST", "/api/jobs/tick/trigger", readTok, 403, `token \"viewer\" has scope read: trigger needs a token of scope operate or admin`},
		{"pause, read", "POST", "/api/jobs/tick/pause", readTok, 403, "pause needs a token of scope operate or admin"},
		{"trigger, operate", "POST", "/api/jobs/tick/trigger", operateTok, 200, `"heard_by": 1`},
		{"pause, operate", "POST", "/api/jobs/tick/pause", operateTok, 200, ""},
		{"resume, admin", "POST", "/api/jobs/tick/resume", adminTok, 200, ""},
		{"freezes, no token", "GET", "/api/freezes", "", 401, needRead},
		{"freezes, read", "GET", "/api/freezes", readTok, 200, "[]"},
		{"freeze, no token", "POST", "/api/freezes", "", 401, "freeze needs a token of scope operate or admin"},
		{"freeze, read", "POST", "/api/freezes", readTok, 403, `token \"viewer\" has scope read: freeze needs a token of scope operate or admin`},
		{"freeze without a body, operate", "POST", "/api/freezes", operateTok, 400, "the body is not a freeze"},
		{"unfreeze, read", "DELETE", "/api/freezes/f9", readTok, 403, "unfreeze needs a token of scope operate or admin"},
		{"unfreeze of no freeze, operate", "DELETE", "/api/freezes/f9", operateTok, 404, `no such freeze: \"f9\"`},
		{"freeze as a job action", "POST", "/api/jobs/tick/freeze", operateTok, 404, "unknown action freeze"},
		{"reload, read", "POST", "/api/reload", readTok, 403, `token \"viewer\" has scope read: reload needs a token of scope admin`},
		{"reload, operate", "POST", "/api/reload", operateTok, 403, `token \"oncall\" has scope operate: reload needs a token of scope admin`},
		{"reload, no token", "POST", "/api/reload", "", 401, "reload needs a token of scope admin"},
		{"reload, admin", "POST", "/api/reload", adminTok, 200, `"status": "applied"`},
	} {
		st, b, h := httpBody(t, tc.method, base+tc.path, tc.token, pauseNote(tc.path))
		if st != tc.want || !strings.Contains(string(b), tc.msg) {
			t.Errorf("%s: %s %s: %d %.300s, want %d with %q", tc.name, tc.method, tc.path, st, b, tc.want, tc.msg)
		}
		if st == 401 && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("%s: 401 without a WWW-Authenticate: Bearer header", tc.name)
		}
		for _, v := range []string{readTok, operateTok, adminTok, newTok} {
			if strings.Contains(string(b), v) {
				t.Errorf("%s: the answer shows a token", tc.name)
			}
		}
	}
	// A locked page shows nothing of the daemon: no job, no replica.
	if _, b, _ := httpDo(t, "GET", base+"/", ""); strings.Contains(string(b), "tick") || strings.Contains(string(b), ">r1<") {
		t.Errorf("the page without a token shows the daemon's data:\n%s", b)
	}

	// A reload with a bad token block changes nothing: 422 with the
	// error at its place; the tokens in effect stay. Tokens take a restart:
	// a valid new one is reported as such, and not taken until then.
	orig, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	withToken := func(scope string) string {
		return strings.Replace(string(orig), `  token "deploy" {`, `  token "intruder" {
    scope     = "`+scope+`"
    value_env = "NEW_TOKEN"
  }
  token "deploy" {`, 1)
	}
	replaceConfig(t, cfg, withToken("superuser"))
	st, b, _ := httpDo(t, "POST", base+"/api/reload", adminTok)
	var res daemon.ReloadJSON
	if err := json.Unmarshal(b, &res); st != 422 || err != nil || res.Status != "invalid" || len(res.Errors) != 1 ||
		!strings.HasPrefix(res.Errors[0].Pos, cfg+":") || !strings.Contains(res.Errors[0].Error, `admin.token.intruder.scope: "superuser" is not one of "read", "operate", "admin"`) {
		t.Errorf("reload with a bad scope: %d %v %s", st, err, b)
	}
	replaceConfig(t, cfg, withToken("admin"))
	st, b, _ = httpDo(t, "POST", base+"/api/reload", adminTok)
	res = daemon.ReloadJSON{}
	if err := json.Unmarshal(b, &res); st != 200 || err != nil || !slices.Contains(res.RestartNeeded, "admin.tokens") {
		t.Errorf("reload with a new token: %d %v %s, want admin.tokens in restart_needed", st, err, b)
	}
	if st, b, _ := httpDo(t, "GET", base+"/api/jobs", newTok); st != 401 {
		t.Errorf("a token added by a reload is taken before a restart: %d %s", st, b)
	}
	if st, b, _ := httpDo(t, "GET", base+"/api/jobs", readTok); st != 200 {
		t.Errorf("the read token after the reloads: %d %s", st, b)
	}
	replaceConfig(t, cfg, string(orig))

	// The commands: $LOCKCRON_TOKEN first.
	elsewhere := t.TempDir() // no config file: they ask the daemon
	listen := "LOCKCRON_ADMIN__LISTEN=" + p.admin
	if r := cliEnv(t, elsewhere, []string{listen, "LOCKCRON_TOKEN=" + readTok}, "jobs"); r.code != 0 || !strings.Contains(r.stdout, "\ntick ") {
		t.Errorf("jobs with a read token: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cliEnv(t, elsewhere, []string{listen, "LOCKCRON_TOKEN=" + readTok}, "pause", "tick", "-note", "test"); r.code != 1 ||
		!strings.Contains(r.stderr, "403") || !strings.Contains(r.stderr, "pause needs a token of scope operate or admin") {
		t.Errorf("pause with a read token: exit %d, %q", r.code, r.stderr)
	}
	if r := cliEnv(t, elsewhere, []string{listen}, "history", "tick"); r.code != 1 || !strings.Contains(r.stderr, "401") {
		t.Errorf("history without a token: exit %d, %q", r.code, r.stderr)
	}
	if r := cliEnv(t, elsewhere, []string{listen, "LOCKCRON_TOKEN=" + operateTok}, "pause", "tick", "-note", "test"); r.code != 0 {
		t.Errorf("pause with an operate token: exit %d, %q", r.code, r.stderr)
	}
	// With the config: its token of the smallest scope that suffices,
	// deploy's for reload.
	if r := cliEnv(t, dir, append([]string{listen}, tokenEnv...), "reload", "-config", cfg); r.code != 0 {
		t.Errorf("reload -config: exit %d, %q", r.code, r.stderr)
	}
	// The command needs only the token it sends: the others' variables
	// may be unset. Through Redis (pause and resume with the config)
	// it needs none.
	if r := cliEnv(t, dir, []string{listen, "DEPLOY_TOKEN=" + adminTok}, "reload", "-config", cfg); r.code != 0 {
		t.Errorf("reload -config with only deploy's variable set: exit %d, %q", r.code, r.stderr)
	}
	for _, args := range [][]string{{"pause", "tick", "-note", "test"}, {"resume", "tick"}} {
		action := args[0]
		if r := cliEnv(t, dir, nil, append(args, "-config", cfg)...); r.code != 0 {
			t.Errorf("%s -config through Redis with no token variable set: exit %d, %q", action, r.code, r.stderr)
		}
	}

	// Each change is logged with its actor: the token's name.
	actors := map[string]string{}
	for _, l := range p.logs.jsonLines() {
		if l.msg() == "admin request" {
			actors[l.str("action")+" "+l.str("actor")] = l.str("job")
		}
	}
	for _, want := range []string{"trigger oncall", "pause oncall", "resume deploy", "reload deploy"} {
		if _, ok := actors[want]; !ok {
			t.Errorf("no admin request logged as %q; logged: %v", want, actors)
		}
	}
	if p.countLog("admin request refused", func(l logLine) bool { return strings.Contains(l.str("reason"), `token "viewer" has scope read`) }) == 0 {
		t.Errorf("the refusals of the read token are not logged")
	}
	// A wrong token is worth a warning; a read without one (a page opened
	// before its token is given) only a debug line.
	if p.countLog("admin request refused", func(l logLine) bool { return strings.HasPrefix(l.str("reason"), "wrong token") }) == 0 {
		t.Errorf("a read with a wrong token is not logged")
	}
	if n := p.countLog("admin request refused", func(l logLine) bool {
		return l.str("method") == "GET" && strings.HasPrefix(l.str("reason"), "a token is required")
	}); n != 0 {
		t.Errorf("%d reads without a token logged at info level or above", n)
	}
	for _, v := range []string{readTok, operateTok, adminTok, newTok} {
		if strings.Contains(p.logs.String(), v) {
			t.Errorf("the log shows a token")
		}
	}
}
