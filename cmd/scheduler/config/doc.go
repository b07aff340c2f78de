// Package config loads the scheduler's HCL config file: it reads it with
// koanf (file provider, HCL parser), lays the environment over it (env
// provider), validates everything before anything touches Redis, and
// builds what the daemon runs: a Redis client, the lock client's options,
// the scheduler's options and its jobs.
//
//	cfg, err := config.Load("lockcron.hcl")            // every error at once, as config.Errors
//	if err != nil { ... }
//	for _, w := range cfg.Warnings { log.Warn("config", "warning", w) }
//	var locks *lock.Client
//	if cfg.UsesRedis() {
//		rdb, err := cfg.RedisClient()                 // no I/O yet
//		locks, err = lock.New(rdb, cfg.LockOptions()...)
//	} else {
//		locks, err = lock.NewMemory(cfg.LockOptions()...)
//	}
//	s, err := scheduler.New(locks, cfg.SchedulerOptions()...)
//	js, err := cfg.SchedulerJobs(jobs.DefaultRegistry, log)
//	for _, j := range js { err = s.Add(j) }
//
// config.example.hcl, at the root of the repository, shows and explains
// every setting.
//
// # The file
//
// Top-level settings: replica_id, shutdown_timeout, watch; blocks fleet,
// redis, lock, admin, telemetry, log, history; one job "name" { ... } block
// per job; and one notify "name" { ... } block per webhook.
//
// watch (a bool, default false; Config.Watch) makes the daemon reload the
// file when it changes, as it does on SIGHUP (see the daemon package,
// "Reloading"): only the jobs change at a reload; every other setting is
// read once at start, and Config.RestartNeeded names those that differ
// from the running config's.
//
// A notify block (Notify) has url or url_env (one of them: an http or
// https URL, kept as a Secret), format "json" (default) or "slack", on
// (outcomes; default failed, lost_lock, missed), jobs (default every
// job; each must be a job of the file), timeout (default 5s) and retries
// (0 to 10, default 3). Its errors read "notify.NAME.FIELD".
// Durations are strings ("500ms", "30s", "1h30m") and must be positive:
// zero or a negative duration is an error in every duration field (leave
// the key out for its default). Numbers and bools are HCL's, lists are
// [...], maps (exec.env, http.headers) are { NAME = "value" }.
//
// Defaults: replica_id host name and process id ("host-1234");
// shutdown_timeout 30s; watch false; fleet.ranking true, fleet.claim_fallback 250ms,
// fleet.member_ttl 3s (at least 30ms); no redis block, the in-memory backend
// (Config.Redis == nil, UsesRedis false); redis.key_prefix "lockcron",
// redis.timeout 3s, redis.connect_timeout 30s, redis.db 0; lock.lease
// 30s, lock.waiter_ttl 3s;
// lock.replica_ack, when present, replicas 1 and timeout 500ms;
// admin.listen "127.0.0.1:9090"; telemetry.traces "none", telemetry.metrics
// "prometheus" (left out, the daemon lets OTEL_TRACES_EXPORTER and
// OTEL_METRICS_EXPORTER choose when they are set: Telemetry.TracesNamed,
// MetricsNamed); log.level "info", log.json false; history.keep 100 runs
// and history.max_age 720h (30 days) per job, which a job's history_keep
// and history_max_age replace (scheduler.WithHistory). A job's defaults are the
// scheduler's: lock "reentrant", lock_name the job's name, no timeout,
// overlap "skip", misfire "skip", misfire_grace 1h, retries 0, backoff 1s,
// on_shutdown "handoff", no max_concurrency (and concurrency_group the lock
// name when there is one), time_zone UTC, no jitter; exec.grace 10s
// (execjob.DefaultGrace).
//
// A job's jitter ("5m"; at most a year) moves each tick of its schedule
// later by an offset in [0, jitter), fixed by a hash of the job's name:
// every replica and every restart computes the same one, and a tick never
// moves as far as the next (scheduler.Job.Jitter). A schedule's fields may
// hold Jenkins' H, values picked by a hash of the job's name: H, H/n,
// H(a-b), H(a-b)/n, as in "H H(1-5) * * *" (day of month picks from 1-28).
// Both spread jobs with the same schedule over time; see the scheduler
// package doc, "Spreading the load".
//
// Redis: url (redis://, rediss://, unix://), or addrs: one address is one
// server, several with master_name are Sentinels, several without are
// Cluster nodes (ClusterStateReloadInterval 1s). username, password and db
// replace a url's when given. password_env (and admin.token_env) name an
// environment variable holding the secret, read at Load. A tls block turns
// TLS on unless it says enabled = false; its files are read by RedisClient,
// not by Load, so that a config can be validated on a machine without them.
//
// # The environment
//
// A variable LOCKCRON_<PATH> sets the setting at PATH, with "__" between
// levels and the key names in upper case: LOCKCRON_LOG__LEVEL=debug,
// LOCKCRON_REDIS__URL=redis://..., LOCKCRON_ADMIN__LISTEN=:9090,
// LOCKCRON_LOCK__REPLICA_ACK__REPLICAS=2. It wins over the file. Values are
// text: durations as in the file, numbers in decimal, bools as
// strconv.ParseBool reads them, lists (redis.addrs) comma-separated. An
// empty variable counts as unset. REDIS_URL is short for
// LOCKCRON_REDIS__URL (which wins if both are set); with no redis block
// and neither variable, the in-memory backend is used. A url from the
// environment replaces the file's addrs and master_name, and addrs from
// the environment replace the file's url (each with a warning), so that
// REDIS_URL can point a file written for Sentinel at another server.
//
// Jobs cannot be set from the environment: LOCKCRON_JOB__... is an error.
// A variable naming a key that does not exist inside a block
// (LOCKCRON_LOG__LEVLE) is an error, with a suggestion; one whose first
// level is unknown (LOCKCRON_FOO) is only warned about, since other
// programs may use the prefix. The run info that exec jobs get
// (LOCKCRON_JOB, LOCKCRON_TICK, LOCKCRON_TOKEN, LOCKCRON_REPLICA,
// LOCKCRON_ATTEMPT, LOCKCRON_TRIGGER) and LOCKCRON_CONFIG are not settings
// and are ignored.
// An error about a value set by a variable names the variable instead of a
// place in the file.
//
// # Errors and places
//
// Load returns every problem at once, as Errors: one *Error a line, each
// with its place (file:line:col, found by walking the HCL syntax tree of
// the same file, since koanf's flattened values have none) or its
// environment variable, the job's name, and the field. Find them with
// errors.As. A file that does not parse gives its syntax error alone; a
// block the decoder cannot map (a job without a name) gives the structural
// errors alone.
//
// Load reports: a key that does not exist, anywhere ("unknown key
// \"scheduel\" in job \"x\"; did you mean \"schedule\"?"); a key set twice,
// a block given twice, a name on a block that takes none; a value of the
// wrong type; a missing, duplicate or empty job name, or one with braces or
// control characters; a missing schedule, or one
// scheduler.ParseJobSchedule refuses (a bad H form among them); an unknown
// time_zone (and "Local", which could differ between replicas); a job with
// no kind or with two; a func that the registry (WithRegistry, default
// jobs.DefaultRegistry) does not hold, with the names it suggests;
// whatever execjob.Exec.Validate and httpjob.HTTP.Validate refuse, under the
// file's field names; an empty exec command; a policy
// (lock, overlap, misfire, on_shutdown) not among its values; negative
// retries; max_concurrency below 1, concurrency_group without
// max_concurrency, and jobs of one group that disagree on max_concurrency;
// url and addrs both set, neither set, master_name without addrs, an
// address that is not host:port, a url go-redis cannot parse, db not 0 on
// Cluster, an empty key_prefix or one with braces; password with
// password_env (token with token_env), or such a variable unset; a
// client certificate without its key; a log level other than trace, debug,
// info, warn, error; a telemetry choice not offered, or "otlp" without
// otlp_endpoint; lock.replica_ack without Redis; an admin listen address
// that is not host:port.
//
// # Leases and timeouts
//
// lock.lease must be at least 1s (MinLease): the watchdog renews every
// lease/3 and needs several round trips of margin. With Redis,
// redis.timeout, plus lock.replica_ack.timeout when set, must be shorter
// than lease/2. Renewals are sent every lease/3, counted from when the last
// one was sent, and the lease counts as lost at 9/10 of it after the last
// successful renewal was sent; so a renewal that hangs for the whole
// command timeout must leave time for another before then. The error names
// both fields. Within that bound, redis.timeout may be well above a slow
// network's round trip: a lease survives round trips up to 0.4 x the
// lease.
//
// redis.connect_timeout bounds how long `scheduler run` waits at start-up
// for Redis to answer: it pings it (each ping bounded by redis.timeout),
// backing off from 100ms to 2s between attempts, and exits 1 if Redis has
// not answered within connect_timeout. It is not a bound on commands once
// running; the other commands (jobs, locks, trigger, pause, resume) do not
// wait for Redis and fail within redis.timeout.
//
// A job's timeout has no upper bound from the lease, by design: the
// watchdog renews the lease for as long as the run goes on, so a two-hour
// job under a 30s lease is the intended use, and refusing it would be
// wrong. What must fit is the time a run can outlive its context: when a
// run's context ends (timeout, lost lock, stop) an exec job's process
// group gets SIGTERM and then exec.grace before SIGKILL. The rule is
// therefore: exec.grace (default 10s) must be shorter than
// shutdown_timeout. Otherwise a graceful stop gives up first, releases the
// lock and hands the tick to another replica while the process may still
// run, and the tick would run twice at once. A timeout longer than the
// shortest time between the schedule's ticks is a warning (those ticks are
// skipped, or queued with overlap = "queue").
//
// # Warnings
//
// Config.Warnings lists what is allowed but risky: a password, token or
// url with a password written in a file that other users can read (mode &
// 044; chmod 600 it or use password_env / token_env); tls
// insecure_skip_verify; an admin listener reachable from other machines
// without a token; an otlp_endpoint that nothing uses; misfire_grace
// without misfire = "run_once"; a schedule with CRON_TZ= and a time_zone;
// settings given up for the environment's (see above); unknown
// LOCKCRON_ variables; tls settings under enabled = false.
//
// # Secrets
//
// redis.password, admin.token and redis.url (which may hold a password) are
// kept as Secret, which prints "[redacted]" with fmt (every verb), JSON,
// text marshalling and slog; Value returns the secret. Errors and warnings
// never quote them: a bad url is shown with its password masked, or not at
// all if it does not parse, and every message is scrubbed of the secrets
// it could hold as a last guard. Redis.Describe gives a loggable
// description of the connection. Exec jobs inherit the scheduler's
// environment except the variables that may hold its own secrets
// (REDIS_URL, LOCKCRON_REDIS__URL, LOCKCRON_REDIS__PASSWORD,
// LOCKCRON_ADMIN__TOKEN, and the variables password_env and token_env
// name). Exec env values and http headers are not treated as secrets: pass
// a job's secrets through the scheduler's environment under other names.
// Config.Redact replaces the config's secrets in any text; SchedulerOptions
// gives it to the scheduler (scheduler.WithRedact), so that a job's error
// that quotes one is kept in the run history without it, and the daemon
// runs go-redis's own log lines through it.
//
// ForReading loads a config for a command that only reads: a token_env
// whose variable is not set is a warning there, not an error.
//
// # Digests
//
// Config.Digest is the SHA-256 of the file's bytes, in hex (what sha256sum
// prints): it tells which version of the file a daemon loaded. Each
// Job.Digest is a digest of the job's block as written, 16 hex digits: of
// its name and its values as HCL decodes them, so comments, spacing, the
// order of its keys and its place in the file do not change it, and a
// value read from the environment is not in it (jobs cannot be set from
// the environment; secrets are named by their variables). SchedulerJobs
// gives it as each scheduler.Job's Revision, and the daemon compares it to
// tell which jobs a reload changes.
//
// # Concurrency
//
// Load and the builders are safe for concurrent use; a Config is read-only
// after Load. Load does no network I/O and never panics.
package config
