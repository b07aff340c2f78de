package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/scheduler"
)

// FreezeRequestJSON is the body of POST /api/freezes: the jobs' pattern
// (path.Match over job names; "" for every job), when the freeze ends (RFC
// 3339, or a duration from now such as "2h"), and why.
type FreezeRequestJSON struct {
	Jobs  string `json:"jobs"`
	Until string `json:"until"`
	Note  string `json:"note"`
}

// freezeStatus is the status of a freeze call's error: 400 for bad input,
// 404 for an unknown freeze, 502 for the store.
func freezeStatus(err error) int {
	switch {
	case errors.Is(err, scheduler.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, scheduler.ErrUnknownFreeze):
		return http.StatusNotFound
	}
	return http.StatusBadGateway
}

// freezeList is GET /api/freezes: the freezes that have not ended.
func (a *admin) freezeList(w http.ResponseWriter, r *http.Request) {
	fs, err := a.s.Freezes(r.Context())
	if err != nil {
		writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
		return
	}
	if fs == nil {
		fs = []scheduler.Freeze{}
	}
	writeJSON(w, http.StatusOK, fs)
}

// freezeAdd is POST /api/freezes (FreezeRequestJSON): 200 with the freeze
// made, 400 for bad input (nothing is changed).
func (a *admin) freezeAdd(w http.ResponseWriter, r *http.Request) {
	r, ok := a.allow(w, r, actionScope["freeze"], "freeze", "action", "freeze")
	if !ok {
		return
	}
	var req FreezeRequestJSON
	dec := json.NewDecoder(io.LimitReader(r.Body, 16<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the body is not a freeze ({\"jobs\", \"until\", \"note\"}): " + err.Error()})
		return
	}
	until, err := parseUntil(req.Until, time.Now())
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	f, err := a.s.Freeze(r.Context(), req.Jobs, until, req.Note)
	if err != nil {
		writeJSON(w, freezeStatus(err), map[string]string{"error": err.Error()})
		return
	}
	a.log.Info("admin request", "action", "freeze", "freeze", f.ID, "jobs", f.Jobs, "actor", actor(r.Context()), "remote", r.RemoteAddr)
	a.record(r, "freeze", freezeTarget(f), freezeNote(f))
	writeJSON(w, http.StatusOK, f)
}

// freezeTarget is the target of a freeze's audit entry: its id and the
// jobs it stops ("f3 (report-*)"), so that an unfreeze's entry (the id)
// finds it.
func freezeTarget(f scheduler.Freeze) string {
	return f.ID + " (" + f.Jobs + ")"
}

// freezeNote is the note of a freeze's audit entry: its note and its end,
// as a pause's (auditNote).
func freezeNote(f scheduler.Freeze) string {
	return auditNote(fleet.PauseInfo{Note: f.Note, Until: f.Until})
}

// freezeDelete is DELETE /api/freezes/{id}: 200, or 404 for an id that
// names no freeze (or one that has ended).
func (a *admin) freezeDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	r, ok := a.allow(w, r, actionScope["unfreeze"], "unfreeze", "action", "unfreeze", "freeze", id)
	if !ok {
		return
	}
	if err := a.s.Unfreeze(r.Context(), id); err != nil {
		writeJSON(w, freezeStatus(err), map[string]string{"error": err.Error()})
		return
	}
	a.log.Info("admin request", "action", "unfreeze", "freeze", id, "actor", actor(r.Context()), "remote", r.RemoteAddr)
	a.record(r, "unfreeze", id, "")
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "action": "unfreeze", "status": "ok"})
}

// freezeCommand is `scheduler freeze` and unfreezeCommand `scheduler
// unfreeze`: through Redis with a config that names one, else through the
// daemon's admin API, as pause.
func freezeCommand(cfgPath *string, o Options) *cobra.Command {
	var jobs, until, note string
	c := &cobra.Command{
		Use:   "freeze -until TIME|DURATION -note TEXT",
		Short: "Stop the ticks of jobs on every replica until a time",
		Long: `freeze stops the scheduled ticks of the jobs whose names match -jobs (a glob,
such as "report-*"; default every job) on every replica, from now until
-until (a time, RFC 3339, or a duration from now such as "2h"), and prints
the freeze's id. Each replica honours it within a second, and the ticks in it
are recorded in the history as excluded, with the note. The freeze is kept
in Redis and ends by itself at -until; unfreeze ID ends it sooner. Runs under
way go on to their end, and a frozen job can still be triggered.

With Redis configured the request goes through Redis; without Redis, or
without a config file, to the running daemon's admin API (POST /api/freezes,
with $LOCKCRON_TOKEN or the config's operate token).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(note) == "" {
				return usageError{errors.New("freeze: -note is missing: say why the jobs are frozen")}
			}
			at, err := parseUntil(until, time.Now())
			if err != nil {
				return usageError{fmt.Errorf("freeze: -%w", err)}
			}
			req := FreezeRequestJSON{Jobs: jobs, Until: at.UTC().Format(time.RFC3339Nano), Note: note}
			var f scheduler.Freeze
			err = storeOrDaemon(cmd, *cfgPath, o, "", func(ctx context.Context, cfg *config.Config) error {
				var err error
				f, err = freezeViaAdmin(ctx, cfg, o.Environ, req)
				return err
			}, func(ctx context.Context, s *scheduler.Scheduler, cfg *config.Config) error {
				var err error
				if f, err = s.Freeze(ctx, jobs, at, note); err != nil {
					if errors.Is(err, scheduler.ErrInvalid) {
						return err
					}
					return storeError(cfg, err)
				}
				auditCLI(ctx, cmd, cfg, "freeze", freezeTarget(f), freezeNote(f))
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s\n", f.ID)
			fmt.Fprintf(cmd.ErrOrStderr(), "freeze %s: jobs %q frozen until %s\n", f.ID, f.Jobs, f.Until.UTC().Format(time.RFC3339))
			return nil
		},
	}
	c.Flags().StringVar(&jobs, "jobs", "", "the jobs to freeze: a glob over job names (default every job)")
	c.Flags().StringVar(&until, "until", "", "when the freeze ends: a time (RFC 3339) or a duration from now")
	c.Flags().StringVar(&note, "note", "", "why the jobs are frozen (at most 1000 bytes)")
	return c
}

func unfreezeCommand(cfgPath *string, o Options) *cobra.Command {
	return &cobra.Command{
		Use:   "unfreeze ID",
		Short: "End a freeze on every replica",
		Long: `unfreeze ends the freeze ID (which freeze printed) at once: every replica runs
the jobs' ticks again within a second. Ticks that fell in the freeze are not
made up.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("unfreeze takes one freeze id, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			err := storeOrDaemon(cmd, *cfgPath, o, "", func(ctx context.Context, cfg *config.Config) error {
				return unfreezeViaAdmin(ctx, cfg, o.Environ, id)
			}, func(ctx context.Context, s *scheduler.Scheduler, cfg *config.Config) error {
				if err := s.Unfreeze(ctx, id); err != nil {
					if errors.Is(err, scheduler.ErrUnknownFreeze) {
						return fmt.Errorf("unknown freeze %q: no such freeze, or it has ended", id)
					}
					return storeError(cfg, err)
				}
				auditCLI(ctx, cmd, cfg, "unfreeze", id, "")
				return nil
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: unfrozen\n", id)
			return nil
		},
	}
}

// freezeViaAdmin sends a freeze to the daemon's admin API.
func freezeViaAdmin(ctx context.Context, cfg *config.Config, env []string, fr FreezeRequestJSON) (scheduler.Freeze, error) {
	var f scheduler.Freeze
	body, _ := json.Marshal(fr)
	req, err := adminRequest(ctx, cfg, env, actionScope["freeze"], http.MethodPost, "/api/freezes")
	if err != nil {
		return f, err
	}
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	req.Header.Set("Content-Type", "application/json")
	return f, doAdmin(cfg, req, &f)
}

// unfreezeViaAdmin sends an unfreeze to the daemon's admin API.
func unfreezeViaAdmin(ctx context.Context, cfg *config.Config, env []string, id string) error {
	req, err := adminRequest(ctx, cfg, env, actionScope["unfreeze"], http.MethodDelete, "/api/freezes/"+neturl.PathEscape(id))
	if err != nil {
		return err
	}
	return doAdmin(cfg, req, nil)
}

// doAdmin sends req and decodes a 200's answer into v (if not nil); any
// other status is an error with the answer's message.
func doAdmin(cfg *config.Config, req *http.Request, v any) error {
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return daemonUnreachable(cfg, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var body struct{ Error string }
		_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body)
		return fmt.Errorf("admin API at %s: %s %s: %s: %s", cfg.Admin.Listen, req.Method, req.URL.Path, resp.Status, body.Error)
	}
	if v == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("admin API at %s: %s %s: the answer does not decode: %w", cfg.Admin.Listen, req.Method, req.URL.Path, err)
	}
	return nil
}

// printSkipped lists, after the jobs' table, the upcoming ticks that will
// not run (NEXT lists those that will), with why; nothing if there are
// none.
func printSkipped(w io.Writer, views []JobJSON) error {
	var rows []string
	for _, v := range views {
		for _, s := range v.Skipped {
			t := s.Tick
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\n", v.Name, fmtTime(&t), printable(s.Reason)))
		}
	}
	if len(rows) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nJOB\tSKIPPED TICK\tWHY")
	for _, r := range rows {
		fmt.Fprint(tw, r)
	}
	return tw.Flush()
}
