// Package config loads the scheduler's HCL config file: it decodes it with
// HCL v2 (gohcl, one schema: the tagged structs of file.go), lays the
// environment over it, validates everything before anything touches Redis,
// and builds what the daemon runs: a Redis client, the lock client's
// options, the scheduler's options and its jobs.
//
//	cfg, err := config.Load("lockcron.hcl")            // every error at once, as config.Errors
//	if err != nil { ... }
//	for _, w := range cfg.Warnings { log.Warn("config", "warning", w) }
//	rdb, err := cfg.RedisClient()                    // if cfg.UsesRedis(); no I/O yet
//	locks, err := lock.New(rdb, cfg.LockOptions()...) // else lock.NewMemory(cfg.LockOptions()...)
//	s, err := scheduler.New(locks, cfg.SchedulerOptions()...)
//	js, err := cfg.SchedulerJobs(jobs.DefaultRegistry, log)
//	for _, j := range js { err = s.Add(j) }
//
// # The file
//
// config.example.hcl, at the root of the repository, shows and explains
// every setting with its default: replica_id, shutdown_timeout, watch; the
// blocks fleet, redis, lock, admin, telemetry, log and history; one
// job "name" { ... } block per job, one notify "name" { ... } block per
// webhook and one calendar "name" { ... } block per calendar. It is HCL's native syntax: durations are strings ("500ms",
// "30s", "1h30m") and must be positive; lists are [...]; maps (exec.env,
// http.headers) are { NAME = "value" }; a block written on one line holds
// one argument. HCL converts a number to a string, and a numeric string to
// a number, where the schema asks for one. Expressions may not name
// variables or call functions; in a string, write $${ and %%{ for the
// characters ${ and %{ (a password that holds them, say).
//
// A job's lock kind is lock_kind ("reentrant" or "fair"), as in Go
// (scheduler.Job.LockKind); lock_name names the lock (scheduler.Job.LockName).
// lock = "fair", the kind's name before, is an error telling to write
// lock_kind.
//
// A job's defaults, enums and bounds are the scheduler's: Load fills each
// job in with scheduler.Job.Validate and reports its errors
// (scheduler.FieldError) at the setting's place. This package adds what is
// about files: a missing schedule, duplicate job names, time_zone (a named
// zone, never "Local"), the one kind a job has (exec, http, or a func of
// WithRegistry's registry), execjob.Exec.Validate's and httpjob.HTTP.Validate's
// errors at the file's settings (exec.command[0]), exec.grace shorter than
// shutdown_timeout, one max_concurrency per concurrency_group and one
// lock_kind per lock_name, and the lease against redis.timeout.
//
// A calendar block (Calendar, a scheduler.Calendar) holds dates
// ("2026-12-25"; "*-12-25" for every year, "*-02-29" too), ranges
// (inclusive, [from, to] of whole dates, across a year end if need be) and
// cron (five fields, robfig/cron's parser with descriptors: a tick is in
// the calendar when its minute matches, Next(minute - 1ns) == minute; @every
// is refused: a period from whenever it is asked names no times), each
// read in time_zone, default the zone of the job that excludes it. A job's
// exclude names calendars of the file. Errors at the setting's place: a
// date that does not exist, a range whose end is before its start, a bad
// cron, an unknown zone, an empty calendar, a duplicate name, an exclude
// naming no calendar (with the nearest name, Suggest); a calendar no job
// excludes is a warning. A job's Digest covers the blocks of the calendars
// it excludes, so that a reload applies a changed calendar to its jobs.
// Calendar.End says where the span that holds a time ends (midnight after
// its day or range, the end of its cron minute), so that the next ticks
// pass over a calendar's days in one step.
//
// # The environment
//
// A variable LOCKCRON_<PATH> sets the setting at PATH, with "__" between
// levels and the names in upper case: LOCKCRON_LOG__LEVEL=debug,
// LOCKCRON_LOCK__REPLICA_ACK__REPLICAS=2. It wins over the file: each
// variable is made into an HCL body that holds its one setting, decoded
// after the file by the same schema into the same structs, so that its
// value is converted and checked as the file's would be (true or false, a
// decimal number, a duration string); redis.addrs is comma-separated. An
// empty variable counts as unset. REDIS_URL is short for
// LOCKCRON_REDIS__URL (which wins). A url from the environment replaces
// the file's addrs and master_name, and addrs the file's url, each with a
// warning. Jobs and notify blocks cannot be set from the environment. An
// unknown setting inside a block (LOCKCRON_LOG__LEVLE) is an error with
// HCL's suggestion; an unknown first level (LOCKCRON_FOO) only a warning,
// since other programs may use the prefix. Token blocks cannot be set
// from the environment either. The run info of exec jobs
// (LOCKCRON_JOB, _TICK, _TOKEN, _REPLICA, _ATTEMPT, _TRIGGER) and
// LOCKCRON_CONFIG are not settings and are ignored.
//
// # Errors, warnings, secrets
//
// Load returns every problem at once, as Errors, sorted by place: each
// *Error has its place (file:line:col, from HCL's ranges) or the variable
// that set the value, the job and the field. HCL's own diagnostics (syntax,
// an unknown argument or block with "Did you mean ...?", a value of the
// wrong type, an argument set twice, a label missing) keep HCL's words;
// Errors.WriteText prints each with the offending line of the file (HCL's
// diagnostic writer), as `scheduler validate` does. Config.Warnings lists
// what is allowed but risky (a secret in a file others can read, an admin
// listener open to others without a token, settings the environment
// replaced, ...).
//
// redis.password, redis.url, admin.token, the admin tokens and a webhook's
// URL are kept as Secret, which never prints its value; password_env,
// token_env, value_env and url_env name a variable that holds one. No error or warning quotes a secret,
// exec jobs do not inherit the variables that hold the daemon's, and
// Config.Redact removes them from any text. ForReading loads for a command
// that only reads: an unset token_env or url_env variable is a warning.
//
// # Admin tokens
//
// admin { token "name" { scope = "read" | "operate" | "admin", value_env =
// "VAR" } } blocks, several, are Admin.Tokens, with the single
// token/token_env first as a token of scope admin named LegacyTokenName.
// scope and value_env are required: a token's power is written, never
// defaulted. A name must be plain and a value its own, so that the name a
// call is logged under tells which token made it; a second block of a
// name, or a variable that holds another token's value, is an error at
// that block. A block with any error is left out (and Load fails).
// public_read opens reads when there are tokens; without tokens, it is a
// warning. Tokens are compared by the daemon, not here.
//
// Config.Digest is the SHA-256 of the file's bytes; Job.Digest is a digest
// of the job's block as decoded (not as spaced or ordered), with its
// literal secrets redacted first (exec env and http header values whose
// names speak of a secret, an http URL's password and query values), so
// that the digest, which the ledger and the admin API show, tells nothing
// of them. The daemon compares it, and Job.SecretsDigest (the secrets it
// leaves out, compared within the process only), to tell which jobs a
// reload changes. Load and the builders are
// safe for concurrent use, and do no network I/O.
package config
