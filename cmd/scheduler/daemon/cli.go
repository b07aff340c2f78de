package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	neturl "net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// Exit codes of the scheduler command.
const (
	ExitOK    = 0 // success; for run, a clean stop
	ExitError = 1 // the command failed: an invalid config, an unreachable store, a stop cut short
	ExitUsage = 2 // a bad command line: unknown command or flag, missing argument
)

// commandTimeout bounds the store calls of jobs, locks, trigger, pause and
// resume, once Redis has answered their first PING (which redis.timeout
// bounds).
const commandTimeout = 10 * time.Second

// usageError marks a bad command line.
type usageError struct{ error }

// Main runs the scheduler command with args (without the program's name)
// and returns its exit code. A program that registers Go job funcs calls it
// with its registry, so that the same commands see its func jobs; and,
// since the config may hold exec jobs, it first lets execjob.Supervise
// turn the process into an exec run's supervisor when it was started as
// one:
//
//	func main() {
//		if code, ok := execjob.Supervise(); ok {
//			os.Exit(code)
//		}
//		os.Exit(daemon.Main(os.Args[1:], daemon.Options{Registry: reg}))
//	}
//
// run stops gracefully on the first SIGTERM or SIGINT, and at once on a
// second one; SIGHUP makes it reload its config file.
func Main(args []string, o Options) int {
	o.defaults()
	root := Command(o)
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd(args...)
	plainBools(root)
	root.SetArgs(longFlags(root, args))
	root.SetOut(o.Stdout)
	root.SetErr(o.Stderr)
	err := root.Execute()
	var ue usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue), strings.HasPrefix(err.Error(), "unknown command"):
		fmt.Fprintf(o.Stderr, "scheduler: %v\nRun 'scheduler --help' for usage.\n", err)
		return ExitUsage
	}
	var cerrs config.Errors
	if errors.As(err, &cerrs) {
		_ = cerrs.WriteText(o.Stderr)
		fmt.Fprintf(o.Stderr, "scheduler: %d problem(s) in the config\n", len(cerrs))
		return ExitError
	}
	// Errors of the library carry their package's name ("scheduler: ...",
	// "lock: ..."): one "scheduler:" in front is enough.
	fmt.Fprintf(o.Stderr, "scheduler: %s\n", strings.TrimPrefix(err.Error(), "scheduler: "))
	return ExitError
}

// Command returns the scheduler command tree, for programs that add
// commands of their own.
func Command(o Options) *cobra.Command {
	o.defaults()
	var cfgPath string
	root := &cobra.Command{
		Use:   "scheduler",
		Short: "Cron jobs that run once across a fleet",
		Long: `scheduler runs cron jobs once across every replica that shares a Redis:
each tick takes the job's lock and its tick ledger, so that one replica runs it,
and a replica that stops hands its running tick to another.

Exit codes: 0 success (for run: a clean stop), 1 failure (an invalid config,
an unreachable store, a stop cut short), 2 a bad command line.

Flags may be written -config or --config.

The config file is -config FILE, else $LOCKCRON_CONFIG, else lockcron.hcl in
the working directory. With none of these, jobs, locks, history, audit, replicas,
trigger, pause, resume and reload ask the running daemon at $LOCKCRON_ADMIN__LISTEN (default
127.0.0.1:9090, where make run serves it).

Commands that call the admin API send $LOCKCRON_TOKEN as their bearer token if
it is set; else a token of the config whose variable is set here (the one of
the smallest scope that the call needs), or $LOCKCRON_ADMIN__TOKEN without a
config file.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVarP(&cfgPath, "config", "c", "",
		"the HCL config file (default $LOCKCRON_CONFIG, else lockcron.hcl)")
	root.SetFlagErrorFunc(flagError)

	var asJSON bool
	jsonFlag := func(c *cobra.Command) {
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	}
	root.AddCommand(
		&cobra.Command{
			Use:   "run",
			Short: "Run the daemon: the jobs of the config, the admin endpoint",
			Long: `run runs the jobs of the config until SIGTERM or SIGINT, then stops gracefully:
running jobs are cancelled, their ticks handed to another replica, their locks
released; it waits for them up to shutdown_timeout. A second signal stops it at
once. With no redis block and no REDIS_URL it runs on the in-memory backend.

SIGHUP makes it read the config file again (so do POST /api/reload, scheduler
reload, and a change of the file with watch = true): jobs added, removed or
changed in the file are applied; a file that is not valid is logged and changes
nothing; other settings need a restart.

At start-up it serves /healthz at once, then waits for Redis, retrying, for up
to redis.connect_timeout (default 30s): /readyz is 503 meanwhile, and if Redis
does not answer in time it exits 1.`,
			Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				ctx, force, reload, stop := signals(cmd.Context())
				defer stop()
				o := o
				o.Force, o.Reload = force, reload
				return Run(ctx, cfgPath, o)
			},
		},
		&cobra.Command{
			Use:   "validate",
			Short: "Check the config: every error with its place, or a summary of the jobs",
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cfg, err := load(cfgPath, o, config.ForReading())
				if err != nil {
					return err
				}
				if err := build(cfg, o); err != nil {
					return err
				}
				return printSummary(cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg)
			},
		},
		withFlags(&cobra.Command{
			Use:   "jobs",
			Short: "List the jobs: next three fire times, last outcome, current holder",
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				show := func(views []JobJSON, cfg *config.Config) error {
					printViews := printJobs
					if asJSON {
						printViews = func(w io.Writer, v []JobJSON) error { return printJSON(w, v) }
					}
					if err := printViews(cmd.OutOrStdout(), views); err != nil {
						return err
					}
					return unreadLedgers(views, cfg)
				}
				if cfg, ok := daemonConfig(cfgPath, o); ok {
					ctx, cancel := commandContext(cmd)
					defer cancel()
					var views []JobJSON
					if err := getViaAdmin(ctx, cfg, o.Environ, "/api/jobs", &views); err != nil {
						return err
					}
					return show(views, cfg)
				}
				return withScheduler(cmd.Context(), cfgPath, o, "", func(ctx context.Context, s *scheduler.Scheduler, _ *lock.Client, cfg *config.Config) error {
					if !cfg.UsesRedis() {
						// The in-memory backend keeps the ledgers inside
						// the daemon: ask it. With no daemon listening, the
						// config's jobs and their next ticks, without state.
						var views []JobJSON
						err := getViaAdmin(ctx, cfg, o.Environ, "/api/jobs", &views)
						if errors.Is(err, syscall.ECONNREFUSED) {
							fmt.Fprintf(cmd.ErrOrStderr(), "scheduler: no daemon answers at %s: the config's jobs, without their last outcomes and holders\n", cfg.Admin.Listen)
							return show(JobsJSON(s.Jobs(ctx)), cfg)
						}
						if err != nil {
							return err
						}
						return show(views, cfg)
					}
					return show(JobsJSON(s.Jobs(ctx)), cfg)
				})
			},
		}, jsonFlag),
		withFlags(&cobra.Command{
			Use:   "locks",
			Short: "List the locks in the store: holders, holds, TTL, token, waiters",
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				show := func(ls []LockJSON) error {
					if asJSON {
						return printJSON(cmd.OutOrStdout(), ls)
					}
					return printLocks(cmd.OutOrStdout(), ls)
				}
				if cfg, ok := daemonConfig(cfgPath, o); ok {
					ctx, cancel := commandContext(cmd)
					defer cancel()
					var ls []LockJSON
					if err := getViaAdmin(ctx, cfg, o.Environ, "/api/locks", &ls); err != nil {
						return err
					}
					return show(ls)
				}
				return withScheduler(cmd.Context(), cfgPath, o, "", func(ctx context.Context, _ *scheduler.Scheduler, locks *lock.Client, cfg *config.Config) error {
					if !cfg.UsesRedis() {
						// The in-memory backend keeps the locks inside the
						// daemon: ask it.
						var ls []LockJSON
						if err := getViaAdmin(ctx, cfg, o.Environ, "/api/locks", &ls); err != nil {
							return err
						}
						return show(ls)
					}
					ls, err := locks.Locks(ctx)
					if err != nil {
						return storeError(cfg, err)
					}
					return show(LocksJSON(ls))
				})
			},
		}, jsonFlag),
		historyCommand(&cfgPath, o),
		controlCommand("trigger", "Run a job once now, on one replica of the fleet", `trigger asks the fleet to run JOB once now, outside its schedule. Every
running replica hears the request; the run is still lock-guarded, so one
replica runs it, with a tick of its own (LOCKCRON_TICK differs from any
scheduled run's). It says how many replicas heard it, and fails when none
did (the request of a job with params is kept all the same, and runs before
the job's next trigger that a replica hears). A trigger of a paused job
runs it.`, &cfgPath, o),
		controlCommand("pause", "Pause a job on every replica, with a note and an optional end", `pause stops JOB's scheduled ticks on every replica, until resume or until
-until: each replica hears it at once, and the pause is kept in Redis, so
replicas that start later see it too. -note says why (required, at most 1000
bytes); -until ends the pause by itself, on every replica, at a time in RFC
3339 (2026-12-01T09:00:00Z) or after a duration from now (2h30m). Redis keeps
who paused (the OS user, as cli:alice, or the admin token's name), when, the
note and the end; jobs shows them. A run under way goes on to its end. A
paused job can still be triggered.`, &cfgPath, o),
		controlCommand("resume", "Resume a paused job on every replica", `resume lets JOB's scheduled ticks run again on every replica after a pause,
and clears the pause's note and end and the job's failed runs in a row
(pause_after_failures). Ticks that fell due while it was paused are not made
up.`, &cfgPath, o),
		freezeCommand(&cfgPath, o),
		unfreezeCommand(&cfgPath, o),
		reloadCommand(&cfgPath, o),
		auditCommand(&cfgPath, o),
		replicasCommand(&cfgPath, o),
		backfillCommand(&cfgPath, o),
		&cobra.Command{
			Use:   "version",
			Short: "Print the version of scheduler",
			Args:  noArgs,
			Run: func(cmd *cobra.Command, _ []string) {
				fmt.Fprintln(cmd.OutOrStdout(), "scheduler "+Version())
			},
		},
	)
	root.Version = Version()
	root.SetVersionTemplate("scheduler {{.Version}}\n")
	return root
}

func withFlags(c *cobra.Command, fs ...func(*cobra.Command)) *cobra.Command {
	for _, f := range fs {
		f(c)
	}
	return c
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", args)}
	}
	return nil
}

// defaultConfigFile is the config file of a command that neither -config
// nor LOCKCRON_CONFIG names one for.
const defaultConfigFile = "lockcron.hcl"

func defaultConfigPath(env []string) string {
	if v := getenv(env, "LOCKCRON_CONFIG"); v != "" {
		return v
	}
	return defaultConfigFile
}

// getenv is the value of the variable name in env ("NAME=value" strings),
// or "".
func getenv(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// daemonConfig returns the config of a command given no config file, and
// whether it was given none: no -config, no LOCKCRON_CONFIG, and no
// lockcron.hcl in the working directory. Such a command (jobs, locks,
// history, trigger, pause, resume, reload) asks the running daemon
// instead, as nomad's commands ask the agent at NOMAD_ADDR: at
// LOCKCRON_ADMIN__LISTEN,
// else admin.listen's default (where make run serves), with
// LOCKCRON_TOKEN, else LOCKCRON_ADMIN__TOKEN, if set (clientToken), the
// variables that set admin.listen and admin.token. The config holds that
// listener and token only: no Path, no jobs, no Redis.
func daemonConfig(path string, o Options) (*config.Config, bool) {
	if path != "" || getenv(o.Environ, "LOCKCRON_CONFIG") != "" {
		return nil, false
	}
	if _, err := os.Stat(defaultConfigFile); !errors.Is(err, fs.ErrNotExist) {
		return nil, false
	}
	listen := getenv(o.Environ, config.EnvPrefix+"ADMIN__LISTEN")
	if listen == "" {
		listen = config.DefaultAdminListen
	}
	adm := config.Admin{Listen: listen, Token: config.NewSecret(getenv(o.Environ, config.EnvPrefix+"ADMIN__TOKEN"))}
	if adm.Token.IsSet() {
		adm.Tokens = []config.Token{{Name: config.LegacyTokenName, Scope: config.ScopeAdmin, Value: adm.Token}}
	}
	return &config.Config{Admin: adm}, true
}

// getViaAdmin decodes the daemon's answer to GET path on its admin API
// into v.
func getViaAdmin(ctx context.Context, cfg *config.Config, env []string, path string, v any) error {
	req, err := adminRequest(ctx, cfg, env, config.ScopeRead, http.MethodGet, path)
	if err != nil {
		return err
	}
	return doAdmin(cfg, req, v)
}

// daemonUnreachable is the error of a command whose request found no
// daemon on the admin listener of cfg.
func daemonUnreachable(cfg *config.Config, err error) error {
	switch {
	case cfg.Path == "": // daemonConfig's
		return fmt.Errorf("no config file (-config FILE, LOCKCRON_CONFIG, or %s here), and no daemon answers at %s (LOCKCRON_ADMIN__LISTEN, default %s): start one (make run), or name its config: %w",
			defaultConfigFile, cfg.Admin.Listen, config.DefaultAdminListen, err)
	case !cfg.UsesRedis():
		return fmt.Errorf("no redis configured, and the daemon's admin API at %s does not answer: %w", cfg.Admin.Listen, err)
	}
	return fmt.Errorf("the daemon's admin API at %s does not answer: %w", cfg.Admin.Listen, err)
}

// commandContext is the context of a command's requests, bounded by
// commandTimeout.
func commandContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return context.WithTimeout(ctx, commandTimeout)
}

// signals returns a ctx that ends at the first SIGTERM or SIGINT, a
// channel closed at the second, a channel that receives after each SIGHUP
// (SIGHUPs that come while one waits to be taken count once), and a func
// that stops listening (and waits for the listener to return).
func signals(parent context.Context) (context.Context, <-chan struct{}, <-chan struct{}, func()) {
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	force := make(chan struct{})
	reload := make(chan struct{}, 1)
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for n := 0; ; {
			var sig os.Signal
			select {
			case sig = <-ch:
			case <-stop:
				return
			}
			if sig == syscall.SIGHUP {
				select {
				case reload <- struct{}{}:
				default: // one is waiting already
				}
				continue
			}
			if n++; n == 1 {
				cancel()
				continue
			}
			close(force)
			return
		}
	})
	return ctx, force, reload, func() {
		signal.Stop(ch)
		close(stop)
		wg.Wait()
		cancel()
	}
}

// withScheduler loads the config, opens the lock store and builds the
// scheduler (without running it) for one command, which needs none of
// the secrets that only run uses (config.ForReading); job, if not "", the job the
// command names: a name the config does not have is an error (unknownJob)
// before Redis is asked anything.
func withScheduler(parent context.Context, path string, o Options, job string, f func(context.Context, *scheduler.Scheduler, *lock.Client, *config.Config) error) error {
	cfg, err := load(path, o, config.ForReading())
	if err != nil {
		return err
	}
	if job != "" && !slices.ContainsFunc(cfg.Jobs, func(j config.Job) bool { return j.Name == job }) {
		return unknownJob(cfg, job)
	}
	// A command's own logs are only its warnings; the daemon's are its own.
	log := newLogger(cfg, o.Stderr)
	if log.GetLevel() < hclog.Warn {
		log.SetLevel(hclog.Warn)
	}
	logRedisTo(log, cfg.Redact)
	s, locks, dials, closeAll, err := openScheduler(cfg, o, log)
	if err != nil {
		return err
	}
	defer func() { _ = closeAll() }()
	if parent == nil {
		parent = context.Background()
	}
	if cfg.UsesRedis() {
		if err := pingRedis(parent, locks, dials, cfg.Redis); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(parent, commandTimeout)
	defer cancel()
	return f(ctx, s, locks, cfg)
}

// build makes the lock client and the scheduler of cfg as run does,
// without connecting to Redis or running anything, so that validate
// refuses what run would refuse.
func build(cfg *config.Config, o Options) error {
	_, _, _, closeAll, err := openScheduler(cfg, o, hclog.NewNullLogger())
	if err != nil {
		return err
	}
	return closeAll()
}

// openScheduler makes the lock client and the scheduler of cfg for a
// command, without running them; closeAll closes the scheduler, the lock
// client and the Redis client, in that order, and returns the scheduler's
// Close error.
func openScheduler(cfg *config.Config, o Options, log hclog.Logger) (s *scheduler.Scheduler, locks *lock.Client, dials *dialLog, closeAll func() error, err error) {
	locks, dials, closeRedis, err := newLocks(cfg, log)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	s, err = newScheduler(cfg, locks, o.Registry, log)
	if err != nil {
		_ = locks.Close()
		closeRedis()
		return nil, nil, nil, nil, err
	}
	return s, locks, dials, func() error {
		err := s.Close()
		_ = locks.Close()
		closeRedis()
		return err
	}, nil
}

// pingRedis checks that Redis answers a PING within redis.timeout, so that
// a command against an unreachable Redis fails at once (the daemon waits
// for it instead, see connect): a refused connection ends it at the first
// dial, with the dial's error. Its error names Redis.
func pingRedis(ctx context.Context, locks *lock.Client, dials *dialLog, r *config.Redis) error {
	if err := dials.ping(ctx, locks, r.Timeout); err != nil {
		var refused redis.Error // an error reply: Redis answered, and said no (a wrong password, say)
		if errors.As(err, &refused) {
			return fmt.Errorf("redis at %s refused us: %w", r.Describe(), err)
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("redis at %s does not answer (redis.timeout %v): %w", r.Describe(), r.Timeout, err)
		}
		return fmt.Errorf("redis at %s is unreachable: %w", r.Describe(), err)
	}
	return nil
}

// storeError names the store in an error of a store call of a command.
func storeError(cfg *config.Config, err error) error {
	if !cfg.UsesRedis() {
		return err
	}
	return fmt.Errorf("redis at %s: %w", cfg.Redis.Describe(), err)
}

// unreadLedgers is the error of `scheduler jobs` when some jobs' ledgers
// could not be read (the table shows each one's error), or nil.
func unreadLedgers(views []JobJSON, cfg *config.Config) error {
	var bad []string
	first := ""
	for _, v := range views {
		if v.Error != "" {
			bad = append(bad, v.Name)
			if first == "" {
				first = v.Error
			}
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return storeError(cfg, fmt.Errorf("the ledger of %d of %d job(s) could not be read (%s): %s", len(bad), len(views), strings.Join(bad, ", "), first))
}

// controlCommand is trigger, pause or resume: through Redis to the whole
// fleet; without Redis, through the running daemon's admin API.
func controlCommand(action, short, long string, cfgPath *string, o Options) *cobra.Command {
	var note, until string
	var pause fleet.PauseInfo // pause: checked by Args
	var paramFlags []string
	var params map[string]string // trigger: checked by Args
	use := action + " JOB"
	if action == "pause" {
		use += " -note TEXT [-until TIME|DURATION]"
	}
	if action == "trigger" {
		use += " [-param key=value ...]"
	}
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Long: long + `

With Redis configured the request goes through Redis to every replica.
Without Redis, or without a config file, it goes to the running daemon's admin
API (admin.listen, with $LOCKCRON_TOKEN or the config's operate token), which
passes it on to the fleet.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("%s takes one job name, got %d arguments", action, len(args))}
			}
			if action == "pause" {
				var err error
				if pause, err = (PauseRequest{Note: note, Until: until}).info(cliActor(), time.Now()); err != nil {
					return usageError{fmt.Errorf("-%w", err)}
				}
			}
			var err error
			if params, err = parseParams(paramFlags); err != nil {
				return usageError{fmt.Errorf("-%w", err)}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			job := args[0]
			// heard: how many replicas heard a trigger (onCluster: of
			// those subscribed on the Cluster node it reached).
			var heard int64
			var onCluster bool
			done := func() {
				switch {
				case action == "trigger" && onCluster:
					fmt.Fprintf(cmd.OutOrStdout(), "%s: triggered; %s on the Cluster node it reached heard it (Redis Cluster counts no others), one runs it\n", job, replicas(heard))
					return
				case action == "trigger":
					fmt.Fprintf(cmd.OutOrStdout(), "%s: triggered; %s heard it, one runs it\n", job, replicas(heard))
					return
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", job, map[string]string{"pause": "paused", "resume": "resumed"}[action])
			}
			err := storeOrDaemon(cmd, *cfgPath, o, job, func(ctx context.Context, cfg *config.Config) error {
				var err error
				heard, err = viaAdmin(ctx, cfg, o.Environ, job, action, note, until, params)
				return err
			}, func(ctx context.Context, s *scheduler.Scheduler, cfg *config.Config) error {
				var err error
				switch action {
				case "trigger":
					heard, err = s.TriggerParams(ctx, job, params)
					// On a Cluster, PUBLISH counts only the replicas
					// subscribed on the node it reached (the message
					// reaches every node): none there is no proof.
					cluster := len(cfg.Redis.Addrs) > 1 && cfg.Redis.MasterName == ""
					if err == nil && heard == 0 && !cluster {
						err = fmt.Errorf("trigger of %q: no replica heard it (is the fleet running, on this redis and key prefix?)%s", job, unheardNote(cfg, job))
					}
					onCluster = cluster
				case "pause":
					err = s.Pause(ctx, job, true, pause)
				case "resume":
					err = s.Pause(ctx, job, false, fleet.PauseInfo{})
				}
				switch {
				case errors.Is(err, scheduler.ErrUnknownJob):
					err = unknownJob(cfg, job)
				case errors.Is(err, lock.ErrInvalid), errors.Is(err, scheduler.ErrInvalid):
					// An until that Redis's clock has passed, or
					// parameters the job does not take.
				case err != nil:
					err = storeError(cfg, err)
				case action == "trigger":
					auditCLI(ctx, cmd, cfg, action, job, paramsNote(params))
				default:
					auditCLI(ctx, cmd, cfg, action, job, auditNote(pause))
				}
				return err
			})
			if err != nil {
				return err
			}
			done()
			return nil
		},
	}
	if action == "trigger" {
		c.Flags().StringArrayVar(&paramFlags, "param", nil, "a parameter of the run, key=value (repeat for each; the job's params say which it takes)")
	}
	if action == "pause" {
		c.Flags().StringVar(&note, "note", "", "why the job is paused (required, at most 1000 bytes)")
		c.Flags().StringVar(&until, "until", "", "when the pause ends by itself: a time in RFC 3339, or a duration from now such as 2h")
	}
	return c
}

// storeOrDaemon makes a change the way each control command does
// (trigger, pause, resume, freeze, unfreeze): through Redis, with the
// config's scheduler (direct), when the config names Redis; else, or
// without a config file, through the running daemon's admin API
// (viaDaemon). job, if not "", must be a job of the config.
func storeOrDaemon(cmd *cobra.Command, cfgPath string, o Options, job string,
	viaDaemon func(context.Context, *config.Config) error,
	direct func(context.Context, *scheduler.Scheduler, *config.Config) error) error {
	if cfg, ok := daemonConfig(cfgPath, o); ok {
		ctx, cancel := commandContext(cmd)
		defer cancel()
		return viaDaemon(ctx, cfg)
	}
	return withScheduler(cmd.Context(), cfgPath, o, job, func(ctx context.Context, s *scheduler.Scheduler, _ *lock.Client, cfg *config.Config) error {
		if !cfg.UsesRedis() {
			return viaDaemon(ctx, cfg)
		}
		return direct(ctx, s, cfg)
	})
}

// unknownJob is the error for a job name the config does not have: it
// suggests the closest one, if one is near, and lists the ones it has.
func unknownJob(cfg *config.Config, job string) error {
	names := make([]string, len(cfg.Jobs))
	for i, j := range cfg.Jobs {
		names[i] = j.Name
	}
	if len(names) == 0 {
		return fmt.Errorf("unknown job %q: %s has no jobs", job, cfg.Path)
	}
	return fmt.Errorf("unknown job %q%s: the jobs of %s are %s", job, didYouMean(job, names), cfg.Path, strings.Join(names, ", "))
}

// viaAdmin sends a control request to the daemon's admin API. For a
// trigger, it returns how many replicas heard it (the answer's heard_by).
func viaAdmin(ctx context.Context, cfg *config.Config, env []string, job, action, note, until string, params map[string]string) (int64, error) {
	req, err := adminRequest(ctx, cfg, env, actionScope[action], http.MethodPost, "/api/jobs/"+neturl.PathEscape(job)+"/"+action)
	if err != nil {
		return 0, err
	}
	if action == "pause" {
		b, _ := json.Marshal(PauseRequest{Note: note, Until: until})
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		req.Header.Set("Content-Type", "application/json")
	}
	if action == "trigger" && len(params) > 0 {
		b, _ := json.Marshal(TriggerRequest{Params: params})
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, daemonUnreachable(cfg, err)
	}
	defer resp.Body.Close()
	var body struct {
		Error   string
		HeardBy int64 `json:"heard_by"`
	}
	_ = json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(&body)
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("admin API: %s: %s", resp.Status, body.Error)
	}
	if action == "trigger" && body.HeardBy == 0 {
		return 0, fmt.Errorf("trigger of %q: no replica heard it%s", job, unheardNote(cfg, job))
	}
	return body.HeardBy, nil
}

// replicas is "1 replica" or "N replicas".
func replicas(n int64) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func printSummary(out, errOut io.Writer, cfg *config.Config) error {
	for _, w := range cfg.Warnings {
		fmt.Fprintf(errOut, "warning: %s\n", w)
	}
	backend := "in-memory (no redis: one replica)"
	if cfg.UsesRedis() {
		backend = "redis " + cfg.Redis.Describe()
	}
	fmt.Fprintf(out, "%s: valid; %d job(s); locks: %s; admin: %s\n", cfg.Path, len(cfg.Jobs), backend, cfg.Admin.Listen)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tKIND\tSCHEDULE\tLOCK\tNEXT")
	now := time.Now()
	for _, j := range cfg.Jobs {
		next := "-"
		if sch, err := scheduler.ParseJobSchedule(j.Name, j.Schedule, j.Jitter, j.Location); err == nil {
			t := sch.Next(now)
			next = fmtTime(&t)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", j.Name, j.Kind, scheduleText(j.Schedule, j.After), j.LockName, next)
	}
	return tw.Flush()
}

func printJobs(w io.Writer, views []JobJSON) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSCHEDULE\tNEXT\tLAST DONE\tOUTCOME\tHOLDER\tPAUSED")
	paused := func(v JobJSON) string {
		if v.Pause == nil {
			return strconv.FormatBool(v.Paused)
		}
		return pauseText(v.Pause)
	}
	for _, v := range views {
		var next []string
		for _, t := range v.Next {
			next = append(next, fmtTime(&t))
		}
		switch {
		case v.NoneBefore != nil:
			next = append(next, "none before "+fmtTime(v.NoneBefore))
		case len(v.Next) == 0:
			next = append(next, "none")
		}
		holder := "-"
		if v.Fleet.Held {
			holder = v.Fleet.Owner
		}
		outcome := string(v.Fleet.Outcome)
		if v.Error != "" {
			outcome = "error: " + v.Error
		}
		if outcome == "" && v.Replicas != "" {
			outcome = "per replica, below"
		}
		if outcome == "" {
			outcome = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, scheduleText(v.Schedule, v.After), strings.Join(next, " "), fmtTime(v.Fleet.DoneTick), outcome, holder, paused(v))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printPerReplica(w, views); err != nil {
		return err
	}
	if err := printSkipped(w, views); err != nil {
		return err
	}
	return printChains(w, views)
}

func printLocks(w io.Writer, ls []LockJSON) error {
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LOCK\tKIND\tHOLDER\tMODE\tHOLDS\tTTL\tTOKEN\tWAITERS")
	for _, l := range ls {
		if l.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\terror: %s\t\t\t\t\t\n", l.Name, l.Kind, l.Error)
			continue
		}
		if len(l.Holders) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t\t\t%v\t%d\t%d\n", l.Name, l.Kind, ms(l.TTLms), l.Token, l.Waiters)
		}
		for _, h := range l.Holders {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%v\t%d\t%d\n", l.Name, l.Kind, h.Owner, h.Mode, h.Holds, ms(h.TTLms), max(h.Token, l.Token), l.Waiters)
		}
	}
	return tw.Flush()
}
