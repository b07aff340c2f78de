package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// Who may call what on the admin endpoint.
//
// With no token configured (no admin.token, token_env or token block),
// reads are open, and the calls that change something are taken from
// loopback only. With tokens, every call of the JSON API and the status
// page needs a bearer token whose scope suffices: reads need read (or
// none, with admin.public_read), the changes the scope in actionScope.
// /healthz, /readyz, /metrics and the page's static files stay open.
//
// A token is found by comparing the SHA-256 of the one sent with that of
// each token, every one of them, in constant time: how long it takes
// tells nothing about which token came close. Its name (never its value)
// goes on the request's context as the call's actor.

// actionScope is the scope each call that changes something needs, by
// its action (POST /api/jobs/{name}/{action}, "freeze" for POST
// /api/freezes, "unfreeze" for DELETE /api/freezes/{id}, and "reload"). A
// new call joins the table.
var actionScope = map[string]config.Scope{
	"trigger":  config.ScopeOperate,
	"pause":    config.ScopeOperate,
	"resume":   config.ScopeOperate,
	"freeze":   config.ScopeOperate,
	"unfreeze": config.ScopeOperate,
	"reload":   config.ScopeAdmin,

	"backfill":        config.ScopeOperate, // POST /api/jobs/{name}/backfill
	"cancel-backfill": config.ScopeOperate, // DELETE /api/backfills/{id}
}

// actorLoopback is the actor of a change taken from loopback, when no
// token is configured.
const actorLoopback = "loopback"

// access is who may call the admin endpoint. It is not changed after
// newAccess, and is safe for concurrent use.
type access struct {
	tokens     []adminToken // none: reads open, changes from loopback only
	publicRead bool
}

// adminToken is a token the admin endpoint takes: its name and scope, and
// the SHA-256 of its value.
type adminToken struct {
	name  string
	scope config.Scope
	sum   [sha256.Size]byte
}

func newAccess(a config.Admin) access {
	ac := access{publicRead: a.PublicRead}
	for _, t := range a.Tokens {
		ac.tokens = append(ac.tokens, adminToken{name: t.Name, scope: t.Scope, sum: sha256.Sum256([]byte(t.Value.Value()))})
	}
	return ac
}

// scopesFrom lists the scopes that suffice for need: "operate or admin".
func scopesFrom(need config.Scope) string {
	var s []string
	for sc := need; sc <= config.ScopeAdmin; sc++ {
		s = append(s, sc.String())
	}
	if len(s) == 1 {
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// authorize checks that r may do what needs scope need; what names the
// call in the messages ("trigger", "reading the jobs"). It returns the
// call's actor (see actor), or the status to answer, 401 or 403, and why.
// A browser's cross-origin request is refused before anything else.
func (ac access) authorize(r *http.Request, need config.Scope, what string) (actor string, status int, reason string) {
	if err := crossOrigin.Check(r); err != nil {
		return "", http.StatusForbidden, "refused: a cross-origin request from a browser (" + err.Error() + ")"
	}
	if len(ac.tokens) == 0 {
		return authorizeLoopback(r, need)
	}
	needs := fmt.Sprintf("%s needs a token of scope %s", what, scopesFrom(need))
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	got = strings.TrimSpace(got)
	if need == config.ScopeRead && ac.publicRead {
		return "", http.StatusOK, "" // open reads: a token sent is not looked at
	}
	if !ok || got == "" {
		return "", http.StatusUnauthorized, "a token is required: " + needs + " (send Authorization: Bearer TOKEN)"
	}
	sum := sha256.Sum256([]byte(got))
	match := -1
	for i, t := range ac.tokens {
		if subtle.ConstantTimeCompare(sum[:], t.sum[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return "", http.StatusUnauthorized, "wrong token: it is none of the admin tokens; " + needs
	}
	t := ac.tokens[match]
	if t.scope < need {
		return "", http.StatusForbidden, fmt.Sprintf("token %q has scope %s: %s", t.name, t.scope, needs)
	}
	return t.name, http.StatusOK, ""
}

// authorizeLoopback is authorize without tokens: reads are open; a change
// must come from loopback and name a loopback host (an IP address or
// localhost: a DNS name that a hostile page rebinds to 127.0.0.1 is
// refused).
func authorizeLoopback(r *http.Request, need config.Scope) (string, int, string) {
	switch {
	case need == config.ScopeRead:
		return "", http.StatusOK, ""
	case !loopbackAddr(r.RemoteAddr):
		return "", http.StatusForbidden, "refused: no admin token is set, so trigger, pause, resume, freeze, unfreeze and reload are taken only from loopback, and this call came from " + r.RemoteAddr + "; add a token block to admin (or set admin.token_env) to allow them from elsewhere"
	case !loopbackHost(r.Host):
		return "", http.StatusForbidden, fmt.Sprintf("refused: no admin token is set, so trigger, pause, resume, freeze, unfreeze and reload are taken only when addressed to an IP address or localhost, not to host %q; add a token block to admin (or set admin.token_env)", r.Host)
	}
	return actorLoopback, http.StatusOK, ""
}

type actorKey struct{}

// actor is who made the request of ctx, as the admin endpoint let it in:
// the name of the token it carried (config.LegacyTokenName for the single
// admin.token), "loopback" for a change taken from loopback when no token
// is configured, or "" for a read open to all.
func actor(ctx context.Context) string {
	s, _ := ctx.Value(actorKey{}).(string)
	return s
}

// allow checks a call (authorize): if it may go on, it returns the
// request with its actor on the context; if not, it answers 401 or 403
// with the reason as JSON, logs it (a refused change as a warning, with
// logArgs), and returns false.
func (a *admin) allow(w http.ResponseWriter, r *http.Request, need config.Scope, what string, logArgs ...any) (*http.Request, bool) {
	who, status, reason := a.access.authorize(r, need, what)
	if status == http.StatusOK {
		return r.WithContext(context.WithValue(r.Context(), actorKey{}, who)), true
	}
	a.refused(w, r, need, status, reason, logArgs...)
	writeJSON(w, status, map[string]string{"error": reason})
	return r, false
}

// refused logs a refusal and sets the header of a 401. A read without a
// token (a page opened before its token is given) is logged at debug
// level; a wrong token, or a change refused, as a warning.
func (a *admin) refused(w http.ResponseWriter, r *http.Request, need config.Scope, status int, reason string, logArgs ...any) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lockcron"`)
	}
	args := append(logArgs, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "status", status, "reason", reason)
	if need == config.ScopeRead && r.Header.Get("Authorization") == "" {
		a.log.Debug("admin request refused", args...)
		return
	}
	a.log.Warn("admin request refused", args...)
}

// reader wraps a read of the JSON API: it needs a read token when tokens
// are configured (unless admin.public_read).
func (a *admin) reader(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r, ok := a.allow(w, r, config.ScopeRead, "reading the admin API"); ok {
			h(w, r)
		}
	}
}
