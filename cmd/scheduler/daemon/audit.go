package daemon

import (
	"context"
	"crypto/rand"
	_ "embed"
	"fmt"
	"net/http"
	neturl "net/url"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/fleet"
)

// The audit trail: every change made through the admin API or the
// command (trigger, pause, resume, freeze, unfreeze, reload; any action name, so that a new
// one joins with one call to audit.append) is one entry, with the time,
// the action, its target, the actor, the replica that took it, the remote
// address and the note.
//
// One entry per action across the fleet: the replica whose admin API takes
// the call appends it, after the action succeeded (the other replicas that
// hear a trigger or a pause through Redis append nothing); the command,
// which sends trigger, pause and resume through Redis without any admin
// API, appends its own, with the actor "cli:" and the OS user that ran it,
// and the replica_id of its config (by default its host name and pid). A
// command that goes through the admin API (no Redis, or no config file)
// leaves the entry to the daemon. A reload is in the trail when it was
// asked through the API (or `scheduler reload`), not on SIGHUP or a file
// watch, and only when the file was valid.
//
// With Redis the trail is a stream, redis.key_prefix + ":audit", trimmed
// at each append to the audit block's keep and max_age (on the server's
// clock, which gives each entry its time) and expiring max_age after its
// last entry; the append is one script that a client's retry does not run
// twice (audit.lua). It has a Redis client of its own, built from the same
// redis block as the lock client's. On the in-memory backend the trail is
// in the daemon's memory, bounded by keep, and gone when it stops.
//
// An append that fails does not undo the action: it is logged as a
// warning (the command prints it), and the call answers as it would.

//go:embed audit.lua
var auditSrc string

var auditScript = redis.NewScript(auditSrc)

// Entries in GET /api/audit and `scheduler audit`: how many by default.
// At most maxRuns.
const defaultAudit = 50

// noAudit is the error of a read of the audit trail on an admin endpoint
// without one (a program that serves the handler itself).
const noAudit = "this daemon keeps no audit trail"

// actorCLI starts the actor of an entry the command appends: "cli:alice".
const actorCLI = "cli:"

// AuditEntry is an entry of the audit trail, in GET /api/audit and
// `scheduler audit -json`.
type AuditEntry struct {
	ID      string    `json:"id"`      // "<ms>-<seq>": grows from entry to entry; ?before= takes it
	Time    time.Time `json:"time"`    // when it was appended, on the store's clock
	Action  string    `json:"action"`  // trigger, pause, resume, freeze, unfreeze, reload, ...
	Target  string    `json:"target"`  // the job; for reload, the config file; for freeze, the jobs' pattern; for unfreeze, the freeze's id
	Actor   string    `json:"actor"`   // the token's name, "loopback", or "cli:" and the OS user
	Replica string    `json:"replica"` // the replica that took it
	Remote  string    `json:"remote"`  // the caller's address; "" for the command
	Note    string    `json:"note"`    // the operator's note; "" if none
}

// audit is the audit trail of a daemon or a command: where it is kept,
// and who appends (the replica). It is safe for concurrent use.
type audit struct {
	replica string
	keep    int
	maxAge  time.Duration
	// rdb and key: the stream in Redis; rdb nil: mem, in memory.
	rdb redis.UniversalClient
	key string
	mem *memAudit
}

// openAudit opens the audit trail the config asks for: in Redis, or in
// memory without Redis. close releases its Redis client.
func openAudit(cfg *config.Config) (a *audit, close func(), err error) {
	a = &audit{replica: cfg.ReplicaID, keep: cfg.Audit.Keep, maxAge: cfg.Audit.MaxAge}
	if !cfg.UsesRedis() {
		a.mem = &memAudit{}
		return a, func() {}, nil
	}
	if a.rdb, err = cfg.RedisClient(); err != nil {
		return nil, nil, err
	}
	a.key = cfg.Redis.KeyPrefix + ":audit"
	return a, func() { _ = a.rdb.Close() }, nil
}

// append appends an entry: action on target, taken by actor from remote
// (an address; "" for the command), with note. It returns the store's
// error, or ctx's.
func (a *audit) append(ctx context.Context, action, target, actor, remote, note string) error {
	e := AuditEntry{Action: action, Target: target, Actor: actor, Replica: a.replica, Remote: remote, Note: note}
	if a.rdb == nil {
		a.mem.append(e, a.keep, a.maxAge, time.Now())
		return nil
	}
	args := []any{a.keep, a.maxAge.Milliseconds(), rand.Text(),
		"action", e.Action, "target", e.Target, "actor", e.Actor, "replica", e.Replica, "remote", e.Remote, "note", e.Note}
	if err := auditScript.Run(ctx, a.rdb, []string{a.key}, args...).Err(); err != nil {
		return fmt.Errorf("audit trail %s: %w", a.key, err)
	}
	return nil
}

// list returns the latest entries, newest first: at most limit, older than
// the entry before when it is not "" (a valid id), none older than maxAge.
func (a *audit) list(ctx context.Context, limit int, before string) ([]AuditEntry, error) {
	oldest := time.Now().Add(-a.maxAge)
	if a.rdb == nil {
		return a.mem.list(limit, before, oldest), nil
	}
	end := "+"
	if before != "" {
		end = "(" + before
	}
	msgs, err := a.rdb.XRevRangeN(ctx, a.key, end, "-", int64(limit)).Result()
	if err != nil {
		return nil, fmt.Errorf("audit trail %s: %w", a.key, err)
	}
	out := []AuditEntry{}
	for _, m := range msgs {
		e := AuditEntry{ID: m.ID, Time: idTime(m.ID)}
		for k, p := range map[string]*string{"action": &e.Action, "target": &e.Target, "actor": &e.Actor, "replica": &e.Replica, "remote": &e.Remote, "note": &e.Note} {
			*p, _ = m.Values[k].(string)
		}
		if e.Time.Before(oldest) {
			break // the rest are older still
		}
		out = append(out, e)
	}
	return out, nil
}

// memAudit is the audit trail in memory: oldest first.
type memAudit struct {
	mu      sync.Mutex
	entries []AuditEntry
	lastMS  int64
	seq     int64
}

func (m *memAudit) append(e AuditEntry, keep int, maxAge time.Duration, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ms := now.UnixMilli()
	if ms <= m.lastMS {
		ms, m.seq = m.lastMS, m.seq+1
	} else {
		m.seq = 0
	}
	m.lastMS = ms
	e.ID, e.Time = fmt.Sprintf("%d-%d", ms, m.seq), time.UnixMilli(ms).UTC()
	m.entries = append(m.entries, e)
	oldest := now.Add(-maxAge)
	drop := max(len(m.entries)-keep, 0)
	for drop < len(m.entries) && m.entries[drop].Time.Before(oldest) {
		drop++
	}
	m.entries = slices.Delete(m.entries, 0, drop)
}

func (m *memAudit) list(limit int, before string, oldest time.Time) []AuditEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []AuditEntry{}
	for i := len(m.entries) - 1; i >= 0 && len(out) < limit; i-- {
		e := m.entries[i]
		if e.Time.Before(oldest) {
			break
		}
		if before == "" || idLess(e.ID, before) {
			out = append(out, e)
		}
	}
	return out
}

// idParts splits a valid entry id, "<ms>-<seq>".
func idParts(id string) (ms, seq uint64) {
	a, b, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseUint(a, 10, 64)
	seq, _ = strconv.ParseUint(b, 10, 64)
	return ms, seq
}

// idLess reports whether the entry id x comes before y.
func idLess(x, y string) bool {
	xm, xs := idParts(x)
	ym, ys := idParts(y)
	return xm < ym || xm == ym && xs < ys
}

// idTime is the time of an entry id.
func idTime(id string) time.Time {
	ms, _ := idParts(id)
	return time.UnixMilli(int64(ms)).UTC()
}

// auditTimeout bounds an append of the admin API, which goes on when its
// caller hangs up: the action was taken.
const auditTimeout = 5 * time.Second

// record appends the entry of an action the admin API took for r: its
// actor and remote address are r's. A failure is logged; the call answers
// as it would.
func (a *admin) record(r *http.Request, action, target, note string) {
	if a.audit == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), auditTimeout)
	defer cancel()
	if err := a.audit.append(ctx, action, target, actor(r.Context()), r.RemoteAddr, note); err != nil {
		a.log.Warn("audit entry not appended", "action", action, "target", target, "error", err)
	}
}

// auditQuery reads the limit (def when absent, at most maxRuns) and before
// parameters of a listing of the audit trail; its error names the
// parameter at fault.
func auditQuery(r *http.Request, def int) (limit int, before string, err error) {
	q := r.URL.Query()
	limit = def
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s[0])
		if err != nil || n < 1 || n > maxRuns {
			return 0, "", fmt.Errorf("parameter limit: %q is not a number from 1 to %d", s[0], maxRuns)
		}
		limit = n
	}
	if s, ok := q["before"]; ok {
		if before = s[0]; !fleet.ValidEntryID(before) {
			return 0, "", fmt.Errorf("parameter before: %q is not an audit entry id (such as 1767225600000-0)", before)
		}
	}
	return limit, before, nil
}

// auditList is GET /api/audit?limit=&before=: the latest entries, newest
// first.
func (a *admin) auditList(w http.ResponseWriter, r *http.Request) {
	if a.audit == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": noAudit})
		return
	}
	limit, before, err := auditQuery(r, defaultAudit)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	es, err := a.audit.list(r.Context(), limit, before)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, es)
}

// auditPage is the status page's Audit page, paged as the API.
func (a *admin) auditPage(w http.ResponseWriter, r *http.Request) {
	d := &pageData{Title: "audit", Nav: "audit"}
	if !a.ready() {
		d.Connecting = true
		a.page(w, r, http.StatusServiceUnavailable, "audit.html", d)
		return
	}
	if a.audit == nil {
		d.Error = noAudit
		a.page(w, r, http.StatusNotFound, "audit.html", d)
		return
	}
	limit, before, err := auditQuery(r, historyRuns)
	if err != nil {
		d.Error = err.Error()
		a.page(w, r, http.StatusBadRequest, "audit.html", d)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	es, err := a.audit.list(ctx, limit, before)
	if err != nil {
		d.Error = "the audit trail could not be read: " + err.Error()
		a.page(w, r, http.StatusBadGateway, "audit.html", d)
		return
	}
	d.Audit, d.Before = es, before
	if limit != historyRuns {
		d.Limit = limit
	}
	if len(es) == limit {
		d.Older = es[len(es)-1].ID
	}
	a.page(w, r, http.StatusOK, "audit.html", d)
}

// auditCommand is `scheduler audit`: the latest entries of the audit
// trail, from Redis (or, without Redis, from the running daemon's admin
// API).
func auditCommand(cfgPath *string, o Options) *cobra.Command {
	var (
		limit  int
		before string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "audit",
		Short: "List the changes operators made: trigger, pause, resume, freeze, unfreeze, reload",
		Long: `audit lists the latest entries of the audit trail, newest first: every change
made through the admin API or this command (trigger, pause, resume, freeze, unfreeze, reload),
with its time, action, target, actor (the admin token's name, "loopback", or
"cli:" and the OS user for this command through Redis), the replica that took
it, the remote address and the note. -before ID lists the entries older than
the entry ID (the first column), to page back.

The trail is kept in Redis (by default the latest 1000 entries, none older than
2160h: the config's audit block). Without Redis it is kept in the daemon's
memory, and read from its admin API (admin.listen); so it is without a config
file, from the daemon at $LOCKCRON_ADMIN__LISTEN (default 127.0.0.1:9090).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("unexpected arguments %q", args)}
			}
			if limit < 1 || limit > maxRuns {
				return usageError{fmt.Errorf("-limit %d: give a number from 1 to %d", limit, maxRuns)}
			}
			if before != "" && !fleet.ValidEntryID(before) {
				return usageError{fmt.Errorf("-before %q: give an entry's ID, as the first column shows it (such as 1767225600000-0)", before)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			es, err := readAudit(cmd, *cfgPath, o, limit, before)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), es)
			}
			if len(es) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no audit entries")
				return nil
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tTIME\tACTION\tTARGET\tACTOR\tREPLICA\tREMOTE\tNOTE")
			for _, e := range es {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, e.Time.UTC().Format(time.RFC3339), e.Action, dash(e.Target), dash(e.Actor), dash(e.Replica), dash(e.Remote), printable(e.Note))
			}
			return tw.Flush()
		},
	}
	c.Flags().IntVarP(&limit, "limit", "n", defaultAudit, fmt.Sprintf("how many entries, 1 to %d", maxRuns))
	c.Flags().StringVar(&before, "before", "", "only entries older than this entry ID (to page back)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// readAudit reads the audit trail for the command: from Redis, or from
// the daemon's admin API.
func readAudit(cmd *cobra.Command, path string, o Options, limit int, before string) ([]AuditEntry, error) {
	ctx, cancel := commandContext(cmd)
	defer cancel()
	q := neturl.Values{"limit": {strconv.Itoa(limit)}}
	if before != "" {
		q.Set("before", before)
	}
	var es []AuditEntry
	cfg, ok := daemonConfig(path, o)
	if !ok {
		var err error
		if cfg, err = load(path, o, config.ForReading()); err != nil {
			return nil, err
		}
	}
	if !cfg.UsesRedis() {
		err := getViaAdmin(ctx, cfg, o.Environ, "/api/audit?"+q.Encode(), &es)
		return es, err
	}
	a, closeAudit, err := openAudit(cfg)
	if err != nil {
		return nil, err
	}
	defer closeAudit()
	if es, err = a.list(ctx, limit, before); err != nil {
		return nil, storeError(cfg, err)
	}
	return es, nil
}

// cliActor is the actor of the command's own actions: "cli:" and the OS
// user that runs it.
func cliActor() string {
	who := "unknown"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	return actorCLI + who
}

// auditCLI appends the entry of an action the command sent through Redis:
// the actor is "cli:" and the OS user. A failure is printed as a warning:
// the action was taken.
func auditCLI(ctx context.Context, cmd *cobra.Command, cfg *config.Config, action, target, note string) {
	err := func() error {
		a, closeAudit, err := openAudit(cfg)
		if err != nil {
			return err
		}
		defer closeAudit()
		return a.append(ctx, action, target, cliActor(), "", note)
	}()
	if err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "scheduler: warning: %s of %q done, but not in the audit trail: %v\n", action, target, storeError(cfg, err))
	}
}
