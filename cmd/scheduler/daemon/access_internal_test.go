package daemon

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// The scope table: each scope may do what it names and what the smaller
// ones may; a call without a token, or with a wrong one, is 401; a token
// whose scope is too small, 403; each with a message naming what is
// needed. The actor is the token's name.
func TestAuthorizeScopes(t *testing.T) {
	tokens := func(publicRead bool) access {
		return newAccess(config.Admin{PublicRead: publicRead, Tokens: []config.Token{
			{Name: config.LegacyTokenName, Scope: config.ScopeAdmin, Value: config.NewSecret("legacy-tok")},
			{Name: "viewer", Scope: config.ScopeRead, Value: config.NewSecret("read-tok")},
			{Name: "oncall", Scope: config.ScopeOperate, Value: config.NewSecret("operate-tok")},
			{Name: "deploy", Scope: config.ScopeAdmin, Value: config.NewSecret("admin-tok")},
		}})
	}
	read := "reading the admin API"
	for _, tc := range []struct {
		name       string
		publicRead bool
		need       config.Scope
		what       string
		token      string
		status     int
		actor      string
		msg        string
	}{
		{"read: no token", false, config.ScopeRead, read, "", 401, "", "a token is required: reading the admin API needs a token of scope read, operate or admin (send Authorization: Bearer TOKEN)"},
		{"read: wrong token", false, config.ScopeRead, read, "nope", 401, "", "wrong token: it is none of the admin tokens; reading the admin API needs a token of scope read, operate or admin"},
		{"read: read token", false, config.ScopeRead, read, "read-tok", 200, "viewer", ""},
		{"read: operate token", false, config.ScopeRead, read, "operate-tok", 200, "oncall", ""},
		{"read: admin token", false, config.ScopeRead, read, "admin-tok", 200, "deploy", ""},
		{"read: public, no token", true, config.ScopeRead, read, "", 200, "", ""},
		{"read: public, any token", true, config.ScopeRead, read, "nope", 200, "", ""},
		{"trigger: no token", false, actionScope["trigger"], "trigger", "", 401, "", "trigger needs a token of scope operate or admin"},
		{"trigger: public reads, no token", true, actionScope["trigger"], "trigger", "", 401, "", "trigger needs a token of scope operate or admin"},
		{"trigger: wrong token", false, actionScope["trigger"], "trigger", "read-tok-", 401, "", "wrong token"},
		{"trigger: read token", false, actionScope["trigger"], "trigger", "read-tok", 403, "", `token "viewer" has scope read: trigger needs a token of scope operate or admin`},
		{"pause: operate token", false, actionScope["pause"], "pause", "operate-tok", 200, "oncall", ""},
		{"resume: admin token", false, actionScope["resume"], "resume", "admin-tok", 200, "deploy", ""},
		{"reload: operate token", false, actionScope["reload"], "reload", "operate-tok", 403, "", `token "oncall" has scope operate: reload needs a token of scope admin`},
		{"reload: read token", false, actionScope["reload"], "reload", "read-tok", 403, "", `token "viewer" has scope read: reload needs a token of scope admin`},
		{"reload: admin token", false, actionScope["reload"], "reload", "admin-tok", 200, "deploy", ""},
		{"reload: the single admin.token", false, actionScope["reload"], "reload", "legacy-tok", 200, config.LegacyTokenName, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := http.MethodPost
			if tc.need == config.ScopeRead {
				method = http.MethodGet
			}
			r := httptest.NewRequest(method, "http://127.0.0.1:9090/api/x", nil)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			who, status, reason := tokens(tc.publicRead).authorize(r, tc.need, tc.what)
			if status != tc.status || who != tc.actor || !strings.Contains(reason, tc.msg) || (tc.msg == "") != (reason == "") {
				t.Errorf("got %d, actor %q, %q; want %d, actor %q, %q", status, who, reason, tc.status, tc.actor, tc.msg)
			}
			for _, v := range []string{"legacy-tok", "read-tok", "operate-tok", "admin-tok"} {
				if strings.Contains(reason, v) {
					t.Errorf("the message shows a token: %q", reason)
				}
			}
		})
	}
}

// Without tokens, reads are open and the changes are taken from loopback
// only, with "loopback" as their actor.
func TestAuthorizeWithoutTokens(t *testing.T) {
	var none access
	for _, tc := range []struct {
		name, method, remote string
		need                 config.Scope
		status               int
		actor                string
	}{
		{"read from afar", http.MethodGet, "10.1.2.3:5555", config.ScopeRead, 200, ""},
		{"trigger from loopback", http.MethodPost, "127.0.0.1:5555", config.ScopeOperate, 200, actorLoopback},
		{"reload from loopback", http.MethodPost, "[::1]:5555", config.ScopeAdmin, 200, actorLoopback},
		{"trigger from afar", http.MethodPost, "10.1.2.3:5555", config.ScopeOperate, 403, ""},
	} {
		r := httptest.NewRequest(tc.method, "http://127.0.0.1:9090/api/x", nil)
		r.RemoteAddr = tc.remote
		who, status, reason := none.authorize(r, tc.need, "x")
		if status != tc.status || who != tc.actor || (status == 200) != (reason == "") {
			t.Errorf("%s: %d, actor %q, %q; want %d, actor %q", tc.name, status, who, reason, tc.status, tc.actor)
		}
	}
}

// The scope each call needs: operate for what works jobs, admin for
// reload.
func TestActionScope(t *testing.T) {
	want := map[string]config.Scope{"trigger": config.ScopeOperate, "pause": config.ScopeOperate, "resume": config.ScopeOperate,
		"freeze": config.ScopeOperate, "unfreeze": config.ScopeOperate, "reload": config.ScopeAdmin,
		"backfill": config.ScopeOperate, "cancel-backfill": config.ScopeOperate}
	for a, s := range want {
		if actionScope[a] != s {
			t.Errorf("%s needs %v, want %v", a, actionScope[a], s)
		}
	}
	if len(actionScope) != len(want) {
		t.Errorf("actionScope has %d calls, want %d: %v", len(actionScope), len(want), actionScope)
	}
	if got := scopesFrom(config.ScopeRead); got != "read, operate or admin" {
		t.Errorf("scopesFrom(read) = %q", got)
	}
}

// A locked page shows the token box and the reason, and nothing of the
// daemon.
func TestLockedPage(t *testing.T) {
	d := &pageData{Title: "token needed", NeedToken: true, Locked: "a token is required: the status page needs a token of scope read, operate or admin"}
	var b strings.Builder
	if err := pages["jobs.html"].ExecuteTemplate(&b, "layout.html", d); err != nil {
		t.Fatal(err)
	}
	html := b.String()
	for _, s := range []string{`id="locked"`, `id="token-form"`, `id="token"`, "the status page needs a token of scope read"} {
		if !strings.Contains(html, s) {
			t.Errorf("the locked page lacks %s:\n%s", s, html)
		}
	}
	if strings.Contains(html, `id="jobs"`) || strings.Contains(html, "No jobs are configured") {
		t.Errorf("the locked page shows the jobs' part:\n%s", html)
	}
}

// The warning about a listener reachable from other machines without a
// token names every call it leaves open: the reads, and each change of
// actionScope (taken from this machine).
func TestOpenListenerWarningNamesEveryAction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lockcron.hcl")
	text := "admin {\n  listen = \"0.0.0.0:9090\"\n}\njob \"a\" {\n  schedule = \"@every 1m\"\n  exec {\n    command = [\"true\"]\n  }\n}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, config.WithEnviron([]string{}))
	if err != nil {
		t.Fatal(err)
	}
	var w string
	for _, x := range cfg.Warnings {
		if s := x; strings.Contains(s, "reachable from other machines") {
			w = s
		}
	}
	if w == "" {
		t.Fatalf("no warning about the open listener: %v", cfg.Warnings)
	}
	for _, want := range []string{"read the jobs", "run history", "locks", "audit trail", "status page"} {
		if !strings.Contains(w, want) {
			t.Errorf("the warning does not name %q: %s", want, w)
		}
	}
	for action := range actionScope {
		if !strings.Contains(w, action) {
			t.Errorf("the warning does not name %s: %s", action, w)
		}
	}
}

// A command sends $LOCKCRON_TOKEN, but not inside an exec job, where that
// variable is the run's fencing token: then the config's token of the
// smallest scope that suffices.
func TestClientToken(t *testing.T) {
	cfg := &config.Config{Admin: config.Admin{Tokens: []config.Token{
		{Name: "viewer", Scope: config.ScopeRead, Value: config.NewSecret("v")},
		{Name: "oncall", Scope: config.ScopeOperate, Value: config.NewSecret("o")},
		{Name: "deploy", Scope: config.ScopeAdmin, Value: config.NewSecret("d")},
		{Name: "unset", Scope: config.ScopeOperate},
	}}}
	for _, tc := range []struct {
		env  []string
		need config.Scope
		want string
	}{
		{[]string{"LOCKCRON_TOKEN=x"}, config.ScopeAdmin, "x"},
		{[]string{"LOCKCRON_TOKEN=1795807857003819", "LOCKCRON_JOB=nightly"}, config.ScopeOperate, "o"},
		{nil, config.ScopeRead, "v"},
		{nil, config.ScopeOperate, "o"},
		{nil, config.ScopeAdmin, "d"},
	} {
		if got := clientToken(cfg, tc.env, tc.need); got != tc.want {
			t.Errorf("clientToken(%v, %v) = %q, want %q", tc.env, tc.need, got, tc.want)
		}
	}
}
