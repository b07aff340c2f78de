package daemon

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// probeTimeout bounds the store's PING of a readiness probe.
const probeTimeout = time.Second

// connectingReason is why the daemon is not ready while it waits for
// Redis at start-up.
const connectingReason = "connecting to redis"

// admin serves the admin endpoint: probes, metrics and the JSON API.
type admin struct {
	s       *scheduler.Scheduler // nil: none yet
	locks   *lock.Client
	token   string // bearer token of the mutating calls; "" for none
	metrics http.Handler
	log     hclog.Logger
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
//	GET  /api/jobs                  every job: schedule, next ticks, this replica's last run, the fleet's ledger
//	GET  /api/locks                 the locks in the store: holders, holds, TTL, token, waiters
//	POST /api/jobs/{name}/trigger   run the job once now, on one replica of the fleet
//	POST /api/jobs/{name}/pause     pause the job on every replica
//	POST /api/jobs/{name}/resume    resume it
func (a *admin) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", a.readyz)
	if a.metrics != nil {
		mux.Handle("GET /metrics", a.metrics)
	}
	mux.HandleFunc("GET /api/jobs", a.needStore(a.jobs))
	mux.HandleFunc("GET /api/locks", a.needStore(a.lockList))
	mux.HandleFunc("POST /api/jobs/{name}/{action}", a.needStore(a.act))
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
	Name        string      `json:"name"`
	Schedule    string      `json:"schedule"`
	Lock        string      `json:"lock"`
	Next        []time.Time `json:"next"`
	Paused      bool        `json:"paused"`
	LastTick    *time.Time  `json:"last_tick,omitempty"`    // this replica's last tick
	LastOutcome string      `json:"last_outcome,omitempty"` // its outcome here
	RunningHere bool        `json:"running_here"`
	Fleet       FleetJSON   `json:"fleet"`
	Error       string      `json:"error,omitempty"` // the ledger could not be read
}

// FleetJSON is what a job's ledger says for the whole fleet.
type FleetJSON struct {
	DoneTick    *time.Time `json:"done_tick,omitempty"`    // the latest tick done
	Outcome     string     `json:"outcome,omitempty"`      // recorded by the last finish
	FinishedBy  string     `json:"finished_by,omitempty"`  // its owner id
	RunningTick *time.Time `json:"running_tick,omitempty"` // a tick claimed and not done
	Owner       string     `json:"owner,omitempty"`        // the owner id of that claim, or of the last one
	Held        bool       `json:"held"`                   // the job's lock is held now
	Tries       int        `json:"tries,omitempty"`
	Triggers    int64      `json:"triggers,omitempty"`
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
			Name: v.Job, Schedule: v.Schedule, Lock: v.Lock, Next: v.NextTicks,
			Paused: v.Ledger.Paused, LastOutcome: v.LastOutcome, RunningHere: v.Running,
			Fleet: FleetJSON{
				DoneTick: ms(v.Ledger.Done), Outcome: v.Ledger.Outcome, FinishedBy: v.Ledger.Finished,
				RunningTick: ms(v.Ledger.Running), Owner: v.Ledger.Owner, Held: v.Ledger.Held,
				Tries: v.Ledger.Tries, Triggers: v.Ledger.Triggers,
			},
		}
		if !v.LastTick.IsZero() {
			t := v.LastTick.UTC()
			j.LastTick = &t
		}
		if v.LedgerErr != nil {
			j.Error = v.LedgerErr.Error()
		}
		out = append(out, j)
	}
	return out
}

func (a *admin) jobs(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, JobsJSON(a.s.Jobs(r.Context())))
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
	if !a.authorized(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="lockcron"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a bearer token is required"})
		return
	}
	name, action := r.PathValue("name"), r.PathValue("action")
	var err error
	switch action {
	case "trigger":
		_, err = a.s.Trigger(r.Context(), name) // this replica hears it
	case "pause":
		err = a.s.Pause(r.Context(), name, true)
	case "resume":
		err = a.s.Pause(r.Context(), name, false)
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "unknown action " + action + ": trigger, pause or resume"})
		return
	}
	switch {
	case errors.Is(err, scheduler.ErrUnknownJob):
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
	case err != nil:
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
	default:
		a.log.Info("admin request", "action", action, "job", name, "remote", r.RemoteAddr)
		writeJSON(w, http.StatusOK, map[string]string{"job": name, "action": action, "status": "ok"})
	}
}

// authorized checks the bearer token of a mutating call, in constant time.
func (a *admin) authorized(r *http.Request) bool {
	if a.token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(a.token)) == 1
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
