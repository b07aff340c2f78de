package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/scheduler"
)

// BackfillRequestJSON is the body of POST /api/jobs/{name}/backfill: the
// range (times in RFC 3339, or dates such as 2026-11-01, in UTC), both
// ends included; only_missing; the rate ("20/s", "90/m", "2/h" or a number
// a second; default 1/s); dry_run (list the ticks, change nothing); force
// (allow more than 100,000 ticks).
type BackfillRequestJSON struct {
	From        string `json:"from"`
	To          string `json:"to"`
	OnlyMissing bool   `json:"only_missing,omitempty"`
	Rate        string `json:"rate,omitempty"`
	DryRun      bool   `json:"dry_run,omitempty"`
	Force       bool   `json:"force,omitempty"`
}

// BackfillDryRunJSON is the answer to a dry run: the ticks it would run,
// the first scheduler.MaxBackfillListed of them, and how many there are.
type BackfillDryRunJSON struct {
	Job   string      `json:"job"`
	Ticks []time.Time `json:"ticks"`
	Total int         `json:"total"`
}

// backfillTimeLayouts are the layouts -from and -to are read in, in UTC
// unless they say a zone.
var backfillTimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"}

// parseBackfillTime reads a backfill's from or to (what names the flag).
func parseBackfillTime(what, s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, fmt.Errorf("%s: missing: give a time in RFC 3339 (2026-11-01T09:00:00Z) or a date (2026-11-01, UTC)", what)
	}
	for _, l := range backfillTimeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%s: %q is not a time: give one in RFC 3339 (2026-11-01T09:00:00Z) or a date (2026-11-01, UTC)", what, s)
}

// parseRate reads a backfill's rate: "N/s", "N/m", "N/h" or N (a second);
// "" is 0, the default.
func parseRate(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	num, unit, _ := strings.Cut(s, "/")
	per := map[string]float64{"": 1, "s": 1, "m": 60, "h": 3600}[unit]
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || per == 0 || n <= 0 || n != n || n > scheduler.MaxBackfillRate*per || n/per < scheduler.MinBackfillRate {
		return 0, fmt.Errorf("rate: %q is not a rate: give ticks per second, minute or hour such as 20/s, 90/m or 2/h (at least 1 a day, at most %v/s)",
			s, scheduler.MaxBackfillRate)
	}
	return n / per, nil
}

// options reads req as the options of a backfill asked for by by.
func (req BackfillRequestJSON) options(by string) (scheduler.BackfillOptions, error) {
	o := scheduler.BackfillOptions{OnlyMissing: req.OnlyMissing, Force: req.Force, By: by}
	var err error
	if o.From, err = parseBackfillTime("from", req.From); err != nil {
		return o, err
	}
	if o.To, err = parseBackfillTime("to", req.To); err != nil {
		return o, err
	}
	o.Rate, err = parseRate(req.Rate)
	return o, err
}

// backfillStatus is the status of a backfill call's error: 400 for bad
// input, 404 for an unknown job or backfill, 409 for a cancel of a
// finished one or a range that overlaps a running backfill's, 502 for the
// store.
func backfillStatus(err error) int {
	switch {
	case errors.Is(err, scheduler.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, scheduler.ErrUnknownJob), errors.Is(err, scheduler.ErrUnknownBackfill):
		return http.StatusNotFound
	case errors.Is(err, scheduler.ErrBackfillEnded), errors.Is(err, scheduler.ErrBackfillOverlap):
		return http.StatusConflict
	}
	return http.StatusBadGateway
}

// backfillAdd is POST /api/jobs/{name}/backfill (BackfillRequestJSON): 200
// with the Backfill made (or, for a dry run, BackfillDryRunJSON), 400 for
// bad input, 404 for an unknown job and 409 for a range that overlaps a
// running backfill of the job, nothing recorded.
func (a *admin) backfillAdd(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	r, ok := a.allow(w, r, actionScope["backfill"], "backfill", "action", "backfill", "job", name)
	if !ok {
		return
	}
	var req BackfillRequestJSON
	dec := json.NewDecoder(io.LimitReader(r.Body, 16<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": `the body is not a backfill ({"from", "to", "only_missing", "rate", "dry_run", "force"}): ` + err.Error()})
		return
	}
	o, err := req.options(actor(r.Context()))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	if req.DryRun {
		ticks, total, err := a.s.BackfillTicks(r.Context(), name, o)
		if err != nil {
			a.backfillError(w, name, err)
			return
		}
		if ticks == nil {
			ticks = []time.Time{}
		}
		writeJSON(w, http.StatusOK, BackfillDryRunJSON{Job: name, Ticks: ticks, Total: total})
		return
	}
	b, err := a.s.Backfill(r.Context(), name, o)
	if err != nil {
		a.backfillError(w, name, err)
		return
	}
	a.log.Info("admin request", "action", "backfill", "job", name, "backfill", b.ID, "actor", actor(r.Context()), "remote", r.RemoteAddr)
	a.record(r, "backfill", name, backfillNote(b))
	writeJSON(w, http.StatusOK, b)
}

func (a *admin) backfillError(w http.ResponseWriter, name string, err error) {
	if errors.Is(err, scheduler.ErrUnknownJob) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": a.unknownJob(name), "jobs": a.jobNames()})
		return
	}
	writeJSON(w, backfillStatus(err), map[string]string{"error": err.Error()})
}

// backfillNote is the note of a backfill's audit entry.
func backfillNote(b scheduler.Backfill) string {
	note := fmt.Sprintf("%s: %d ticks from %s to %s at %v/s", b.ID, b.Total, b.From.UTC().Format(time.RFC3339), b.To.UTC().Format(time.RFC3339), b.Rate)
	if b.OnlyMissing {
		note += ", only missing"
	}
	return note
}

// backfillList is GET /api/backfills: every job's backfills (?job= one
// job's), running and ended lately.
func (a *admin) backfillList(w http.ResponseWriter, r *http.Request) {
	job := r.URL.Query().Get("job")
	bs, err := a.s.Backfills(r.Context(), job)
	if err != nil {
		a.backfillError(w, job, err)
		return
	}
	if bs == nil {
		bs = []scheduler.Backfill{}
	}
	writeJSON(w, http.StatusOK, bs)
}

// backfillCancel is DELETE /api/backfills/{id}: 200 with the backfill, 404
// for an unknown id, 409 for one that has finished.
func (a *admin) backfillCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	r, ok := a.allow(w, r, actionScope["cancel-backfill"], "cancel-backfill", "action", "cancel-backfill", "backfill", id)
	if !ok {
		return
	}
	b, err := a.s.CancelBackfill(r.Context(), id, actor(r.Context()))
	if err != nil {
		writeJSON(w, backfillStatus(err), map[string]string{"error": err.Error()})
		return
	}
	a.log.Info("admin request", "action", "cancel-backfill", "backfill", id, "job", b.Job, "actor", actor(r.Context()), "remote", r.RemoteAddr)
	a.record(r, "cancel-backfill", id+" ("+b.Job+")", "")
	writeJSON(w, http.StatusOK, b)
}

// runningBackfills are job's running backfills, for its page; none if
// they cannot be read.
func (a *admin) runningBackfills(ctx context.Context, job string) []scheduler.Backfill {
	bs, err := a.s.Backfills(ctx, job)
	if err != nil {
		a.log.Warn("backfills unreadable for the page", "job", job, "error", err)
		return nil
	}
	var out []scheduler.Backfill
	for _, b := range bs {
		if b.Running() {
			out = append(out, b)
		}
	}
	return out
}

// backfillCommand is `scheduler backfill`: through Redis with a config
// that names one, else through the daemon's admin API, as freeze.
func backfillCommand(cfgPath *string, o Options) *cobra.Command {
	var from, to, rate, cancelID string
	var onlyMissing, dryRun, force bool
	c := &cobra.Command{
		Use:   "backfill JOB -from TIME -to TIME [-only-missing] [-rate N/s] [-dry-run] [-force] | backfill -cancel ID",
		Short: "Run a job's past ticks once across the fleet, or cancel such a backfill",
		Long: `backfill runs JOB's ticks from -from to -to (both included; RFC 3339, or a
date such as 2026-11-01, in UTC), oldest first, each once across the fleet
with its own tick as LOCKCRON_TICK and LOCKCRON_BACKFILL=1, at most -rate a
second (such as 20/s, 90/m; default 1/s), under the job's lock: never at the
same time as a scheduled run. The job's calendars (exclude) and the fleet's
freezes apply. -only-missing skips the ticks that the job's history (or its
ledger) records as run, successfully or not; -dry-run lists the ticks and
changes nothing. More than 100,000 ticks need -force.

The backfill is kept in Redis and carried on by one replica at a time: if
that replica stops or dies, another carries it on from its progress. The
command prints its id, then its progress (done/total and an estimate of the
time left) until it ends; Ctrl-C on a terminal asks whether to cancel it,
else the command only detaches and the backfill goes on. -cancel ID cancels
one: no tick of it starts after.

With Redis configured the request goes through Redis; without Redis, or
without a config file, to the running daemon's admin API (POST
/api/jobs/JOB/backfill, GET /api/backfills, DELETE /api/backfills/ID).`,
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case cancelID != "" && len(args) > 0:
				return usageError{fmt.Errorf("backfill -cancel ID takes no job, got %q", args)}
			case cancelID == "" && len(args) != 1:
				return usageError{fmt.Errorf("backfill takes one job, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if cancelID != "" {
				return cancelBackfill(cmd, *cfgPath, o, cancelID)
			}
			job := args[0]
			req := BackfillRequestJSON{From: from, To: to, OnlyMissing: onlyMissing, Rate: rate, DryRun: dryRun, Force: force}
			opts, err := req.options(cliActor())
			if err != nil {
				return usageError{fmt.Errorf("backfill: -%w", err)}
			}
			if dryRun {
				return dryRunBackfill(cmd, *cfgPath, o, job, req, opts)
			}
			return runBackfill(cmd, *cfgPath, o, job, req, opts)
		},
	}
	c.Flags().StringVar(&from, "from", "", "the first time of the range: RFC 3339, or a date (UTC)")
	c.Flags().StringVar(&to, "to", "", "the last time of the range (included): RFC 3339, or a date (UTC)")
	c.Flags().BoolVar(&onlyMissing, "only-missing", false, "skip the ticks the history or the ledger records as run")
	c.Flags().StringVar(&rate, "rate", "", "at most this many ticks a second: 20/s, 90/m, 2/h (default 1/s)")
	c.Flags().BoolVar(&dryRun, "dry-run", false, "list the ticks, run nothing")
	c.Flags().BoolVar(&force, "force", false, "allow more than 100,000 ticks")
	c.Flags().StringVar(&cancelID, "cancel", "", "cancel the backfill ID")
	return c
}

// dryRunBackfill prints the ticks a backfill would run, one a line (the
// first scheduler.MaxBackfillListed), and their count on stderr.
func dryRunBackfill(cmd *cobra.Command, cfgPath string, o Options, job string, req BackfillRequestJSON, opts scheduler.BackfillOptions) error {
	var ticks []time.Time
	var total int
	err := storeOrDaemon(cmd, cfgPath, o, job, func(ctx context.Context, cfg *config.Config) error {
		var res BackfillDryRunJSON
		err := postBackfill(ctx, cfg, o.Environ, job, req, &res)
		ticks, total = res.Ticks, res.Total
		return err
	}, func(ctx context.Context, s *scheduler.Scheduler, cfg *config.Config) error {
		var err error
		ticks, total, err = s.BackfillTicks(ctx, job, opts)
		return backfillCLIError(cfg, err)
	})
	if err != nil {
		return err
	}
	w := bufio.NewWriter(cmd.OutOrStdout())
	for _, t := range ticks {
		fmt.Fprintln(w, t.UTC().Format(time.RFC3339Nano))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if total > len(ticks) {
		fmt.Fprintf(cmd.ErrOrStderr(), "backfill of %s (dry run): %d ticks, the first %d listed; nothing was run or recorded\n", job, total, len(ticks))
		return nil
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "backfill of %s (dry run): %d ticks; nothing was run or recorded\n", job, total)
	return nil
}

// backfillCLIError is err of a call through Redis as the command says it.
func backfillCLIError(cfg *config.Config, err error) error {
	if err == nil || errors.Is(err, scheduler.ErrInvalid) || errors.Is(err, scheduler.ErrUnknownBackfill) || errors.Is(err, scheduler.ErrBackfillEnded) ||
		errors.Is(err, scheduler.ErrBackfillOverlap) {
		return err
	}
	return storeError(cfg, err)
}

// runBackfill starts a backfill, prints its id, and follows its progress.
func runBackfill(cmd *cobra.Command, cfgPath string, o Options, job string, req BackfillRequestJSON, opts scheduler.BackfillOptions) error {
	var b scheduler.Backfill
	follow := func(read func(context.Context) (scheduler.Backfill, error), cancel func(context.Context) error) error {
		fmt.Fprintln(cmd.OutOrStdout(), b.ID)
		return followBackfill(cmd, o, b, read, cancel)
	}
	return storeOrDaemon(cmd, cfgPath, o, job, func(ctx context.Context, cfg *config.Config) error {
		if err := postBackfill(ctx, cfg, o.Environ, job, req, &b); err != nil {
			return err
		}
		return follow(func(ctx context.Context) (scheduler.Backfill, error) {
			var bs []scheduler.Backfill
			err := getViaAdmin(ctx, cfg, o.Environ, "/api/backfills?job="+neturl.QueryEscape(job), &bs)
			return findBackfill(bs, b.ID, err)
		}, func(ctx context.Context) error {
			return cancelViaAdmin(ctx, cfg, o.Environ, b.ID)
		})
	}, func(ctx context.Context, s *scheduler.Scheduler, cfg *config.Config) error {
		var err error
		if b, err = s.Backfill(ctx, job, opts); err != nil {
			return backfillCLIError(cfg, err)
		}
		auditCLI(ctx, cmd, cfg, "backfill", job, backfillNote(b))
		return follow(func(ctx context.Context) (scheduler.Backfill, error) {
			bs, err := s.Backfills(ctx, job)
			return findBackfill(bs, b.ID, err)
		}, func(ctx context.Context) error {
			if _, err := s.CancelBackfill(ctx, b.ID, cliActor()); err != nil {
				return backfillCLIError(cfg, err)
			}
			auditCLI(ctx, cmd, cfg, "cancel-backfill", b.ID+" ("+job+")", "")
			return nil
		})
	})
}

// findBackfill returns the backfill id of bs.
func findBackfill(bs []scheduler.Backfill, id string, err error) (scheduler.Backfill, error) {
	if err != nil {
		return scheduler.Backfill{}, err
	}
	for _, b := range bs {
		if b.ID == id {
			return b, nil
		}
	}
	return scheduler.Backfill{}, fmt.Errorf("%w: %q", scheduler.ErrUnknownBackfill, id)
}

// backfillFollow is how often the command reads a backfill's progress.
const backfillFollow = 500 * time.Millisecond

// followBackfill prints b's progress until it ends: in place when stdout
// is a terminal, a line per change otherwise. The first Ctrl-C (SIGINT)
// asks, when stdin and stdout are terminals, whether to cancel the
// backfill (cancel), and detaches otherwise, or if the answer is no: the
// backfill goes on in the fleet.
func followBackfill(cmd *cobra.Command, o Options, b scheduler.Backfill, read func(context.Context) (scheduler.Backfill, error), cancel func(context.Context) error) error {
	out := cmd.OutOrStdout()
	tty := isTerminal(out)
	ask := tty && isTerminal(os.Stdin)
	ints := make(chan os.Signal, 1)
	signal.Notify(ints, os.Interrupt)
	defer signal.Stop(ints)
	t := time.NewTicker(backfillFollow)
	defer t.Stop()
	last := ""
	// The pace is measured on this clock alone: from the first progress
	// read here.
	start, startDone := time.Now(), b.Done
	show := func(b scheduler.Backfill) {
		line := progressLine(b, time.Since(start), b.Done-startDone)
		switch {
		case tty:
			fmt.Fprint(out, "\r"+line+"\x1b[K")
		case line != last:
			fmt.Fprintln(out, line)
		}
		last = line
	}
	show(b)
	for {
		select {
		case <-ints:
			if ask {
				fmt.Fprintf(out, "\ncancel backfill %s? [y/N] ", b.ID)
				answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
				if a := strings.ToLower(strings.TrimSpace(answer)); a == "y" || a == "yes" {
					ctx, done := commandContext(cmd)
					err := cancel(ctx)
					done()
					if err != nil {
						return err
					}
					fmt.Fprintf(out, "backfill %s cancelled: no tick of it starts any more\n", b.ID)
					return nil
				}
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "\ndetached: backfill %s goes on in the fleet (scheduler backfill -cancel %s cancels it)\n", b.ID, b.ID)
			return nil
		case <-t.C:
		}
		ctx, done := commandContext(cmd)
		nb, err := read(ctx)
		done()
		if err != nil {
			if tty {
				fmt.Fprintln(out)
			}
			return fmt.Errorf("backfill %s: progress unreadable (it goes on in the fleet): %w", b.ID, err)
		}
		b = nb
		show(b)
		if !b.Running() {
			if tty {
				fmt.Fprintln(out)
			}
			if b.State == "cancelled" {
				fmt.Fprintf(cmd.ErrOrStderr(), "backfill %s cancelled by %s\n", b.ID, b.CancelledBy)
			}
			return nil
		}
	}
}

// progressLine is a backfill's progress: "backfill ID of JOB: DONE/TOTAL
// ticks (P%), about D left" while it runs (n ticks done in el), its state
// once it has ended.
func progressLine(b scheduler.Backfill, el time.Duration, n int64) string {
	pct := 100.0
	if b.Total > 0 {
		pct = 100 * float64(b.Done) / float64(b.Total)
	}
	line := fmt.Sprintf("backfill %s of %s: %d/%d ticks (%.0f%%)", b.ID, b.Job, b.Done, b.Total, pct)
	if !b.Running() {
		return line + ", " + b.State
	}
	return line + ", about " + backfillLeft(b, el, n).String() + " left"
}

// backfillLeft estimates how long b has to go: its pace as followed (n
// ticks done in el, on one clock), or its rate before any tick is done,
// whichever is slower.
func backfillLeft(b scheduler.Backfill, el time.Duration, n int64) time.Duration {
	left := float64(b.Total - b.Done)
	if left <= 0 {
		return 0
	}
	secs := left / b.Rate
	if n > 0 && el > 0 {
		secs = max(secs, left*el.Seconds()/float64(n))
	}
	return time.Duration(secs * float64(time.Second)).Round(time.Second)
}

// isTerminal reports whether f is an *os.File on a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// cancelBackfill is `scheduler backfill -cancel ID`.
func cancelBackfill(cmd *cobra.Command, cfgPath string, o Options, id string) error {
	err := storeOrDaemon(cmd, cfgPath, o, "", func(ctx context.Context, cfg *config.Config) error {
		return cancelViaAdmin(ctx, cfg, o.Environ, id)
	}, func(ctx context.Context, s *scheduler.Scheduler, cfg *config.Config) error {
		b, err := s.CancelBackfill(ctx, id, cliActor())
		if err != nil {
			return backfillCLIError(cfg, err)
		}
		auditCLI(ctx, cmd, cfg, "cancel-backfill", id+" ("+b.Job+")", "")
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: cancelled\n", id)
	return nil
}

// postBackfill sends a backfill to the daemon's admin API and decodes its
// answer into v.
func postBackfill(ctx context.Context, cfg *config.Config, env []string, job string, br BackfillRequestJSON, v any) error {
	body, _ := json.Marshal(br)
	req, err := adminRequest(ctx, cfg, env, actionScope["backfill"], http.MethodPost, "/api/jobs/"+neturl.PathEscape(job)+"/backfill")
	if err != nil {
		return err
	}
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	return doAdmin(cfg, req, v)
}

// cancelViaAdmin sends a backfill's cancel to the daemon's admin API.
func cancelViaAdmin(ctx context.Context, cfg *config.Config, env []string, id string) error {
	req, err := adminRequest(ctx, cfg, env, actionScope["cancel-backfill"], http.MethodDelete, "/api/backfills/"+neturl.PathEscape(id))
	if err != nil {
		return err
	}
	return doAdmin(cfg, req, nil)
}
