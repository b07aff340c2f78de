// Package daemon is the scheduler command: it loads a config file
// (package config), opens the lock store (Redis, or the in-memory backend
// when the config names none), runs the scheduler with the config's jobs,
// serves the admin endpoint, and stops gracefully on a signal. The
// `scheduler` binary (cmd/scheduler) is Main with the default registry; a
// program that registers Go job funcs calls Main, or Run, with its own.
//
// # Commands
//
//	scheduler run      -config FILE   the daemon; SIGTERM/SIGINT stop it gracefully, a second signal at once;
//	                                  SIGHUP reloads its config (see Reloading)
//	scheduler validate -config FILE   every error with its place (exit 1), or a summary of the jobs
//	scheduler jobs     -config FILE   next three ticks that will run (calendars and freezes applied), last
//	                                  outcome, holder, paused: by whom, until when, why; then the skipped
//	                                  ticks with why (-json)
//	scheduler locks    -config FILE   the locks in the store: holders, holds, TTL, token, waiters (-json)
//	scheduler history  JOB -config FILE   its latest runs, newest first (-limit N, -before ID, -json), and the
//	                                  ticks not run (skipped_busy, paused, deadline_missed) with their reason,
//	                                  consecutive ones of one cause as one row with a count and a range;
//	                                  a manual run's params after its number, each value cut to 40
//	                                  characters (-json: whole)
//	scheduler trigger  JOB -config FILE [-param key=value ...]   run a job once now, on one replica of the fleet
//	scheduler pause    JOB -note TEXT [-until TIME|DURATION] -config FILE   pause a job on every replica, saying why;
//	                                  -until (RFC 3339, or a Go duration from now) ends it by itself (see pause.go)
//	scheduler resume   JOB -config FILE   resume it
//	scheduler freeze   [-jobs PATTERN] -until TIME|DURATION -note TEXT -config FILE
//	                                  stop the ticks of the jobs matching PATTERN (a glob; default all) on every
//	                                  replica until TIME (RFC 3339) or for DURATION; prints the freeze's id
//	scheduler unfreeze ID -config FILE   end a freeze at once
//	scheduler reload   -config FILE   the running daemon (admin.listen) reads its config again, and
//	                                  prints what it did (-json: its answer); exit 1 if the file is invalid
//	scheduler audit    -config FILE   the audit trail, newest first (-limit N, -before ID, -json; see audit.go)
//	scheduler replicas -config FILE   the fleet's replicas: state, version, config digest, start, last heartbeat,
//	                                  jobs, runs under way (-json; see replicas.go)
//	scheduler backfill JOB -from TIME -to TIME [-only-missing] [-rate N/s] [-dry-run] [-force] -config FILE
//	                                  run the job's past ticks once across the fleet; prints the backfill's
//	                                  id, then its progress until it ends (see backfill.go and "Backfill")
//	scheduler backfill -cancel ID -config FILE   cancel a backfill: no tick of it starts after
//	scheduler version                    the version (also --version)
//
// validate, jobs, locks and history only read: they load the config with
// config.ForReading, so they do not need the variables that
// admin.token_env and the token blocks' value_env name. An unknown job name is an error that lists the
// config's jobs, and suggests the closest when it looks misspelt; a missing config file, one that says how to name it.
// validate also builds the lock client and the scheduler as run does,
// without connecting, so that it refuses what run refuses.
// go-redis's own log lines go through the daemon's hclog logger (at WARN,
// secrets removed), so that with log.json every line is JSON.
//
// Exit codes: 0 success (for run, a clean stop); 1 failure (an invalid
// config, an unreachable store, a stop cut short by shutdown_timeout or by
// a second signal); 2 a bad command line. Long flags take one dash or two:
// an argument of one dash and more than one letter is a long flag, as Go's
// flag package reads it, so -confg is an unknown flag (with a suggestion,
// "did you mean -config?") rather than -c onfg; a shorthand takes its
// value after a space or "=", or a number right after it (-n5). Help
// shows bool flags without pflag's
// "[=true|false]".
// The config path defaults to $LOCKCRON_CONFIG, else lockcron.hcl.
//
// Without a config file (no -config, no LOCKCRON_CONFIG, and no
// lockcron.hcl in the working directory), jobs, locks, history, trigger,
// pause, resume, freeze, unfreeze, backfill and reload ask the running daemon's admin API, as nomad's
// commands ask the agent at NOMAD_ADDR: at $LOCKCRON_ADMIN__LISTEN, else
// 127.0.0.1:9090 (admin.listen's default, where `make run` serves), with
// $LOCKCRON_TOKEN, else $LOCKCRON_ADMIN__TOKEN, as the bearer token if it
// is set (LOCKCRON_ADMIN__* set the daemon's admin.listen and
// admin.token). So after `make run`, `scheduler history hello` works as
// typed. run and validate need a file. With a file, a command that calls
// the admin API sends $LOCKCRON_TOKEN if set, else the file's token (one
// whose variable is set) of the smallest scope that the call needs, or,
// if none suffices, of the widest, so that the daemon's 403 names the
// scope needed.
//
// jobs, locks, history, trigger, pause and resume first PING Redis, bounded by
// redis.timeout: against an unreachable Redis they exit 1 within it, with
// an error that names Redis; a refused connection ends the ping at the
// first failed dial, whose error it gives (a go-redis dial hook keeps it:
// go-redis itself retries the dial until the ctx ends and then reports
// only "context deadline exceeded"). jobs prints what it could read, then
// exits 1 if any job's ledger could not be read. Against a config without
// Redis, jobs and locks, like history, ask the daemon's admin API. trigger
// prints how many replicas heard it.
//
// freeze and unfreeze go through Redis (fleet.Store: the freezes are kept
// there, and every replica reads them every second), or, without Redis in
// the config or without a config, through the daemon's admin API (POST
// /api/freezes, DELETE /api/freezes/{id}); both need an operate token
// there, and are in the audit trail: a freeze with its id and pattern as
// the target ("f3 (report-*)") and its note with its end ("release (until
// 2026-12-01T09:00:00Z)", as a pause's), an unfreeze with the id. -until and the API's until take a time (RFC
// 3339) or a duration from now ("2h"; write -until=-1m for a negative one,
// which is refused). A missing or empty -note, a note over 1,000 bytes or
// with a control character (a line break, a tab, an escape), an until not
// in the future (on Redis's clock), a pattern that matches no
// job (or is malformed) and an unknown id are refused, and nothing is
// changed: exit 2 for the command line, 1 for the rest; 400 and 404 from
// the API. The command's tables print notes with their control
// characters escaped as Go quotes them (\n, \x1b): older versions let
// some in.
//
// # Start-up
//
// run starts the admin listener first (it logs "admin listening" with its
// addr and status_page, the status page's URL), then waits for Redis: it pings it
// (each ping bounded by redis.timeout), 100ms after a failure, doubling up
// to 2s between attempts, and logs each failed attempt as a warning with
// Redis's address (never the password), the attempt number, the next
// retry and the error. Meanwhile /healthz answers 200, and /readyz and the
// JSON API answer 503 "connecting to redis". Once Redis answers, the
// scheduler starts. If it has not answered within redis.connect_timeout
// (default 30s), run exits 1 with an error such as
//
//	redis at redis://10.0.0.5:6379 unreachable for 30s: lock: ping: dial tcp 10.0.0.5:6379: connect: connection refused
//
// An attempt ends at its first failed dial, and its warning gives the
// dial's error. Redis refusing us (WRONGPASS, NOAUTH, NOPERM) is not
// retried: run logs "redis refused us: giving up" and exits 1 at once.
// A stop signal during the wait ends it at once, with a clean exit (0).
// On the in-memory backend there is nothing to wait for.
//
// trigger, pause and resume go through Redis to every replica. Without
// Redis (the in-memory backend) they go to the running daemon's admin API.
// reload always goes to the daemon's admin API (admin.listen, with
// admin.token), so to one replica.
//
// # Admin endpoint
//
// On admin.listen (default 127.0.0.1:9090):
//
//	GET  /healthz                   200 while the process serves
//	GET  /readyz                    200 when the scheduler runs and the store answers PING; 503 otherwise:
//	                                while connecting to Redis at start-up, and from the moment a graceful
//	                                stop begins, so that a load balancer drains it
//	GET  /metrics                   Prometheus (telemetry.metrics = "prometheus", the default)
//	GET  /api/jobs                  JSON: each job's schedule and zone, next ticks that will run ("next",
//	                                calendars and freezes applied) and the skipped ones before them with why
//	                                ("skipped": tick, cause, reason; "none_before", the end of the year
//	                                looked in past the last, when fewer than three will run), this replica's last tick
//	                                and outcome, and the fleet's ledger (done tick, outcome, holder and
//	                                since when, paused, "failures" in a row); "pause", the pause in force
//	                                (by, at, note, until); "revision", the digest of the job's config block
//	                                this replica runs; "config_digest" and "config_loaded_at", the SHA-256
//	                                of the config file in effect and when it was loaded
//	GET  /api/jobs/{name}           JSON: that job as in /api/jobs, and "runs": its latest 20 runs, newest
//	                                first (scheduler.Run: tick, trigger, replica, attempt, start, end,
//	                                duration, outcome, token, trace id, error tail)
//	GET  /api/jobs/{name}/runs      JSON: its runs, newest first; ?limit=N (default 20, at most 1000),
//	                                ?before=ID for those older than the run ID (the next page)
//	GET  /api/locks                 JSON: the locks in the store (lock.Client.Locks)
//	POST /api/jobs/{name}/trigger   run the job once now ("heard_by": how many replicas heard it), with
//	                                {"params": {"customer": "42"}} if the job declares params (TriggerRequest;
//	                                a 400 with what the job accepts, and nothing changed, for others);
//	                                pause and resume likewise; pause takes {"note": "why", "until": "2h"}
//	                                (PauseRequest: note required, one line without control characters;
//	                                a bare POST is a 400, as is any bad input, and nothing is changed)
//	GET  /api/freezes               JSON: the freezes that have not ended (id, jobs, until, created, note)
//	POST /api/freezes               freeze jobs on every replica: {"jobs": GLOB, "until": TIME|DURATION,
//	                                "note": TEXT}; 200 with the freeze (its "id"), 400 for bad input
//	DELETE /api/freezes/{id}        end a freeze at once; 404 for an id that names none (or one ended)
//	POST /api/reload                read the config file again (see Reloading): 200 with what was done
//	                                (ReloadJSON), 422 with the errors of an invalid file
//	GET  /                          status page: the jobs, who holds each, the last 20 outcomes
//	GET  /jobs/{name}               status page: the job's run history, paged (?before=ID)
//	GET  /locks                     status page: the locks in the store
//	GET  /api/audit                 JSON: the audit trail, newest first (?limit=N, ?before=ID; see audit.go)
//	GET  /audit                     status page: the audit trail, paged (?before=ID)
//	GET  /api/replicas              JSON: the fleet's replicas (ReplicaJSON; see replicas.go and "The fleet
//	                                in view" below)
//	GET  /replicas                  status page: the fleet's replicas, another config and gone ones marked
//	POST /api/jobs/{name}/backfill  run the job's past ticks (BackfillRequestJSON); 200 with the backfill
//	                                (its "id"), or with its ticks for "dry_run"; 400 for bad input, 404 for
//	                                an unknown job, 409 for a range that overlaps a running backfill
//	GET  /api/backfills             JSON: the backfills, running and ended within 7 days (?job=NAME)
//	DELETE /api/backfills/{id}      cancel a backfill; 404 for an unknown id, 409 for one that has finished
//
// An unknown job is a 404 whose error names it and lists the jobs (also
// in "jobs"); a bad limit or before is a 400 whose error names the
// parameter.
//
// Tokens (access.go): each admin token block, and the single admin.token
// (scope admin, named "admin.token"), is a bearer token with a scope:
// read may GET the JSON API and the status page; operate may also
// trigger, pause, resume, freeze, unfreeze, backfill and cancel a
// backfill; admin may also reload.
// actionScope is the table of what each change needs. With any token configured, every call of the JSON API and the
// page needs "Authorization: Bearer TOKEN" of a scope that suffices, but
// /healthz, /readyz, /metrics and /static stay open, and
// admin.public_read opens the reads. No token or a wrong one: 401 (with
// WWW-Authenticate: Bearer); a scope too small: 403; each message names
// the scope needed. A token is found by comparing the SHA-256 of the one
// sent with each token's, all of them, in constant time. The name of the
// token that matched is the request's actor (on its context), logged with
// each change ("admin request", actor); never its value. Without tokens,
// reads are open and the POST calls are taken only from loopback
// (actor "loopback"), addressed to an IP address or localhost (not to a
// DNS name, which a hostile page could rebind to 127.0.0.1): others get
// 403 with the reason. A POST that a browser sends from a page of another
// origin is refused (403) either way. Secrets never appear in responses
// or logs.
//
// The status page is HTML rendered on the server (html/template, which
// escapes every value), with a style sheet and a small script embedded
// in the binary; it needs nothing else. It refreshes its content every 3
// seconds in place. Its Trigger, Pause and Resume buttons call the POST
// API and say on the page what came of it; Pause asks for the note first
// (a prompt; cancel sends nothing), and a paused job's row shows who paused
// it, when, until when and why. With tokens, a page requested
// without one (or with a wrong one) answers 401 locked: the token box and
// the reason, nothing of the daemon; the token used (Use, Enter, or a
// button) is kept in the tab's sessionStorage and sent as a bearer token
// with each refresh of the page's live part, which swaps in the data, so
// the session's other pages do not ask again. While the
// daemon connects to Redis, the pages answer 503 and say "connecting to
// redis", with the jobs of the config; they fill in once Redis answers.
// Narrow screens get one card per job, and dark mode follows
// prefers-color-scheme. The page shows the config file's digest and when
// it was loaded, and each job's row carries its revision (data-revision).
//
// # Reloading
//
// The jobs change without a restart. The daemon reads its config file
// again on SIGHUP (Options.Reload for a program that calls Run), on POST
// /api/reload (and so `scheduler reload`), and, when the file says
// watch = true, when the file changes: koanf's file provider watches its
// directory, so a file rewritten, renamed over it or swapped by a symlink
// (a Kubernetes ConfigMap) is seen; a burst of events makes one reload,
// 250ms after the last; a watch that breaks (the file removed) is set up
// again every second, with a reload once the file is back. One reload runs
// at a time; the others wait for it. A reload:
//
//   - loads the file with the loader and validation of the start-up (the
//     same registry, so func jobs still resolve, and the same environment).
//     If it is not valid, each error is logged ("config error") with its
//     place, as `scheduler validate` prints it, then a refusal ("config not
//     reloaded: the file is not valid; the running jobs are kept"), and
//     nothing changes. The daemon never stops over a reload.
//   - compares the jobs by name, and by the digest of each job's block as
//     written (config.Job.Digest: its values, so comments, spacing, key
//     order and the job's place in the file do not count; a variable the
//     block names is there by its name, never its value): a job not
//     running is added (scheduler.Scheduler.Add), a running job no longer
//     in the file removed (Remove: a run in progress finishes under its
//     lock), a job whose digest changed updated (Update: a run in progress
//     finishes with the old definition), the others left alone. Removals
//     go first, then changes, then additions. Each change is logged ("job
//     reloaded", with job, change and revision).
//   - goes on past a change the scheduler refuses (ErrInvalid: a job whose
//     lock kind differs from that of a running job sharing its lock, say):
//     each is logged ("job change not applied: the job stays as it ran")
//     and reported; one refused as invalid is tried again while other
//     changes succeed. The job stays as it ran, and the next reload tries
//     again.
//   - reports the settings other than the jobs that changed
//     (config.Config.RestartNeeded: replica_id, shutdown_timeout, watch,
//     fleet, redis, lock, admin.listen, admin.token, admin.tokens,
//     admin.public_read, telemetry, log, history, notify) in a warning
//     ("config settings changed that need a restart: their running values
//     are kept"). They are wired once at start, and keep their running
//     values.
//   - ends with "config reloaded" (or, with refused changes, a warning that
//     says so), with the lists and the new config_digest.
//
// Each job's Revision (scheduler.Job.Revision) is its digest, so each run
// records which definition ran it. A valid reload sets config_digest and
// config_loaded_at, even when some changes were refused (the refused jobs
// keep their old revision in /api/jobs). Reloads stop when the stop
// begins: one under way finishes first, and POST /api/reload answers 503
// from then on.
//
// # Notifications
//
// The config's notify blocks are webhooks: the daemon hands each run the
// scheduler records to them (scheduler.WithOnRun, once per run across the
// fleet), and each of this replica's runs going on past its alert_after as
// the event running_long (scheduler.WithOnRunningLong, likewise once),
// and each job that paused itself (pause_after_failures) as the event
// auto_paused (scheduler.WithOnRun, from the replica whose finish paused
// it, which also appends its audit entry: action pause, actor "replica:"
// and its id, the note),
// keeps those whose outcome and job a block wants on a queue of
// 256 (more are dropped, with a WARN at most once a minute), and sends
// them from one goroutine: POST, JSON (NotificationJSON) or Slack's
// {"text"}, each try bounded by the block's timeout, and tried again after
// a network error, a 5xx or a 429 (1s, 2s, 4s... up to 30s between
// tries). Delivery is thus at least once; every try carries the run's key
// (runKey: job, tick, trigger, fencing token and outcome, hashed) as its
// Idempotency-Key header, and the JSON body as idempotency_key, so that a
// receiver drops repeats. A manual run's parameters go by name only
// (param_names), never their values. A graceful stop sends what is queued within 5s,
// then gives up on the rest. Logs name the block, the job and the tick,
// never the URL. The daemon's logs give durations as Go duration strings
// (newLogger), in JSON too.
//
// # The fleet in view
//
// Each daemon reports itself in the store (fleet.Store.Report): its
// replica id, version (Version: the module's, and the commit of a build
// from a checkout), config digest (of the config in effect, so a reload
// shows), jobs, and the runs under way on it (job, tick, since;
// scheduler.Status), the first 50 of each with job_count and
// running_count. It reports at once as its scheduler starts, on a
// goroutine of its own (a slow Redis does not delay the scheduler), then
// every 5s, and once more after its scheduler has stopped, to say it
// stopped ("stopped", at once). A report is one script call that writes
// this replica's entry (about 1 kB) and drops the entries due, O(log n):
// about 25µs of Redis, measured with 30 replicas of 2,000 jobs; its reply
// is one integer. The store stamps it with its own clock (Redis TIME):
// last_seen, gone_at and started_at (the process's first report) are on
// Redis's clock; a run's since is on its replica's clock, and the page's
// "ago" on the serving replica's. A replica whose reports stop (SIGKILL, a
// lost network) is "gone" 15s after its last one (three missed reports).
// Either is listed, with when it was last seen and gone, for
// fleet.ReplicaKeep (an hour), then dropped. These are constants, not
// settings. A live replica whose config digest differs from that of most
// live replicas is marked other_config (on a tie, the answering
// replica's, or the command's config file, counts as most); other_version
// likewise for its version; stopped and gone replicas are never marked.
// GET /api/replicas, the Replicas page and `scheduler replicas` (through
// Redis, or the daemon's admin API without Redis or without a config file)
// show the same list; each read reads every report (30 replicas of 2,000
// jobs: about 40 kB, 90µs of Redis). On the in-memory backend the fleet
// is the one daemon. These are per replica process; the scheduler's
// memberships, which rank replicas for each tick, are per group of jobs.
//
// # Backfill
//
// scheduler backfill and POST /api/jobs/{name}/backfill start a backfill
// (scheduler.Backfill; its semantics are in the scheduler package's doc,
// "Backfill"); they need scope operate, and are in the audit trail
// (action backfill, target the job, the note its id, range, tick count and
// rate; cancel-backfill, target "ID (JOB)"), with the actor as the
// backfill's By. -from and -to are RFC 3339 or a date, read in UTC
// (time.ParseInLocation with a zone-less layout); -rate is N/s, N/m, N/h
// or N a second. A time or rate that does not parse is a usage error
// (exit 2; 400); the scheduler's refusals (ErrInvalid) exit 1 (400), and
// so does a range that overlaps a running backfill of the job
// (ErrBackfillOverlap; 409), naming it. A dry run prints the first
// scheduler.MaxBackfillListed ticks and says how many there are ("total"
// in its JSON).
// The command prints the id on stdout, then follows the backfill, reading
// it every 500ms (through Redis, or GET /api/backfills without it): when
// stdout is a terminal (golang.org/x/term) one line rewritten after \r and
// cleared to its end; else a line per change, so a log or a pipe gets a
// readable history. The estimate is the ticks left at the slower of the
// rate and the pace the command has seen since it began following (on
// its own clock). The first SIGINT on a terminal (stdin and stdout) asks "cancel backfill ID? [y/N]"; yes cancels it, anything else
// (and SIGINT without a terminal) only detaches: the backfill goes on in
// the fleet, and the command says how to cancel it. The job's page lists
// its running backfills with a progress bar and a Cancel button (DELETE
// /api/backfills/{id}, after a confirm).
//
// # Stopping
//
// On the first SIGTERM or SIGINT, /readyz turns 503 and the scheduler stops
// gracefully (scheduler.Shutdown, bounded by shutdown_timeout): running
// jobs are cancelled, exec jobs get SIGTERM then SIGKILL after their
// grace, each tick is handed off (or abandoned, per on_shutdown) and its
// lock released at once, so another replica takes it over. Then the admin
// listener closes and Run returns nil (exit 0). A second signal stops at
// once: runs still going are finished as on a forced stop, exec jobs'
// process groups get SIGKILL (execjob.KillRunning), and it exits 1.
//
// Exec jobs run in process groups of their own, which are ended when a run
// is cancelled. Their orphans are re-parented to PID 1: in a container, run
// the scheduler under an init that reaps them (tini, or the runtime's
// --init), not as PID 1 itself.
package daemon
