package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// maxReloadAnswer bounds the answer of POST /api/reload that the command
// reads.
const maxReloadAnswer = 1 << 20

// reloadCommand is `scheduler reload`: the running daemon reads its config
// file again, through its admin API.
func reloadCommand(cfgPath *string, o Options) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "reload",
		Short: "Make the running daemon read its config file again",
		Long: `reload asks the daemon that serves admin.listen (with $LOCKCRON_TOKEN, else the
config's admin token, if any) to read its config file again, as SIGHUP does, and
prints what it did: the jobs added, removed, changed and left alone, the
settings that need a restart (they keep their running values), and the changes
it refused.

The file is checked here first: if it is not valid, reload prints every problem
with its place, does not ask the daemon, and exits 1; the daemon keeps its jobs.
It exits 1 too if the daemon found the file invalid or refused a change.

Without a config file (no -config, no LOCKCRON_CONFIG, no lockcron.hcl here) it
asks the daemon at $LOCKCRON_ADMIN__LISTEN (default 127.0.0.1:9090), which
checks its file itself.

Each replica reloads on its own: run reload (or send SIGHUP) on every replica.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, noFile := daemonConfig(*cfgPath, o)
			if !noFile {
				var err error
				// The daemon reads the secrets from its own environment:
				// a variable unset here is a warning (ForReading).
				cfg, err = load(*cfgPath, o, config.ForReading())
				var cerrs config.Errors
				if errors.As(err, &cerrs) {
					fmt.Fprintln(cmd.ErrOrStderr(), cerrs.Error())
					return fmt.Errorf("%d problem(s) in the config: the daemon was not asked to reload, and keeps its jobs", len(cerrs))
				}
				if err != nil {
					return err
				}
			}
			ctx, cancel := commandContext(cmd)
			defer cancel()
			res, err := reloadViaAdmin(ctx, cfg, o.Environ)
			if err != nil {
				return err
			}
			if asJSON {
				if err := printJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
			} else {
				printReload(cmd.OutOrStdout(), cmd.ErrOrStderr(), res)
			}
			switch res.Status {
			case ReloadInvalid:
				return fmt.Errorf("the daemon found %s not valid (%d problem(s)): it keeps its jobs", res.Path, len(res.Errors))
			case ReloadPartial:
				return fmt.Errorf("the daemon reloaded %s, but refused %d change(s): those jobs stay as they ran", res.Path, len(res.Errors))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the daemon's answer as JSON")
	return c
}

// adminRequest is a request to the admin API of the daemon that cfg
// configures, for a call that needs scope need, with the token
// clientToken chooses.
func adminRequest(ctx context.Context, cfg *config.Config, env []string, need config.Scope, method, path string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+cfg.Admin.Listen+path, nil)
	if err != nil {
		return nil, err
	}
	if tok := clientToken(cfg, env, need); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

// envToken is the environment variable whose value the commands send to
// the admin API as their bearer token, before any token of the config.
const envToken = "LOCKCRON_TOKEN"

// clientToken is the token a command sends for a call that needs scope
// need: $LOCKCRON_TOKEN if it is set, but not in an exec job's
// environment (LOCKCRON_JOB set), where LOCKCRON_TOKEN is the run's
// fencing token; else, of the config's tokens whose variable is set
// here, the one of the smallest scope that suffices (a read token for a
// read, an operate token for a trigger), or if none suffices the one of
// the widest, so that the daemon's 403 says what is needed; "" without
// any.
func clientToken(cfg *config.Config, env []string, need config.Scope) string {
	if tok := getenv(env, envToken); tok != "" && getenv(env, "LOCKCRON_JOB") == "" {
		return tok
	}
	var best *config.Token
	for i := range cfg.Admin.Tokens {
		t := &cfg.Admin.Tokens[i]
		switch {
		case !t.Value.IsSet():
		case best == nil,
			t.Scope >= need && (best.Scope < need || t.Scope < best.Scope),
			best.Scope < need && t.Scope > best.Scope:
			best = t
		}
	}
	if best == nil {
		return ""
	}
	return best.Value.Value()
}

// reloadViaAdmin asks the daemon to reload its config: its answer, or an
// error if it does not answer or refuses the request.
func reloadViaAdmin(ctx context.Context, cfg *config.Config, env []string) (ReloadJSON, error) {
	req, err := adminRequest(ctx, cfg, env, actionScope["reload"], http.MethodPost, "/api/reload")
	if err != nil {
		return ReloadJSON{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ReloadJSON{}, daemonUnreachable(cfg, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReloadAnswer))
	if err != nil {
		return ReloadJSON{}, fmt.Errorf("admin API at %s: %w", cfg.Admin.Listen, err)
	}
	if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnprocessableEntity {
		var res ReloadJSON
		if err := json.Unmarshal(body, &res); err == nil && res.Status != "" {
			return res, nil
		}
	}
	var e struct{ Error string }
	_ = json.Unmarshal(body, &e)
	if e.Error == "" {
		e.Error = strings.TrimSpace(string(body))
	}
	return ReloadJSON{}, fmt.Errorf("admin API at %s: %s: %s", cfg.Admin.Listen, resp.Status, e.Error)
}

// printReload prints a reload's result: what changed on out, the problems
// on errOut.
func printReload(out, errOut io.Writer, res ReloadJSON) {
	if res.Status == ReloadInvalid {
		for _, e := range res.Errors {
			fmt.Fprintln(errOut, e.Error)
		}
		return
	}
	digest := res.ConfigDigest
	if len(digest) > 12 {
		digest = digest[:12]
	}
	fmt.Fprintf(out, "%s: reloaded (sha256 %s): %d added, %d removed, %d changed, %d unchanged\n",
		res.Path, digest, len(res.Added), len(res.Removed), len(res.Changed), len(res.Unchanged))
	for _, l := range []struct {
		what  string
		names []string
	}{{"added", res.Added}, {"removed", res.Removed}, {"changed", res.Changed}} {
		if len(l.names) > 0 {
			fmt.Fprintf(out, "  %-8s %s\n", l.what+":", strings.Join(l.names, ", "))
		}
	}
	if len(res.RestartNeeded) > 0 {
		fmt.Fprintf(out, "needs a restart (the running values are kept): %s\n", strings.Join(res.RestartNeeded, ", "))
	}
	for _, e := range res.Errors {
		fmt.Fprintf(errOut, "job %q (%s) not changed: %s\n", e.Job, e.Change, e.Error)
	}
}
