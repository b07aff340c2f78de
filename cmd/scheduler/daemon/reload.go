package daemon

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/scheduler"
)

// What set a reload off, as its log lines and result say.
const (
	triggerSignal = "signal" // SIGHUP, or Options.Reload
	triggerAPI    = "api"    // POST /api/reload, and so `scheduler reload`
	triggerWatch  = "watch"  // the file changed (watch = true)
)

// A reload's status.
const (
	ReloadApplied = "applied" // the file is valid and every change was made
	ReloadPartial = "partial" // the file is valid, but some changes were refused (Errors); the others were made
	ReloadInvalid = "invalid" // the file is not valid (Errors, with places): nothing changed
)

// The changes a reload makes to a job.
const (
	changeAdded   = "added"
	changeRemoved = "removed"
	changeChanged = "changed"
)

// errStopping: a reload was asked for while the daemon stops.
var errStopping = errors.New("daemon: stopping: the config is not reloaded")

// ReloadJSON is what a reload did: the answer of POST /api/reload, and
// what `scheduler reload -json` prints. The job lists hold the changes
// made, by job name, sorted; a change that was refused is in Errors
// instead, and the job stays as it ran.
type ReloadJSON struct {
	Status  string `json:"status"`  // ReloadApplied, ReloadPartial or ReloadInvalid
	Trigger string `json:"trigger"` // "signal", "api" or "watch"
	Path    string `json:"path"`    // the config file the daemon read
	// ConfigDigest and ConfigLoadedAt are those of the config in effect
	// after the reload: the new file's, or, if it was invalid, the old one's.
	ConfigDigest   string    `json:"config_digest"`
	ConfigLoadedAt time.Time `json:"config_loaded_at"`
	Added          []string  `json:"added"`
	Removed        []string  `json:"removed"`
	Changed        []string  `json:"changed"`
	Unchanged      []string  `json:"unchanged"`
	// RestartNeeded are the settings that changed in the file but are read
	// only at start (config.Config.RestartNeeded): their running values
	// are kept.
	RestartNeeded []string      `json:"restart_needed"`
	Errors        []ReloadError `json:"errors"`
}

// ReloadError is one thing a reload could not do: a problem in the file
// (with its place, as `scheduler validate` prints it), or a change to a job
// that the scheduler refused.
type ReloadError struct {
	Pos    string `json:"pos,omitempty"`    // file:line:col of a problem in the file
	Job    string `json:"job,omitempty"`    // the job
	Change string `json:"change,omitempty"` // "added", "removed" or "changed": the change refused
	Error  string `json:"error"`            // the whole message, with its place
}

// jobSet is what a reload changes: the Scheduler's jobs.
type jobSet interface {
	Add(scheduler.Job) error
	Update(scheduler.Job) error
	Remove(name string, opts ...scheduler.RemoveOption) error
}

// configState is the config in effect, for the admin API and the status
// page. It is not changed once published.
type configState struct {
	Digest    string            // the file's SHA-256
	LoadedAt  time.Time         // when it was loaded
	Revisions map[string]string // job name → the digest of the definition the scheduler has
}

// reloader reads the config file again and applies its jobs to a running
// Scheduler: one reload at a time, whoever asks (SIGHUP, the admin API,
// the file watch). The settings other than the jobs keep the values the
// daemon started with. It is safe for concurrent use.
type reloader struct {
	path    string         // the config file
	o       Options        // its registry and environment
	jobs    jobSet         // the Scheduler
	log     hclog.Logger   // the daemon's root logger
	running *config.Config // the config the daemon started with: its settings stay in effect

	// sem holds a token while a reload runs.
	sem chan struct{}
	// Under sem:
	closed  bool              // the daemon stops: no more reloads
	applied map[string]string // job name → Revision of the definition the Scheduler has
	secrets map[string]string // job name → config.Job.SecretsDigest of that definition

	state atomic.Pointer[configState]
}

// newReloader returns a reloader for a Scheduler that runs the jobs of cfg,
// loaded from cfg.Path at loadedAt.
func newReloader(cfg *config.Config, jobs jobSet, o Options, log hclog.Logger, loadedAt time.Time) *reloader {
	r := &reloader{path: cfg.Path, o: o, jobs: jobs, log: log, running: cfg,
		sem: make(chan struct{}, 1), applied: make(map[string]string, len(cfg.Jobs)), secrets: make(map[string]string, len(cfg.Jobs))}
	for _, j := range cfg.Jobs {
		r.applied[j.Name], r.secrets[j.Name] = j.Digest, j.SecretsDigest()
	}
	r.state.Store(&configState{Digest: cfg.Digest, LoadedAt: loadedAt, Revisions: maps.Clone(r.applied)})
	return r
}

// current is the config in effect.
func (r *reloader) current() *configState { return r.state.Load() }

// close waits for a reload under way and refuses those asked for later
// (errStopping).
func (r *reloader) close() {
	r.sem <- struct{}{}
	r.closed = true
	<-r.sem
}

// reload reads the config file again, with the loader and validation of
// the start-up, and applies its jobs: a file that is not valid changes
// nothing (status ReloadInvalid, every problem with its place); otherwise
// jobs that are new are added, jobs no longer in the file removed (a run in
// progress finishes under its lock), jobs whose block changed (their
// config.Job.Digest) updated, and the others left alone. A change the
// Scheduler refuses (scheduler.ErrInvalid: jobs that share a lock with
// another kind, say) is reported and the others are still made (status
// ReloadPartial); refused changes are tried again after the others, since
// one may have made room for another. Settings other than the jobs that
// changed are reported as needing a restart, and keep their running
// values. Every step is logged; no secret is.
//
// It waits for a reload under way, until ctx ends (then it returns
// ctx.Err()), and returns errStopping once close has been called. Its
// other outcomes are in the ReloadJSON.
func (r *reloader) reload(ctx context.Context, trigger string) (ReloadJSON, error) {
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return ReloadJSON{}, ctx.Err()
	}
	defer func() { <-r.sem }()
	if r.closed {
		return ReloadJSON{}, errStopping
	}
	res := ReloadJSON{Trigger: trigger, Path: r.path, Added: []string{}, Removed: []string{}, Changed: []string{},
		Unchanged: []string{}, RestartNeeded: []string{}, Errors: []ReloadError{}}
	log := r.log.With("trigger", trigger)
	log.Info("reloading the config", "path", r.path)

	cfg, err := load(r.path, r.o)
	var js []scheduler.Job
	if err == nil {
		for _, w := range cfg.Warnings {
			log.Warn("config warning", "warning", w)
		}
		js, err = cfg.SchedulerJobs(r.o.Registry, r.log.Named("job"))
	}
	if err != nil {
		return r.refuse(log, res, err), nil
	}

	res.RestartNeeded = append(res.RestartNeeded, cfg.RestartNeeded(r.running)...)
	if len(res.RestartNeeded) > 0 {
		log.Warn("config settings changed that need a restart: their running values are kept", "settings", res.RestartNeeded)
	}

	redact := func(s string) string { return cfg.Redact(r.running.Redact(s)) }
	d := diffJobs(r.applied, r.secrets, cfg.Jobs)
	nextSecrets := make(map[string]string, len(cfg.Jobs))
	for _, j := range cfg.Jobs {
		nextSecrets[j.Name] = j.SecretsDigest()
	}
	res.Unchanged = append(res.Unchanged, d.unchanged...)
	byName := make(map[string]scheduler.Job, len(js))
	for _, j := range js {
		byName[j.Name] = j
	}
	type step struct {
		job, change string
		err         error
	}
	var pending []step
	for _, n := range d.removed {
		pending = append(pending, step{job: n, change: changeRemoved})
	}
	for _, n := range d.changed {
		pending = append(pending, step{job: n, change: changeChanged})
	}
	for _, n := range d.added {
		pending = append(pending, step{job: n, change: changeAdded})
	}
	// Removals first, then changes, then additions, so that a lock a job
	// leaves is free for the one that takes it. A change refused as
	// invalid may depend on that order: it is tried again while others
	// succeed. Other refusals are final.
	fail := func(st step) {
		msg := redact(st.err.Error())
		res.Errors = append(res.Errors, ReloadError{Job: st.job, Change: st.change, Error: msg})
		log.Error("job change not applied: the job stays as it ran", "job", st.job, "change", st.change, "error", msg)
	}
	for len(pending) > 0 {
		var again []step
		progress := false
		for _, st := range pending {
			j := byName[st.job]
			var err error
			switch st.change {
			case changeRemoved:
				if err = r.jobs.Remove(st.job); errors.Is(err, scheduler.ErrUnknownJob) {
					err = nil // gone already: what the file asks for
				}
			case changeChanged:
				err = r.jobs.Update(j)
			case changeAdded:
				err = r.jobs.Add(j)
			}
			if err != nil {
				st.err = err
				if errors.Is(err, scheduler.ErrInvalid) {
					again = append(again, st)
				} else {
					fail(st)
				}
				continue
			}
			progress = true
			switch st.change {
			case changeRemoved:
				delete(r.applied, st.job)
				delete(r.secrets, st.job)
				res.Removed = append(res.Removed, st.job)
				log.Info("job reloaded", "job", st.job, "change", st.change)
				continue
			case changeAdded:
				res.Added = append(res.Added, st.job)
			case changeChanged:
				res.Changed = append(res.Changed, st.job)
			}
			r.applied[st.job], r.secrets[st.job] = j.Revision, nextSecrets[st.job]
			log.Info("job reloaded", "job", st.job, "change", st.change, "revision", j.Revision)
		}
		if !progress {
			for _, st := range again {
				fail(st)
			}
			break
		}
		pending = again
	}
	slices.Sort(res.Added)
	slices.Sort(res.Removed)
	slices.Sort(res.Changed)
	slices.SortStableFunc(res.Errors, func(a, b ReloadError) int { return strings.Compare(a.Job, b.Job) })

	st := &configState{Digest: cfg.Digest, LoadedAt: time.Now(), Revisions: maps.Clone(r.applied)}
	r.state.Store(st)
	res.ConfigDigest, res.ConfigLoadedAt = st.Digest, st.LoadedAt
	res.Status = ReloadApplied
	args := []any{"path", r.path, "config_digest", st.Digest, "added", res.Added, "removed", res.Removed,
		"changed", res.Changed, "unchanged", len(res.Unchanged)}
	if len(res.RestartNeeded) > 0 {
		args = append(args, "restart_needed", res.RestartNeeded)
	}
	if len(res.Errors) > 0 {
		res.Status = ReloadPartial
		log.Warn("config reloaded, but some job changes were refused: those jobs stay as they ran", append(args, "errors", len(res.Errors))...)
	} else {
		log.Info("config reloaded", args...)
	}
	return res, nil
}

// refuse reports a config file that cannot be loaded: each problem is
// logged with its place, and nothing changes.
func (r *reloader) refuse(log hclog.Logger, res ReloadJSON, err error) ReloadJSON {
	var cerrs config.Errors
	if errors.As(err, &cerrs) {
		for _, e := range cerrs {
			re := ReloadError{Pos: e.Pos.String(), Job: e.Job, Error: e.Error()}
			res.Errors = append(res.Errors, re)
			log.Error("config error", "error", re.Error)
		}
	} else {
		res.Errors = append(res.Errors, ReloadError{Error: r.running.Redact(err.Error())})
		log.Error("config error", "error", r.running.Redact(err.Error()))
	}
	st := r.current()
	res.Status, res.ConfigDigest, res.ConfigLoadedAt = ReloadInvalid, st.Digest, st.LoadedAt
	log.Error("config not reloaded: the file is not valid; the running jobs are kept", "path", r.path, "problems", len(res.Errors))
	return res
}

// jobDiff is how a config's jobs differ from those running, by name: each
// list sorted.
type jobDiff struct {
	added, removed, changed, unchanged []string
}

// diffJobs compares the jobs running (name → the digest of their
// definition) with those of a config: a name not running is added, a
// running name not in the config removed, a name whose digest differs, or
// whose secrets (secrets: name → config.Job.SecretsDigest, which the
// digest leaves out) differ, changed. The order of the jobs does not
// matter.
func diffJobs(running, secrets map[string]string, next []config.Job) jobDiff {
	var d jobDiff
	seen := make(map[string]bool, len(next))
	for _, j := range next {
		seen[j.Name] = true
		switch rev, ok := running[j.Name]; {
		case !ok:
			d.added = append(d.added, j.Name)
		case rev != j.Digest || secrets[j.Name] != j.SecretsDigest():
			d.changed = append(d.changed, j.Name)
		default:
			d.unchanged = append(d.unchanged, j.Name)
		}
	}
	for name := range running {
		if !seen[name] {
			d.removed = append(d.removed, name)
		}
	}
	for _, l := range []*[]string{&d.added, &d.removed, &d.changed, &d.unchanged} {
		slices.Sort(*l)
	}
	return d
}
