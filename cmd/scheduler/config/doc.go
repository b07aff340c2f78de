// Package config loads the scheduler's HCL config file: it decodes it with
// HCL v2 (gohcl, one schema: the tagged structs of file.go), lays the
// environment over it, validates everything before anything touches Redis,
// and builds what the daemon runs: a Redis client, the lock client's
// options, the scheduler's options and its jobs.
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
// # The file
//
// config.example.hcl, at the root of the repository, shows and explains
// every setting with its default. Top-level: replica_id, shutdown_timeout,
// watch; the blocks fleet, redis, lock, admin, telemetry, log and history;
// one job "name" { ... } block per job and one notify "name" { ... } block
// per webhook. The syntax is HCL's native syntax: durations are strings
// ("500ms", "30s", "1h30m") and must be positive; lists are [...]; maps
// (exec.env, http.headers) are { NAME = "value" }; a block on one line
// holds one argument (HCL v2 refuses `job "b" { func = "x"` followed by
// more lines). HCL converts a number to a string and a numeric string to a
// number where the schema asks for one. Expressions may not name
// variables or call functions.
//
// A job's lock kind is lock_kind ("reentrant" or "fair"), as in Go
// (scheduler.Job.LockKind); lock_name names the lock (scheduler.Job.Lock).
// A job that still says lock = "fair", the kind's name before, is an error
// at its place telling to write lock_kind.
//
// A job's defaults, enums and bounds are the scheduler's: Load fills each
// job in with scheduler.Job.Validate and reports its errors
// (scheduler.FieldError) at the setting's place. What this package adds is
// about files: a missing schedule, a duplicate job name, time_zone (a
// named zone, never "Local"), durations written as strings, the one kind
// a job has (exec, http or func, the func looked up in WithRegistry's
// registry), what jobs.Exec.Validate and jobs.HTTP.Validate refuse under
// the file's names (exec.command[0]), exec.grace shorter than
// shutdown_timeout, concurrency_group with max_concurrency and one
// max_concurrency per group, one lock kind per lock name, and a history
// that keeps at least 1 run and 1s.
//
// # The environment
//
// A variable LOCKCRON_<PATH> sets the setting at PATH, with "__" between
// levels and the names in upper case: LOCKCRON_LOG__LEVEL=debug,
// LOCKCRON_REDIS__URL=redis://..., LOCKCRON_LOCK__REPLICA_ACK__REPLICAS=2.
// It wins over the file: each variable is made into an HCL body holding its
// one setting and decoded by the same schema into the same structs after
// the file, so its value is converted and checked as the file's would be
// (true or false for a bool, a decimal number, a duration string);
// redis.addrs is comma-separated. An empty variable counts as unset.
// REDIS_URL is short for LOCKCRON_REDIS__URL (which wins if both are set).
// A url from the environment replaces the file's addrs and master_name,
// and addrs from the environment replace the file's url, each with a
// warning, so that REDIS_URL can point a file written for Sentinel at
// another server.
//
// Jobs and notify blocks cannot be set from the environment. A variable
// naming a setting that does not exist inside a block (LOCKCRON_LOG__LEVLE)
// is an error, with HCL's suggestion; one whose first level is unknown
// (LOCKCRON_FOO) is only warned about, since other programs may use the
// prefix. The run info of exec jobs (LOCKCRON_JOB, LOCKCRON_TICK,
// LOCKCRON_TOKEN, LOCKCRON_REPLICA, LOCKCRON_ATTEMPT, LOCKCRON_TRIGGER) and
// LOCKCRON_CONFIG are not settings and are ignored.
//
// # Errors
//
// Load returns every problem at once, as Errors, sorted by place: each
// *Error has its place (file:line:col, from HCL's ranges: the setting's
// name, or where HCL found the problem) or the environment variable that
// set the value, the job's name and the field. HCL's own diagnostics
// (syntax, an unknown argument or block, with "Did you mean ...?", a value
// of the wrong type, an argument set twice, a block given twice, a label
// missing or too many) keep HCL's words; a job HCL found errors in is not
// checked further. Errors.WriteText prints them with the offending lines
// of the file, with HCL's diagnostic writer; `scheduler validate` does.
//
// # Leases and timeouts
//
// lock.lease must be at least 1s (MinLease). With Redis, redis.timeout,
// plus lock.replica_ack.timeout when set, must be shorter than lease/2:
// renewals go every lease/3 from the last one sent, and the lease counts
// as lost at 9/10 of it after the last successful renewal was sent, so a
// renewal that hangs that long must leave time for another. A job's
// timeout has no bound from the lease (the watchdog renews it as long as
// the run goes on), but exec.grace must be shorter than shutdown_timeout,
// or a graceful stop would hand the tick over while the process may still
// run. A timeout longer than the time between ticks is a warning.
//
// # Warnings, secrets and digests
//
// Config.Warnings lists what is allowed but risky: a secret in a file
// others can read, tls insecure_skip_verify, an admin listener reachable
// from other machines without a token, an unused otlp_endpoint,
// misfire_grace without misfire = "run_once", CRON_TZ= with time_zone,
// settings given up for the environment's, unknown LOCKCRON_ variables.
//
// redis.password, redis.url, admin.token and a webhook's URL are kept as
// Secret, which never prints its value; password_env, token_env and url_env
// name a variable holding one. No error or warning quotes a secret; exec
// jobs do not inherit the variables that hold the daemon's; Config.Redact
// removes them from any text. ForReading loads for a command that only
// reads: a token_env or url_env whose variable is unset is a warning there.
//
// Config.Digest is the SHA-256 of the file's bytes. Job.Digest is a digest
// of the job's block as decoded (not as spaced or ordered), which the
// daemon compares to tell which jobs a reload changes.
//
// Load and the builders are safe for concurrent use; a Config is read-only
// after Load. Load does no network I/O.
package config
