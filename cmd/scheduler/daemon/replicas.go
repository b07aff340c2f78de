package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/spf13/cobra"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// The fleet in view: each daemon reports itself in the store (its replica
// id, version, config digest, jobs and the runs under way here; the store
// keeps when its process first and last reported), and GET /api/replicas, the Replicas page and `scheduler replicas`
// list every replica's last report, as Sidekiq's processes page and
// dkron's nodes do.
//
// One goroutine of the daemon reports at once as its scheduler starts (it
// does not hold the scheduler back), then every replicaBeat (5s): one
// script call per replica per period (fleet.Store.Report) that writes its
// report (about 1 kB, its job names capped at replicaListCap) and drops
// the reports due, O(log n), stamped with the store's clock. A replica
// whose reports stop (SIGKILL, a lost network) is gone replicaTTL (15s,
// three missed reports) after its last one; a replica that stops cleanly
// says so at once, after its scheduler has stopped (state "stopped"). A
// gone replica is listed as gone, with when it was last seen, for
// fleet.ReplicaKeep (an hour), then dropped. Reading the list (the API,
// the page, the command) reads every report: O(fleet). On the in-memory
// backend the daemon lists itself.
//
// Last seen, gone and started (the process's first report) are on the
// store's clock; a run's since is on its replica's own clock, and the
// page's "ago" on the clock of the replica that serves it.
//
// A live replica whose config digest (the SHA-256 of its config file)
// differs from most live replicas' stands out (other_config); so does one
// whose version differs (other_version). On a tie, the side of the replica
// that answers (for the command through Redis, of the config file it read)
// counts as most. Gone and stopped replicas are never marked: after a
// rollout, those stopped on the old config are history, not a change half
// rolled out.
//
// These views are per replica process; the scheduler's memberships, which
// rank replicas for each tick's claim, are per group of jobs (see the
// scheduler package).

// Replica reports: how often, how long one counts as live, how long the
// last one (ReportStopped) may take at the stop, and how many job names and
// runs one carries at most (the counts say how many there are).
const (
	replicaBeat        = 5 * time.Second
	replicaTTL         = 3 * replicaBeat
	replicaStopTimeout = 2 * time.Second
	replicaListCap     = 50
)

// The states of a replica in ReplicaJSON.
const (
	replicaLive    = "live"    // it reports
	replicaStopped = "stopped" // it said it stopped
	replicaGone    = "gone"    // its reports stopped
)

// replicaReport is what a daemon reports of itself (fleet.Store.Report),
// as JSON.
type replicaReport struct {
	Version      string        `json:"version"`
	ConfigDigest string        `json:"config_digest"`
	Jobs         []string      `json:"jobs"` // the first replicaListCap
	JobCount     int           `json:"job_count"`
	Running      []RunningJSON `json:"running"` // the first replicaListCap
	RunningCount int           `json:"running_count"`
}

// ReplicaJSON is a replica of the fleet in GET /api/replicas and
// `scheduler replicas -json`.
type ReplicaJSON struct {
	ID    string `json:"id"`
	State string `json:"state"` // live, stopped (it said so) or gone (its reports stopped)
	// Version is its scheduler command's version (Version: the module's,
	// and the commit of a build from a checkout); ConfigDigest the SHA-256
	// of the config file it runs (at start or its last valid reload).
	// OtherVersion and OtherConfig: they differ from most live replicas'.
	Version      string `json:"version"`
	ConfigDigest string `json:"config_digest"`
	OtherVersion bool   `json:"other_version"`
	OtherConfig  bool   `json:"other_config"`
	// StartedAt is its process's first report (as its scheduler started),
	// LastSeen its last report, and GoneAt when it stopped counting as
	// live (absent while live), all on the store's clock.
	StartedAt time.Time  `json:"started_at"`
	LastSeen  time.Time  `json:"last_seen"`
	GoneAt    *time.Time `json:"gone_at,omitempty"`
	// Jobs are the jobs it runs, in its config's order, the first 50 of
	// JobCount; Running the runs under way on it at its last report, the
	// first 50 of RunningCount.
	Jobs         []string      `json:"jobs"`
	JobCount     int           `json:"job_count"`
	Running      []RunningJSON `json:"running"`
	RunningCount int           `json:"running_count"`
	Error        string        `json:"error,omitempty"` // its report could not be read
}

// RunningJSON is a run under way on a replica: its job, its tick, and
// when it started (on the replica's own clock).
type RunningJSON struct {
	Job   string    `json:"job"`
	Tick  time.Time `json:"tick"`
	Since time.Time `json:"since"`
}

// reporter reports this replica in the store. Its report reads the
// scheduler's status and the config in effect each time.
type reporter struct {
	store  *fleet.Store
	id     string
	s      *scheduler.Scheduler
	reload *reloader // nil: no config digest
	log    hclog.Logger
}

// report is this replica's report now.
func (rp *reporter) report() string {
	r := replicaReport{Version: Version(), Jobs: []string{}, Running: []RunningJSON{}}
	if rp.reload != nil {
		r.ConfigDigest = rp.reload.current().Digest
	}
	for _, st := range rp.s.Status() {
		if r.JobCount++; len(r.Jobs) < replicaListCap {
			r.Jobs = append(r.Jobs, st.Job)
		}
		if !st.RunStart.IsZero() {
			if r.RunningCount++; len(r.Running) < replicaListCap {
				r.Running = append(r.Running, RunningJSON{Job: st.Job, Tick: st.RunTick.UTC(), Since: st.RunStart.UTC()})
			}
		}
	}
	b, _ := json.Marshal(r) // plain values: it cannot fail
	return string(b)
}

// start reports at once, then every replicaBeat until stop, on a
// goroutine of its own (a slow store does not hold up the caller); stop
// ends it and waits for it, then reports this replica stopped (within
// replicaStopTimeout; a report of the goroutine that the store runs after
// it is ignored, see fleet.Store.Report). A failed report is logged as a
// warning, once until one succeeds again.
func (rp *reporter) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	failing := false
	beat := func() {
		rctx, rcancel := context.WithTimeout(ctx, replicaBeat)
		err := rp.store.Report(rctx, rp.id, rp.report(), replicaTTL)
		rcancel()
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			rp.log.Warn("replica report failed: the fleet shows this replica gone until one succeeds", "error", err)
			failing = true
		case err == nil && failing:
			rp.log.Info("replica report succeeded again")
			failing = false
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(replicaBeat)
		defer t.Stop()
		beat()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
		sctx, scancel := context.WithTimeout(context.Background(), replicaStopTimeout)
		defer scancel()
		if err := rp.store.ReportStopped(sctx, rp.id, rp.report()); err != nil {
			rp.log.Warn("replica not reported stopped: the fleet shows it gone once its last report runs out", "error", err, "within", replicaTTL)
		}
	}
}

// replicasJSON converts the store's reports to their JSON form, and marks
// the live replicas whose config or version differs from most live
// replicas' (on a tie, from ownDigest and ownVersion, those of the replica
// or the command that reads them).
func replicasJSON(rs []fleet.Replica, ownDigest, ownVersion string) []ReplicaJSON {
	out := make([]ReplicaJSON, 0, len(rs))
	for _, r := range rs {
		j := ReplicaJSON{ID: r.ID, State: replicaLive, StartedAt: r.Started.UTC(), LastSeen: r.Seen.UTC(), Jobs: []string{}, Running: []RunningJSON{}}
		switch {
		case r.Stopped:
			j.State = replicaStopped
		case !r.Gone.IsZero():
			j.State = replicaGone
		}
		if !r.Gone.IsZero() {
			t := r.Gone.UTC()
			j.GoneAt = &t
		}
		var rep replicaReport
		if err := json.Unmarshal([]byte(r.Report), &rep); err != nil {
			j.Error = fmt.Sprintf("its report does not decode (another version's?): %v", err)
		} else {
			j.Version, j.ConfigDigest, j.JobCount, j.RunningCount = rep.Version, rep.ConfigDigest, rep.JobCount, rep.RunningCount
			if rep.Jobs != nil {
				j.Jobs = rep.Jobs
			}
			if rep.Running != nil {
				j.Running = rep.Running
			}
		}
		out = append(out, j)
	}
	digest := mostOf(out, ownDigest, func(j ReplicaJSON) string { return j.ConfigDigest })
	version := mostOf(out, ownVersion, func(j ReplicaJSON) string { return j.Version })
	for i := range out {
		if out[i].State == replicaLive && out[i].Error == "" {
			out[i].OtherConfig = out[i].ConfigDigest != digest
			out[i].OtherVersion = out[i].Version != version
		}
	}
	return out
}

// mostOf is the value of field that most live replicas of rs have; on a
// tie, own if it is among the most, else the least of them; own when no
// replica is live.
func mostOf(rs []ReplicaJSON, own string, field func(ReplicaJSON) string) string {
	n := map[string]int{}
	for _, r := range rs {
		if r.State == replicaLive && r.Error == "" {
			n[field(r)]++
		}
	}
	top := 0
	for _, c := range n {
		top = max(top, c)
	}
	if top == 0 || n[own] == top {
		return own
	}
	var most []string
	for v, c := range n {
		if c == top {
			most = append(most, v)
		}
	}
	return slices.Min(most)
}

// replicaList is GET /api/replicas: every replica of the fleet, sorted by
// id.
func (a *admin) replicaList(w http.ResponseWriter, r *http.Request) {
	rs, err := a.replicas(r.Context())
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, rs)
}

// replicas reads the replicas from the store, marked against this
// replica's config and version.
func (a *admin) replicas(ctx context.Context) ([]ReplicaJSON, error) {
	rs, err := fleet.New(a.locks).Replicas(ctx)
	if err != nil {
		return nil, err
	}
	own := ""
	if a.reload != nil {
		own = a.reload.current().Digest
	}
	return replicasJSON(rs, own, Version()), nil
}

// replicasPage is the status page's Replicas page.
func (a *admin) replicasPage(w http.ResponseWriter, r *http.Request) {
	d := &pageData{Title: "replicas", Nav: "replicas"}
	if !a.ready() {
		d.Connecting = true
		a.page(w, r, http.StatusServiceUnavailable, "replicas.html", d)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), pageTimeout)
	defer cancel()
	rs, err := a.replicas(ctx)
	if err != nil {
		d.Error = "the replicas could not be read: " + err.Error()
		a.page(w, r, http.StatusBadGateway, "replicas.html", d)
		return
	}
	d.Replicas = rs
	a.page(w, r, http.StatusOK, "replicas.html", d)
}

// replicasCommand is `scheduler replicas`: the fleet's replicas, from
// Redis (or, without Redis, from the running daemon's admin API).
func replicasCommand(cfgPath *string, o Options) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "replicas",
		Short: "List the replicas of the fleet: version, config, jobs, runs, last heartbeat",
		Long: `replicas lists every replica of the fleet that shares this Redis and key prefix:
its id, state, version, config digest, start time and last heartbeat (both on
Redis's clock), the jobs it runs and the runs under way on it (since when, on
that replica's clock); past 50 of either, "+N more". Each running daemon
reports itself every 5s; one that stops cleanly shows as "stopped" at once, one
whose reports stop (killed, cut off) as "gone" 15s after its last one. Either
is listed, with when it was last seen, for an hour, then dropped.

A live replica whose config digest (the SHA-256 of its config file) differs
from most live replicas' is marked "(other)": a config change half rolled out.
On a tie, the config file this command reads counts as most. Stopped and gone
replicas are not marked.

Without Redis, or without a config file, it asks the running daemon's admin API
(admin.listen): with Redis, that daemon lists the fleet; on the in-memory
backend, itself alone.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs, err := readReplicas(cmd, *cfgPath, o)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(cmd.OutOrStdout(), rs)
			}
			return printReplicas(cmd.OutOrStdout(), rs)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return c
}

// readReplicas reads the replicas for the command: from Redis, or from
// the daemon's admin API.
func readReplicas(cmd *cobra.Command, path string, o Options) ([]ReplicaJSON, error) {
	var rs []ReplicaJSON
	if cfg, ok := daemonConfig(path, o); ok {
		ctx, cancel := commandContext(cmd)
		defer cancel()
		err := getViaAdmin(ctx, cfg, o.Environ, "/api/replicas", &rs)
		return rs, err
	}
	err := withScheduler(cmd.Context(), path, o, "", func(ctx context.Context, _ *scheduler.Scheduler, locks *lock.Client, cfg *config.Config) error {
		if !cfg.UsesRedis() {
			return getViaAdmin(ctx, cfg, o.Environ, "/api/replicas", &rs)
		}
		reps, err := fleet.New(locks).Replicas(ctx)
		if err != nil {
			return storeError(cfg, err)
		}
		rs = replicasJSON(reps, cfg.Digest, Version())
		return nil
	})
	return rs, err
}

// printReplicas prints the replicas as a table.
func printReplicas(w io.Writer, rs []ReplicaJSON) error {
	if len(rs) == 0 {
		_, err := fmt.Fprintln(w, "no replicas: none has reported in the last hour")
		return err
	}
	short := func(s string) string { return s[:min(len(s), 12)] }
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICA\tSTATE\tVERSION\tCONFIG\tSTARTED\tLAST SEEN\tJOBS\tRUNNING")
	others := false
	for _, r := range rs {
		state, version, digest := r.State, dash(r.Version), dash(short(r.ConfigDigest))
		if r.GoneAt != nil {
			state += " " + fmtTime(r.GoneAt)
		}
		if r.OtherVersion {
			version += " (other)"
		}
		if r.OtherConfig {
			digest += " (other)"
			others = true
		}
		jobs := dash(strings.Join(r.Jobs, ",") + moreOf(r.JobCount, len(r.Jobs)))
		var running []string
		for _, x := range r.Running {
			running = append(running, fmt.Sprintf("%s@%s since %s", x.Job, fmtTime(&x.Tick), fmtTime(&x.Since)))
		}
		if more := moreOf(r.RunningCount, len(r.Running)); more != "" {
			running = append(running, more[1:])
		}
		started := "-"
		if !r.StartedAt.IsZero() {
			started = fmtTime(&r.StartedAt)
		}
		if r.Error != "" {
			version = "error: " + r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, state, version, digest, started, fmtTime(&r.LastSeen), jobs, dash(strings.Join(running, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if others {
		_, err := fmt.Fprintln(w, "(other): a config file other than most live replicas' (a change half rolled out?)")
		return err
	}
	return nil
}

// moreOf is " +N more" when a replica's report lists shown of total, else
// "".
func moreOf(total, shown int) string {
	if total <= shown {
		return ""
	}
	return fmt.Sprintf(" +%d more", total-shown)
}
