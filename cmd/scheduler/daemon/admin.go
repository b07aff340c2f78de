package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// probeTimeout bounds the store's PING of a readiness probe.
const probeTimeout = time.Second

// connectingReason is why the daemon is not ready while it waits for
// Redis at start-up.
const connectingReason = "connecting to redis"

// Runs in GET /api/jobs/{name} and /api/jobs/{name}/runs: how many by
// default, and at most.
const (
	defaultRuns = 20
	maxRuns     = 1000
)

// admin serves the admin endpoint: probes, metrics, the JSON API and the
// status page (page.go).
type admin struct {
	s       *scheduler.Scheduler // nil: none yet
	locks   *lock.Client
	access  access // who may call what (access.go)
	metrics http.Handler
	log     hclog.Logger
	reload  *reloader // reloads the config file; nil: none (no config_digest either)
	audit   *audit    // the audit trail (audit.go); nil: none
	// connected is set once the store has answered at start-up (at once
	// for the in-memory backend). Until then probes and calls that need the
	// store or the scheduler answer 503, "connecting to redis".
	connected atomic.Bool
}

// handler routes the admin endpoint:
//
//	GET  /healthz                   200 while the process serves
//	GET  /readyz                    200 when the scheduler runs and the store answers; 503 otherwise (while connecting, and during the stop)
//	GET  /metrics                   Prometheus exposition (when metrics = "prometheus")
//	GET  /api/jobs                  every job: schedule, zone, next ticks, this replica's last run, the fleet's ledger
//	GET  /api/jobs/{name}           one job as in /api/jobs, and its latest runs (20), newest first
//	GET  /api/jobs/{name}/runs      its runs, newest first: ?limit= (default 20, at most 1000), ?before=ID (older than that run)
//	GET  /api/locks                 the locks in the store: holders, holds, TTL, token, waiters
//	POST /api/jobs/{name}/trigger   run the job once now, on one replica of the fleet; body {"params": {...}} optional
//	POST /api/jobs/{name}/pause     pause the job on every replica
//	POST /api/jobs/{name}/resume    resume it
//	GET  /api/freezes               the freezes that have not ended: id, jobs (a glob), until, created, note
//	POST /api/freezes               freeze jobs on every replica: {"jobs", "until", "note"} (FreezeRequestJSON); 400 for bad input
//	DELETE /api/freezes/{id}        end a freeze; 404 for an unknown id
//	POST /api/reload                read the config file again and apply its jobs (ReloadJSON)
//	GET  /api/audit                 the audit trail, newest first: ?limit= (default 50, at most 1000), ?before=ID (audit.go)
//	GET  /api/replicas              the fleet's replicas: version, config digest, jobs, runs, last heartbeat (replicas.go)
//	POST /api/jobs/{name}/backfill  run the job's past ticks (BackfillRequestJSON; "dry_run": list them); 400 for bad input (backfill.go)
//	GET  /api/backfills             the backfills, running and ended lately: ?job= one job's
//	DELETE /api/backfills/{id}      cancel a backfill; 404 for an unknown id, 409 for one that has finished
//	GET  /                          status page: the jobs, their holders and their last outcomes
//	GET  /jobs/{name}               status page: the job's run history, paged with ?before=ID
//	GET  /locks                     status page: the locks in the store
//	GET  /audit                     status page: the audit trail, paged with ?before=ID
//	GET  /replicas                  status page: the fleet's replicas
//	GET  /static/{file}             the status page's style sheet and script
//
// An unknown job is a 404 that names it and lists the known ones; a bad
// limit or before is a 400 that names the parameter. With tokens
// configured, the JSON API and the status page need a bearer token whose
// scope suffices (access.go): read for reads (unless admin.public_read),
// the scope in actionScope for the POST calls; without tokens, reads are
// open and the POST calls taken only from loopback. The probes, /metrics
// and the static files are always open. The status page works while the
// daemon connects to Redis: it says so, where the JSON API answers 503.
func (a *admin) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	if a.metrics != nil {
		mux.Handle("GET /metrics", a.metrics)
	}
	mux.HandleFunc("GET /api/jobs", a.reader(a.needStore(a.jobs)))
	mux.HandleFunc("GET /api/jobs/{name}", a.reader(a.needStore(a.job)))
	mux.HandleFunc("GET /api/jobs/{name}/runs", a.reader(a.needStore(a.runs)))
	mux.HandleFunc("GET /api/locks", a.reader(a.needStore(a.lockList)))
	mux.HandleFunc("POST /api/jobs/{name}/{action}", a.needStore(a.act))
	mux.HandleFunc("GET /api/freezes", a.reader(a.needStore(a.freezeList)))
	mux.HandleFunc("POST /api/freezes", a.needStore(a.freezeAdd))
	mux.HandleFunc("DELETE /api/freezes/{id}", a.needStore(a.freezeDelete))
	mux.HandleFunc("POST /api/reload", a.reloadConfig)
	mux.HandleFunc("GET /api/audit", a.reader(a.needStore(a.auditList)))
	mux.HandleFunc("GET /api/replicas", a.reader(a.needStore(a.replicaList)))
	mux.HandleFunc("POST /api/jobs/{name}/backfill", a.needStore(a.backfillAdd))
	mux.HandleFunc("GET /api/backfills", a.reader(a.needStore(a.backfillList)))
	mux.HandleFunc("DELETE /api/backfills/{id}", a.needStore(a.backfillCancel))
	a.pageRoutes(mux)
	return mux
}

// ready reports whether the store has answered at start-up and there is a
// scheduler.
func (a *admin) ready() bool { return a.connected.Load() && a.s != nil }

// needStore wraps a handler that needs the store and the scheduler: until
// the store has answered at start-up, it answers 503 instead.
func (a *admin) needStore(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !a.ready() {
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": connectingReason})
			return
		}
		h(w, r)
	}
}

func (a *admin) readyz(w http.ResponseWriter, r *http.Request) {
	if !a.ready() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": connectingReason})
		return
	}
	if !a.s.Running() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": "the scheduler is not running"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
	defer cancel()
	if err := a.locks.Ping(ctx); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": "the lock store does not answer: " + err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// JobJSON is a job in the admin API and in `scheduler jobs -json`.
type JobJSON struct {
	Name        string            `json:"name"`
	Schedule    string            `json:"schedule"`
	Zone        string            `json:"zone"` // the time zone the schedule is read in
	Lock        string            `json:"lock"`
	Next        []time.Time       `json:"next"`              // the next ticks that will run: calendars and freezes applied
	Skipped     []scheduler.Skip  `json:"skipped,omitempty"` // the ticks before the last of Next that will not, each with why
	Paused      bool              `json:"paused"`
	NoneBefore  *time.Time        `json:"none_before,omitempty"`  // set when Next has fewer than three: none more run before it, a year past the last (scheduler.NextHorizon); absent when the schedule has no further tick
	Pause       *PauseJSON        `json:"pause,omitempty"`        // the pause in force: who, when, why, until
	LastTick    *time.Time        `json:"last_tick,omitempty"`    // this replica's last tick
	LastOutcome scheduler.Outcome `json:"last_outcome,omitempty"` // its outcome here
	RunningHere bool              `json:"running_here"`
	// RunningLong is when the job's run under way, here or on another
	// replica, went past the job's alert_after; absent if none has.
	RunningLong *time.Time `json:"running_long,omitempty"`
	Fleet       FleetJSON  `json:"fleet"`
	Error       string     `json:"error,omitempty"` // the ledger could not be read
	// Digest is the digest of the job's definition on this replica, which
	// its claims record in the ledger; OtherDigest is another definition's,
	// found lately by a claim of this replica: another replica runs another
	// version of the job (a change half rolled out; the gauge
	// lockcron_job_definition_mismatch says the same).
	Digest      string `json:"digest"`
	OtherDigest string `json:"other_digest,omitempty"`

	// From the daemon's admin API only (not `scheduler jobs -json`):
	// Revision is the digest of the job's config block that this replica
	// runs (config.Job.Digest); ConfigDigest and ConfigLoadedAt are the
	// SHA-256 of the config file this replica loaded last (at start or at
	// its last reload that was valid), and when it loaded it.
	Revision       string     `json:"revision,omitempty"`
	ConfigDigest   string     `json:"config_digest,omitempty"`
	ConfigLoadedAt *time.Time `json:"config_loaded_at,omitempty"`

	// Params are the parameters a manual run accepts (the job's params).
	Params []string `json:"params,omitempty"`
	// Replicas is "all" for a job that runs on every replica (replicas =
	// "all"), absent otherwise; PerReplica is then the last outcome of
	// each replica in the job's latest history entries.
	Replicas   string           `json:"replicas,omitempty"`
	PerReplica []ReplicaRunJSON `json:"per_replica,omitempty"`
	// After are the jobs this one follows (after), When the outcome of
	// theirs that starts it; Children the jobs that follow it.
	After    []string       `json:"after,omitempty"`
	When     scheduler.When `json:"when,omitempty"`
	Children []string       `json:"children,omitempty"`
}

// ReplicaRunJSON is the last run of a job that runs on every replica on one
// replica: its tick, outcome and end.
type ReplicaRunJSON struct {
	Replica string            `json:"replica"`
	Tick    time.Time         `json:"tick"`
	Outcome scheduler.Outcome `json:"outcome"`
	End     time.Time         `json:"end"`
}

// FleetJSON is what a job's ledger says for the whole fleet.
type FleetJSON struct {
	DoneTick    *time.Time        `json:"done_tick,omitempty"`    // the latest tick done
	Outcome     scheduler.Outcome `json:"outcome,omitempty"`      // recorded by the last finish
	FinishedBy  string            `json:"finished_by,omitempty"`  // its owner id
	RunningTick *time.Time        `json:"running_tick,omitempty"` // a tick claimed and not done
	Owner       string            `json:"owner,omitempty"`        // the owner id of that claim, or of the last one
	Since       *time.Time        `json:"since,omitempty"`        // when that claim was taken, on the store's clock
	Held        bool              `json:"held"`                   // the job's lock is held now
	Tries       int               `json:"tries,omitempty"`
	Triggers    int64             `json:"triggers,omitempty"`
	Failures    int               `json:"failures,omitempty"` // failed runs in a row (pause_after_failures counts them)
}

// JobsJSON converts scheduler views to their JSON form.
func JobsJSON(views []scheduler.JobView) []JobJSON {
	out := make([]JobJSON, 0, len(views))
	ms := func(v int64) *time.Time {
		if v == 0 {
			return nil
		}
		t := time.UnixMilli(v).UTC()
		return &t
	}
	for _, v := range views {
		j := JobJSON{
			Name: v.Job, Schedule: v.Schedule, Zone: v.Zone, Lock: v.Lock, Next: v.NextTicks, Skipped: v.Skipped,
			Paused: v.Ledger.Paused, Pause: pauseJSON(v.Ledger), LastOutcome: v.LastOutcome, RunningHere: v.Running,
			Digest: v.Digest, OtherDigest: v.OtherDigest, After: v.Parents, When: v.When, Children: v.Children,
			Fleet: FleetJSON{
				DoneTick: ms(v.Ledger.Done), Outcome: scheduler.Outcome(v.Ledger.Outcome), FinishedBy: v.Ledger.Finished,
				RunningTick: ms(v.Ledger.Running), Owner: v.Ledger.Owner, Held: v.Ledger.Held,
				Tries: v.Ledger.Tries, Triggers: v.Ledger.Triggers, Failures: v.Ledger.Failures,
			},
		}
		if !v.LastTick.IsZero() {
			t := v.LastTick.UTC()
			j.LastTick = &t
		}
		if !v.NoneBefore.IsZero() {
			t := v.NoneBefore.UTC()
			j.NoneBefore = &t
		}
		if !v.Ledger.Since.IsZero() {
			t := v.Ledger.Since.UTC()
			j.Fleet.Since = &t
		}
		if !v.RunningLong.IsZero() {
			t := v.RunningLong.UTC()
			j.RunningLong = &t
		}
		if v.LedgerErr != nil {
			j.Error = v.LedgerErr.Error()
		}
		if v.Replicas == scheduler.ReplicasAll {
			j.Replicas = string(v.Replicas)
			for _, r := range v.PerReplica {
				j.PerReplica = append(j.PerReplica, ReplicaRunJSON{Replica: r.Replica, Tick: r.Tick.UTC(), Outcome: r.Outcome, End: r.End.UTC()})
			}
		}
		j.Params = v.Params
		out = append(out, j)
	}
	return out
}

func (a *admin) jobs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.withConfig(JobsJSON(a.s.Jobs(r.Context()))))
}

// withConfig fills in the config each job comes from: its revision, and
// the config file's digest and load time.
func (a *admin) withConfig(js []JobJSON) []JobJSON {
	if a.reload == nil {
		return js
	}
	st := a.reload.current()
	at := st.LoadedAt.UTC()
	for i := range js {
		js[i].Revision = st.Revisions[js[i].Name]
		js[i].ConfigDigest, js[i].ConfigLoadedAt = st.Digest, &at
	}
	return js
}

// JobDetailJSON is one job in GET /api/jobs/{name}: the job as in
// /api/jobs, and its latest runs, newest first.
type JobDetailJSON struct {
	JobJSON
	Runs []scheduler.Run `json:"runs"`
}

func (a *admin) job(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !a.known(w, name) {
		return
	}
	v, ok := a.view(r.Context(), name)
	if !ok { // removed meanwhile, by a reload
		a.known(w, name)
		return
	}
	runs, err := a.s.History(r.Context(), name, defaultRuns, "")
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, JobDetailJSON{JobJSON: a.withConfig(JobsJSON([]scheduler.JobView{v}))[0], Runs: runs})
}

func (a *admin) runs(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !a.known(w, name) {
		return
	}
	limit, before, err := runsQuery(r, defaultRuns)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	runs, err := a.s.History(r.Context(), name, limit, before)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, runs)
}

// runsQuery reads the limit (def when absent, at most maxRuns) and before
// parameters of a listing of runs; its error names the parameter at fault.
func runsQuery(r *http.Request, def int) (limit int, before string, err error) {
	q := r.URL.Query()
	limit = def
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxRuns {
			return 0, "", fmt.Errorf("parameter limit: %q is not a number from 1 to %d", s, maxRuns)
		}
		limit = n
	}
	before = q.Get("before")
	if before != "" && !fleet.ValidEntryID(before) {
		return 0, "", fmt.Errorf("parameter before: %q is not a run id (the id of a run, such as 1767225600000-0)", before)
	}
	return limit, before, nil
}

// jobNames are the names of the Scheduler's jobs, in the order they were
// added; none without a Scheduler.
func (a *admin) jobNames() []string {
	if a.s == nil {
		return nil
	}
	var names []string
	for _, st := range a.s.Status() {
		names = append(names, st.Job)
	}
	return names
}

// unknownJob is the error of a request about a job the daemon does not
// have: it names the job, the closest known one if one is near, and the
// known ones.
func (a *admin) unknownJob(name string) string {
	known := a.jobNames()
	if len(known) == 0 {
		return fmt.Sprintf("unknown job %q: there are no jobs", name)
	}
	return fmt.Sprintf("unknown job %q%s: the jobs are %s", name, didYouMean(name, known), strings.Join(known, ", "))
}

// known reports whether the daemon has the job; if not, it answers 404
// with the names of the jobs it has.
func (a *admin) known(w http.ResponseWriter, name string) bool {
	for _, n := range a.jobNames() {
		if n == name {
			return true
		}
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"error": a.unknownJob(name), "jobs": a.jobNames()})
	return false
}

// view is the Scheduler's view of one job, reading its ledger.
func (a *admin) view(ctx context.Context, name string) (scheduler.JobView, bool) {
	return a.s.Job(ctx, name)
}

func (a *admin) lockList(w http.ResponseWriter, r *http.Request) {
	locks, err := a.locks.Locks(r.Context())
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, LocksJSON(locks))
}

// LockJSON is a lock in the admin API and in `scheduler locks -json`.
type LockJSON struct {
	Name    string       `json:"name"`
	Kind    string       `json:"kind"`
	Holders []HolderJSON `json:"holders"`
	TTLms   int64        `json:"ttl_ms"`
	Token   int64        `json:"token"`
	Waiters int          `json:"waiters"`
	Error   string       `json:"error,omitempty"`
}

// HolderJSON is a holder of a lock.
type HolderJSON struct {
	Owner string `json:"owner"`
	Holds int    `json:"holds"`
	Mode  string `json:"mode,omitempty"`
	Token int64  `json:"token,omitempty"`
	TTLms int64  `json:"ttl_ms"`
}

// LocksJSON converts lock.Client.Locks to its JSON form.
func LocksJSON(ls []lock.LockInfo) []LockJSON {
	out := make([]LockJSON, 0, len(ls))
	for _, l := range ls {
		j := LockJSON{Name: l.Name, Kind: l.Kind, Holders: []HolderJSON{}, TTLms: l.TTL.Milliseconds(), Token: l.Token, Waiters: l.Waiters}
		if l.Err != nil {
			j.Error = l.Err.Error()
		}
		for _, h := range l.Holders {
			j.Holders = append(j.Holders, HolderJSON{Owner: h.Owner, Holds: h.Holds, Mode: h.Mode, Token: h.Token, TTLms: h.TTL.Milliseconds()})
		}
		out = append(out, j)
	}
	return out
}

func (a *admin) act(w http.ResponseWriter, r *http.Request) {
	name, action := r.PathValue("name"), r.PathValue("action")
	need, ok := actionScope[action]
	if !ok || action == "reload" || action == "freeze" || action == "unfreeze" || action == "cancel-backfill" {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown action " + action + ": trigger, pause or resume"})
		return
	}
	r, ok = a.allow(w, r, need, action, "action", action, "job", name)
	if !ok {
		return
	}
	var err error
	var heard int64
	var pause fleet.PauseInfo
	var params map[string]string
	switch action {
	case "trigger":
		if !slices.Contains(a.jobNames(), name) {
			err = scheduler.ErrUnknownJob // 404 before the body's 400
			break
		}
		if params, err = triggerBody(r); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		heard, err = a.s.TriggerParams(r.Context(), name, params) // this replica hears it
	case "pause":
		if !slices.Contains(a.jobNames(), name) {
			err = scheduler.ErrUnknownJob // 404 before the body's 400
			break
		}
		if pause, err = pauseBody(r); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		err = a.s.Pause(r.Context(), name, true, pause)
	case "resume":
		err = a.s.Pause(r.Context(), name, false, fleet.PauseInfo{})
	}
	switch {
	case errors.Is(err, scheduler.ErrUnknownJob):
		writeJSON(w, http.StatusNotFound, map[string]any{"error": a.unknownJob(name), "jobs": a.jobNames()})
	case errors.Is(err, lock.ErrInvalid), errors.Is(err, scheduler.ErrInvalid):
		// An until that the store's clock has passed, or parameters the
		// job does not take: nothing changed.
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
	default:
		a.log.Info("admin request", "action", action, "job", name, "actor", actor(r.Context()), "remote", r.RemoteAddr)
		note := auditNote(pause)
		if action == "trigger" {
			note = paramsNote(params)
		}
		a.record(r, action, name, note)
		resp := map[string]any{"job": name, "action": action, "status": "ok"}
		if action == "trigger" {
			resp["heard_by"] = heard // replicas that heard the request; 0: nothing will run it
		}
		if action == "pause" {
			resp["note"] = pause.Note
			if !pause.Until.IsZero() {
				resp["until"] = pause.Until.UTC()
			}
		}
		writeJSON(w, http.StatusOK, resp)
	}
}

// reloadConfig is POST /api/reload: it reloads the config file, as SIGHUP
// does, and answers with the ReloadJSON: 200 when the file was valid
// (status "applied", or "partial" with the job changes that were refused
// in errors), 422 when it was not (status "invalid", every problem with
// its place; the running jobs are kept), 503 once the daemon stops. It
// needs scope admin (actionScope), and answers while the daemon connects
// to Redis too.
func (a *admin) reloadConfig(w http.ResponseWriter, r *http.Request) {
	r, ok := a.allow(w, r, actionScope["reload"], "reload", "action", "reload")
	if !ok {
		return
	}
	if a.reload == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "this daemon does not reload its config"})
		return
	}
	a.log.Info("admin request", "action", "reload", "actor", actor(r.Context()), "remote", r.RemoteAddr)
	res, err := a.reload.reload(r.Context(), triggerAPI)
	switch {
	case err != nil:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
	case res.Status == ReloadInvalid:
		writeJSON(w, http.StatusUnprocessableEntity, res)
	default:
		a.record(r, "reload", a.reload.path, "")
		writeJSON(w, http.StatusOK, res)
	}
}

// crossOrigin refuses the POST calls that a browser sends from a page of
// another origin (CSRF), by their Sec-Fetch-Site or Origin header.
var crossOrigin http.CrossOriginProtection

// loopbackAddr reports whether a request's RemoteAddr is a loopback
// address.
func loopbackAddr(remote string) bool {
	ap, err := netip.ParseAddrPort(remote)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// loopbackHost reports whether a request's Host names no DNS name that
// could be rebound: an IP address, localhost or a name under .localhost.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if _, err := netip.ParseAddr(host); err == nil {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "localhost" || strings.HasSuffix(host, ".localhost")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
