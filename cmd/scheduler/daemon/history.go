package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// historyCommand is `scheduler history JOB`: the job's run history, from
// Redis (or, without Redis, from the running daemon's admin API).
func historyCommand(cfgPath *string, o Options) *cobra.Command {
	var (
		limit  int
		before string
		asJSON bool
	)
	c := &cobra.Command{
		Use:   "history JOB",
		Short: "List a job's latest runs: tick, replica, duration, outcome, error",
		Long: `history lists JOB's latest runs across the whole fleet, newest first: the tick
(or "manual #N" for a triggered run, with its parameters), the replica that ran it, the attempt,
when it started, how long it took, its outcome, its fencing token and the start
of its error's first line. Ticks not run (skipped_busy, paused, excluded,
deadline_missed) are recorded too, with the reason in the last column;
consecutive ones of one cause are one row, its ticks a range (first..last) and
its outcome followed by their count (skipped_busy ×5).
-json prints every field, the whole error tail and the trace
id included. -before ID lists the runs older than the run ID (the first column),
to page back.

The history is kept in Redis beside the job's ledger: by default the latest
100 runs, none older than 30 days (the config's history block). Without Redis
it is read from the running daemon's admin API (admin.listen); so it is
without a config file, from the daemon at $LOCKCRON_ADMIN__LISTEN (default
127.0.0.1:9090).`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("history takes one job name, got %d arguments", len(args))}
			}
			if limit < 1 || limit > maxRuns {
				return usageError{fmt.Errorf("-limit %d: give a number from 1 to %d", limit, maxRuns)}
			}
			if before != "" && !fleet.ValidEntryID(before) {
				return usageError{fmt.Errorf("-before %q: give a run's ID, as the first column shows it (such as 1767225600000-0)", before)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			job := args[0]
			show := func(runs []scheduler.Run) error {
				if asJSON {
					if runs == nil {
						runs = []scheduler.Run{}
					}
					return printJSON(cmd.OutOrStdout(), runs)
				}
				if len(runs) == 0 {
					if before != "" {
						fmt.Fprintf(cmd.OutOrStdout(), "%s: no runs older than %s\n", job, before)
					} else {
						fmt.Fprintf(cmd.OutOrStdout(), "%s: no runs recorded yet\n", job)
					}
					return nil
				}
				return printRuns(cmd.OutOrStdout(), runs)
			}
			if cfg, ok := daemonConfig(*cfgPath, o); ok {
				ctx, cancel := commandContext(cmd)
				defer cancel()
				runs, err := historyViaAdmin(ctx, cfg, o.Environ, job, limit, before)
				if err != nil {
					return err
				}
				return show(runs)
			}
			return withScheduler(cmd.Context(), *cfgPath, o, job, func(ctx context.Context, s *scheduler.Scheduler, _ *lock.Client, cfg *config.Config) error {
				var runs []scheduler.Run
				var err error
				if cfg.UsesRedis() {
					runs, err = s.History(ctx, job, limit, before)
					switch {
					case errors.Is(err, scheduler.ErrUnknownJob):
						return unknownJob(cfg, job)
					case err != nil:
						return storeError(cfg, err)
					}
				} else if runs, err = historyViaAdmin(ctx, cfg, o.Environ, job, limit, before); err != nil {
					return err
				}
				return show(runs)
			})
		},
	}
	c.Flags().IntVarP(&limit, "limit", "n", defaultRuns, fmt.Sprintf("how many runs, 1 to %d", maxRuns))
	c.Flags().StringVar(&before, "before", "", "only runs older than this run ID (to page back)")
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON, with every field")
	return c
}

// historyViaAdmin reads a job's runs from the running daemon's admin API,
// for a config without Redis or a command without a config file.
func historyViaAdmin(ctx context.Context, cfg *config.Config, env []string, job string, limit int, before string) ([]scheduler.Run, error) {
	q := neturl.Values{"limit": {strconv.Itoa(limit)}}
	if before != "" {
		q.Set("before", before)
	}
	req, err := adminRequest(ctx, cfg, env, config.ScopeRead, http.MethodGet, "/api/jobs/"+neturl.PathEscape(job)+"/runs?"+q.Encode())
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, daemonUnreachable(cfg, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body struct{ Error string }
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body)
		switch {
		case resp.StatusCode == http.StatusNotFound && cfg.Path != "":
			return nil, unknownJob(cfg, job)
		case resp.StatusCode == http.StatusNotFound && body.Error != "":
			return nil, errors.New(body.Error) // the daemon's: it names its jobs
		}
		return nil, fmt.Errorf("admin API at %s: %s: %s", cfg.Admin.Listen, resp.Status, body.Error)
	}
	var runs []scheduler.Run
	if err := json.NewDecoder(resp.Body).Decode(&runs); err != nil {
		return nil, fmt.Errorf("admin API at %s: the runs do not decode: %w", cfg.Admin.Listen, err)
	}
	return runs, nil
}

// printRuns prints runs as a table, times in UTC.
func printRuns(w io.Writer, runs []scheduler.Run) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTICK\tREPLICA\tATTEMPT\tSTARTED\tDURATION\tOUTCOME\tTOKEN\tERROR / REASON")
	for _, r := range runs {
		tick := r.Tick.UTC().Format(time.RFC3339)
		if r.Trigger > 0 {
			tick = fmt.Sprintf("manual #%d", r.Trigger) + paramsText(r.Params)
		} else if !r.First.IsZero() {
			tick = tickRange(r.First, r.Tick)
		}
		outcome := string(r.Outcome)
		switch {
		case r.Missed > 0:
			outcome = fmt.Sprintf("%s (%d)", outcome, r.Missed)
		case r.Count > 1:
			outcome = fmt.Sprintf("%s ×%d", outcome, r.Count)
		}
		text := errorLine(r.Error)
		if text == "" {
			text = r.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, tick, dash(r.Replica), num(int64(r.Attempt)),
			startedAt(r.Start), runDuration(r), outcome, num(r.Token), text)
	}
	return tw.Flush()
}

// tickRange is the range of ticks of a coalesced entry (Run.First to
// Run.Tick), in UTC: the last without its date when it is the first's.
func tickRange(first, last time.Time) string {
	first, last = first.UTC(), last.UTC()
	layout := time.RFC3339
	if first.Format(time.DateOnly) == last.Format(time.DateOnly) {
		layout = "15:04:05Z07:00"
	}
	return first.Format(time.RFC3339) + ".." + last.Format(layout)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func num(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func startedAt(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func runDuration(r scheduler.Run) string {
	if r.Start.IsZero() {
		return "-"
	}
	switch d := r.Duration; {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(10 * time.Millisecond).String()
	}
}

// errorLine is the first non-empty line of an error tail, cut to 80
// characters for a table (-json has it whole): the start of a message
// says what failed (`jobs: exec "backup.sh": exit status 3; stderr: ...`).
func errorLine(e string) string {
	for l := range strings.Lines(e) {
		if l = strings.TrimSpace(l); l != "" {
			e = l
			break
		}
	}
	e = strings.TrimSpace(e)
	if r := []rune(e); len(r) > 80 {
		e = string(r[:79]) + "…"
	}
	return e
}
