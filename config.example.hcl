# config.example.hcl: every setting of the lockcron scheduler, with its
# default. As it stands it runs anywhere, on the in-memory backend (one
# process, no Redis):
#
#   scheduler validate -config config.example.hcl
#   scheduler run      -config config.example.hcl
#
# Syntax: HCL. Durations are strings such as "500ms", "30s", "5m", "1h30m",
# and must be positive; leave a setting out to get its default.
#
# Environment variables override this file: LOCKCRON_ and the setting's
# path in upper case, "__" between levels:
#
#   LOCKCRON_LOG__LEVEL=debug        log { level = "debug" }
#   LOCKCRON_REDIS__URL=redis://...  redis { url = "..." }  (REDIS_URL too)
#   LOCKCRON_ADMIN__LISTEN=:9090     admin { listen = ":9090" }
#   LOCKCRON_LOCK__LEASE=15s         lock { lease = "15s" }
#   LOCKCRON_REDIS__ADDRS=a:6379,b:6379  lists are comma-separated
#
# Jobs, notify blocks and token blocks cannot be set from the environment.
# An empty variable counts as unset. Unknown keys are errors, with a
# suggestion when they look like a typo: `scheduler validate` prints every
# error at once, with its line.

# The name of this replica in lock owners, logs, spans and the LOCKCRON_REPLICA
# of exec jobs. Default: host name and process id, such as "web-3-4711".
# Unique across the fleet; for a job with replicas = "all", stable across
# restarts too (two replicas with one id would run it once between them).
# replica_id = "web-3"

# How long a graceful stop (SIGTERM, Ctrl-C) waits for running jobs: they
# are cancelled at once, their ticks handed to another replica, and their
# locks released when they return. Past this bound the locks are released
# anyway. It must be longer than every exec job's grace.
shutdown_timeout = "30s"

# Reload this file when it changes, as on SIGHUP, `scheduler reload` or
# POST /api/reload: jobs added, removed or changed are applied without a
# restart; a file that is not valid is logged and changes nothing. Every
# other setting is read once at start (a change is logged as needing a
# restart). A burst of writes makes one reload.
# watch = false

# Who claims each tick. Replicas keep a membership record in Redis and rank
# each other per job and tick (rendezvous hashing): the first in rank claims
# at once; the others claim only if the tick is not done after
# claim_fallback times their rank, or at once when it is given back. So one
# replica, not every one, asks Redis for each tick. Correctness never
# depends on it: a replica unsure of the membership claims at once.
fleet {
  ranking        = true    # false: every replica claims every tick at once
  claim_fallback = "250ms" # the wait of the second in rank; the third waits twice as long
  member_ttl     = "3s"    # a replica that dies stops being ranked first within this
}

# Redis. Leave the block out (and REDIS_URL unset) to run on the in-memory
# backend: one replica, the same behaviour. Give url, or addrs:
#
# redis {
#   # One server: redis://[user:password@]host:port/db, rediss:// for TLS,
#   # or unix:///path/to/redis.sock. Settings below (username, password, db,
#   # tls) replace the URL's when they are set.
#   url = "redis://127.0.0.1:6379/0"
#
#   # Or addresses instead of url:
#   #   one address                  one server
#   #   several, with master_name    Sentinels, which name the primary
#   #   several, no master_name      Redis Cluster nodes (db must be 0)
#   # addrs       = ["10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"]
#   # master_name = "mymaster"
#
#   # ACL user and password. Prefer password_env, the name of an environment
#   # variable that holds the password, to a password in this file; a
#   # password in a file that others can read is warned about.
#   # username     = "lockcron"
#   # password     = "..."
#   password_env = "REDIS_PASSWORD"
#
#   # TLS. A tls block turns it on (unless enabled = false); rediss:// does too.
#   # tls {
#   #   enabled              = true
#   #   ca_file              = "/etc/ssl/redis-ca.pem"  # default: the system's CAs
#   #   cert_file            = "/etc/ssl/client.pem"    # client certificate (mutual TLS),
#   #   key_file             = "/etc/ssl/client-key.pem"  # with its key
#   #   server_name          = "redis.internal"         # default: the host dialled
#   #   insecure_skip_verify = false                    # never in production (warned about)
#   # }
#
#   # Database number (not with Cluster). Default 0, or the URL's.
#   db = 0
#
#   # Prefix of every key: a lock named n lives at <key_prefix>:{n}.
#   key_prefix = "lockcron"
#
#   # Bound on each command (dial, read, write). It, plus
#   # lock.replica_ack.timeout when set, must be shorter than lock.lease/2:
#   # renewals go every lease/3 from the last one sent, and the lease counts
#   # as lost at 9/10 of it after the last successful renewal was sent, so a
#   # renewal that hangs this long must leave time for another. Raise it on a
#   # slow network.
#   timeout = "3s"
#
#   # How long `scheduler run` waits at start-up for Redis to answer: it
#   # retries (100ms, doubling to 2s between attempts), logging each failed
#   # attempt, and exits 1 if Redis has not answered by then. /healthz
#   # answers meanwhile; /readyz is 503.
#   connect_timeout = "30s"
# }

lock {
  # The watchdog lease: a held lock expires this long after its holder
  # stops renewing it (a crash, SIGKILL), and is renewed every lease/3
  # while held. At least 1s. Jobs may run far longer than the lease.
  lease = "30s"

  # How long a waiter for a fair lock keeps its place in the queue without
  # renewing it: a crashed waiter stops delaying the others after this.
  waiter_ttl = "3s"

  # Wait, on each acquisition and renewal, until this many Redis replicas
  # have the lock (WAIT), for at most timeout; an acquisition they do not
  # acknowledge in time fails. Narrows the window in which a failover loses
  # a lock. Needs Redis.
  # replica_ack {
  #   replicas = 1
  #   timeout  = "500ms"
  # }
}

admin {
  # The admin HTTP listener: /healthz, /readyz, /metrics, the JSON API and
  # the status page. Default loopback only; a listener others can reach
  # should have tokens.
  listen = "127.0.0.1:9090"

  # Bearer tokens, each with a scope: "read" reads the JSON API and the
  # status page; "operate" also triggers, pauses and resumes jobs; "admin"
  # also reloads the config. One block per token (no default: none). scope
  # and value_env are required: value_env names the environment variable
  # that holds the token (not inherited by exec jobs). Names and values must
  # differ from block to block; the name is what logs show, never the value.
  # With any token, every call of the JSON API and the page needs one
  # (Authorization: Bearer TOKEN); /healthz, /readyz and /metrics stay open.
  # Without tokens, reads are open and the changes are taken from loopback
  # only. A change of the tokens takes a restart.
  # token "dashboard" {
  #   scope     = "read"
  #   value_env = "LOCKCRON_READ_TOKEN"
  # }
  # token "oncall" {
  #   scope     = "operate"
  #   value_env = "LOCKCRON_ONCALL_TOKEN"
  # }

  # The single token of before the scopes, with scope admin (named
  # "admin.token" in logs). Prefer token_env, the name of an environment
  # variable holding it.
  # token_env = "ADMIN_TOKEN"
  # token     = "..."

  # With tokens, open the reads (the GET routes and the page) to callers
  # without one again; the changes still need theirs. Default false.
  # public_read = false
}

telemetry {
  # Spans: "none" (default), "stdout" (pretty JSON, for trying out) or
  # "otlp" (to otlp_endpoint).
  traces = "none"

  # Metrics: "prometheus" (default, served at /metrics on the admin
  # listener), "otlp" (pushed to otlp_endpoint) or "none".
  metrics = "prometheus"

  # The OTLP collector: host:port, or an http(s):// URL.
  # Required when traces or metrics is "otlp".
  # otlp_endpoint = "127.0.0.1:4318"   # OTLP over HTTP

  # Left out of the config, traces and metrics follow OpenTelemetry's
  # standard variables when they are set (OTEL_TRACES_EXPORTER,
  # OTEL_METRICS_EXPORTER: otlp, console, prometheus, none; with
  # OTEL_EXPORTER_OTLP_ENDPOINT and the rest), else the defaults above.
  #
  # Spans and metrics carry service.name "lockcron" and
  # service.instance.id the replica id; the standard OTEL_SERVICE_NAME and
  # OTEL_RESOURCE_ATTRIBUTES override and add to them. A run's trace goes
  # on into its job: traceparent on http jobs, TRACEPARENT for exec jobs.
}

log {
  # "trace", "debug", "info" (default), "warn" or "error".
  level = "info"

  # One JSON object per line instead of text (go-redis's own lines too).
  # Durations are Go duration strings ("1.5s") in both formats.
  json = false
}

# The run history, kept in Redis beside each job's ledger (scheduler
# history JOB, GET /api/jobs/NAME/runs, the status page): per job, the
# latest `keep` runs, none older than `max_age`. A job may set its own with
# history_keep and history_max_age. Error text is kept without the config's
# secrets.
history {
  keep    = 100
  max_age = "720h"
}

# The audit trail (scheduler audit, GET /api/audit, the status page's
# Audit page): every trigger, pause, resume, freeze, unfreeze, backfill,
# cancel-backfill and reload made through the admin API or the command,
# one entry each across the fleet, with its
# time, action, target, actor, replica, remote address and note. Kept in
# Redis as one capped stream (key_prefix:audit): the latest `keep`
# entries, none older than `max_age`. Without Redis it is kept in the
# daemon's memory (the latest `keep`), and lost when it stops. A change
# takes a restart.
audit {
  keep    = 1000
  max_age = "2160h"
}

# Webhooks: notify "name" { ... }, one block each. Each is called once per
# run across the fleet, for the outcomes in `on`, by the replica that
# recorded the run. The URL is a secret (Slack's holds a token): give it in
# url_env, or in url with the file readable by its owner only. Delivery is
# at least once: every try carries the run's key in an Idempotency-Key
# header, so that the receiver can drop a repeat.
# notify "ops" {
#   url_env = "OPS_WEBHOOK_URL"
#   format  = "slack"                          # or "json" (default)
#   on      = ["failed", "lost_lock", "missed", "deadline_missed", "running_long", "auto_paused"] # the default
#   jobs    = ["hello"]                        # default every job
#   timeout = "5s"
#   retries = 3
# }

# Calendars: calendar "name" { ... }, one block each: times in which the
# ticks of the jobs whose exclude names the calendar are not run. Such a
# tick is not claimed; it is recorded once across the fleet in the history
# as "excluded", with the calendar's name as its reason. A tick falls in a
# calendar when its day is one of dates ("2026-12-25", or "*-12-25" every
# year) or in one of ranges (inclusive, whole dates), or when its minute
# matches one of cron (five fields, robfig/cron, or a descriptor such as
# @daily; not @every, a period that names no times). Each is read in time_zone,
# default the zone of the job that excludes it. A calendar no job excludes
# is warned about. Default: none.
# calendar "holidays" {
#   dates     = ["2026-12-25", "*-01-01"]
#   ranges    = [["2026-12-24", "2027-01-03"]]
#   cron      = ["* * * * SAT,SUN"]            # every minute of the weekend
#   time_zone = "Europe/Berlin"                # default the job's
# }
#
# Freezes are made at run time, not here: scheduler freeze -until 2h -note
# "release" stops the ticks of every job (or -jobs "report-*") on every
# replica until then.

# Jobs: job "name" { ... }, one block each. The name is unique, without
# braces; it names the job's lock (unless lock_name says otherwise), tick
# ledger, logs and metrics. Each job has exactly one kind: exec, http or
# func. Every replica must have the same jobs.

# An exec job: runs a program directly (no shell unless you ask for one).
# It gets the run's info in LOCKCRON_JOB, LOCKCRON_TICK (the scheduled time,
# RFC 3339 UTC), LOCKCRON_TOKEN (fencing token), LOCKCRON_REPLICA,
# LOCKCRON_ATTEMPT and LOCKCRON_TRIGGER (a manual run's number, empty for
# scheduled runs); its output is logged line by line. If the scheduler dies,
# even by SIGKILL, the job's whole process group is killed with it.
job "hello" {
  # When: cron with 5 fields, or 6 with seconds first ("*/10 * * * * *");
  # descriptors (@hourly, @daily, @every 30s: multiples of 30s since the
  # Unix epoch, so every replica agrees); an optional CRON_TZ=Zone prefix.
  schedule = "@every 10s"

  # Zone of a schedule without CRON_TZ=. Default UTC, so replicas on
  # machines set to different zones agree on every tick. "Local" is refused.
  time_zone = "UTC"

  # "reentrant" (default) or "fair": claims that wait for the lock (jobs
  # sharing it, a tick queued behind a run) get it first come, first served
  # across replicas. Jobs that share a lock must use the same kind.
  lock_kind = "reentrant"

  # The lock the runs take; jobs that share one never run at the same time.
  # Default: the job's name.
  lock_name = "hello"

  # Bound on each try; its context ends then, and an exec job's process
  # gets SIGTERM. Default: none. A timeout longer than the time between
  # ticks is warned about (overlap decides what those ticks do).
  timeout = "5s"

  # A tick whose lock is held by a run of an earlier tick: "skip" (default)
  # gives it up, recorded skipped_busy in the history with the holder
  # (consecutive ones as one entry; also while a SIGKILLed replica's lock
  # lasts, up to lock.lease); "queue" runs it when that run ends;
  # "replace" ends that run, wherever it runs (outcome replaced; an exec
  # job gets SIGTERM, then SIGKILL after its grace), and runs the tick as
  # soon as the lock is free.
  overlap = "skip"

  # Ticks missed while every replica was down: "skip" (default) drops
  # them; "run_once" runs the latest of them once at start, if it is no
  # older than misfire_grace (default 1h; only used with run_once).
  misfire = "skip"
  # misfire_grace = "1h"

  # How late after its tick a run may start. A tick whose run cannot start
  # by then (the lock held by another run, overlap queue, the concurrency
  # group full, a retry's backoff, a takeover, a misfire catch-up) is not
  # run: it is recorded once across the fleet as "deadline_missed" in the
  # history, the metrics and the notify blocks. Measured on Redis's clock.
  # Default: none (a tick starts however late).
  # start_deadline = "30s"

  # How long a run may go before it is announced as running long: once per
  # run, by the replica that runs it, with a WARN log line, the notify
  # event "running_long" and a badge on the status page; the gauge
  # lockcron_job_running_seconds says how long the run has gone. The run
  # goes on (timeout stops it). Default: none (no announcement).
  # alert_after = "5m"

  # After this many failed runs in a row (after their retries, whichever
  # replicas ran them), the job pauses itself on every replica, with the
  # note "paused after N failed runs in a row": the notify event
  # "auto_paused", a WARN log line and an audit entry by the replica. A run
  # that succeeds starts the count again; `scheduler resume` lifts the
  # pause and starts it again. Default 0: never.
  # pause_after_failures = 0

  # Calendars whose times this job's ticks are not run in (see calendar
  # above). Default: none.
  # exclude = ["holidays"]

  # A failed try is tried again up to retries times within the same tick,
  # waiting backoff (default 1s) before the first retry, doubling each time
  # up to 1m.
  retries = 1
  backoff = "1s"

  # A run cut short by this replica's stop: "handoff" (default) gives the
  # tick back, and a replica that waits for it runs it at once; "abandon"
  # marks it done.
  on_shutdown = "handoff"

  # Limit on runs going at once, across the fleet, of all the jobs in one
  # concurrency_group (default: the lock's name); each job of a group must
  # give the same max_concurrency. Default: no limit.
  # max_concurrency   = 2
  # concurrency_group = "reports"

  exec {
    # The program and its arguments. "sh -c" for a shell.
    command = ["sh", "-c", "echo hello from $LOCKCRON_REPLICA at $LOCKCRON_TICK"]

    # Added to the environment (names may not start with LOCKCRON_).
    env = {
      GREETING = "hello"
    }

    # Working directory. Default: the scheduler's.
    # dir = "/srv/app"

    # After SIGTERM (timeout, lost lock, stop), the process group has this
    # long before SIGKILL. Default 10s; must be shorter than shutdown_timeout.
    grace = "2s"
  }
}

# A func job: Go code registered with jobs.Register("name", fn) in the
# program that embeds the scheduler. The scheduler command registers none,
# so this one is left commented out: a name that is not registered is an
# error.
# job "nightly-report" {
#   schedule = "CRON_TZ=Europe/Berlin 0 2 * * *"
#   timeout  = "10m"
#   misfire  = "run_once"
#   # Not started by 04:00 (a long outage, a full concurrency group): not
#   # at all that night; the fleet records it as deadline_missed.
#   start_deadline = "2h"
#   func     = "nightly-report"
# }

# An http job: one request per run; a status outside expect_status
# (default: any 2xx) fails the try. The run's info goes along as
# Lockcron-Job, Lockcron-Tick, Lockcron-Token, Lockcron-Replica,
# Lockcron-Attempt and Lockcron-Trigger headers. Commented out: it needs a
# server to call, and would fail (and log) every minute on a machine
# without one.
# job "ping" {
#   schedule = "*/1 * * * *"
#   timeout  = "10s"
#   retries  = 2
#   http {
#     url           = "https://example.internal/hooks/cron"
#     method        = "POST"          # default GET
#     headers       = { "Content-Type" = "application/json" }
#     body          = "{\"source\": \"lockcron\"}"
#     expect_status = [200, 204]
#   }
# }

# A job that runs on every replica: per-host work, such as clearing a
# local cache or rotating a local file. replicas = "all" runs each tick on
# every live replica, once on each (default "one": once across the
# fleet). No fleet-wide lock is taken: each replica claims the tick in a
# ledger of its own, so it never runs a tick twice, also after a restart,
# as long as its replica_id stays the same (set it to the pod's name,
# unique across the fleet and stable across restarts: the default, host
# name and process id, makes a restarted replica a new one, and replicas
# that share an id share one record: the job runs once for them all). overlap, timeout and retries apply to each replica's runs;
# max_concurrency, pause_after_failures, after and params are refused with it, and
# on_shutdown is "abandon" (a stopping replica's run is its own: no other
# replica can take it over). Each run is in the history with its replica;
# `scheduler jobs` and the status page show each replica's last outcome.
# Commented out, as the other examples below "hello" but "report": this
# file runs those two.
# job "clear-local-cache" {
#   schedule = "@every 10m"
#   replicas = "all"
#   timeout  = "1m"
#   exec {
#     command = ["sh", "-c", "rm -rf /var/cache/app/tmp/*"]
#     grace   = "2s"
#   }
# }

# A run that may hang (a stuck connection, a lock on the database) and
# whose next run does the same work: overlap = "replace" ends the run that
# still holds the lock when the next tick comes, wherever in the fleet it
# runs (the process group gets SIGTERM, then SIGKILL after exec's grace),
# records it "replaced" in the history, and runs the new tick as soon as
# the lock is free. Commented out: it would run every minute.
# job "cache-warm" {
#   schedule = "*/1 * * * *"
#   overlap  = "replace"
#   exec {
#     command = ["/app/warm-cache"]
#     grace   = "5s"
#   }
# }

# A job that takes parameters on its manual runs: `scheduler trigger
# report -param customer=42 -param month=2026-10`, POST
# /api/jobs/report/trigger with {"params": {"customer": "42"}}, or the form
# beside its Trigger button on the status page. params lists the names it
# accepts (a-z, 0-9 and _); a run given another name is refused with this
# list, and so is a value over 4 kB or with a control character. The exec
# job gets them as LOCKCRON_PARAM_CUSTOMER and LOCKCRON_PARAM_MONTH (an
# http job as Lockcron-Param-Customer and Lockcron-Param-Month headers,
# each _ of a name made a -: report_date is Lockcron-Param-Report-Date);
# scheduled runs get none. Each trigger runs once, in the order Redis
# counted them. They are kept in the run's history entry and
# the trigger's audit entry; logs name them, never their values.
job "report" {
  schedule = "0 6 1 * *"
  params   = ["customer", "month"]
  exec {
    command = ["sh", "-c", "echo report for $${LOCKCRON_PARAM_CUSTOMER:-every customer}, $${LOCKCRON_PARAM_MONTH:-last month}"]
  }
}

# A job that follows another: `after` instead of `schedule`. It runs once
# across the fleet after each run of the jobs named that ended as `when`
# says, with the parent's tick as its LOCKCRON_TICK and the parent run as
# LOCKCRON_PARENT ("hello@2026-11-27T14:00:00Z"; http jobs: the
# Lockcron-Parent header). A manual run of the parent starts it too (with
# the parent's LOCKCRON_TRIGGER). With several parents it runs once all of
# them have finished the same tick so; they must share a schedule.
# `validate` refuses cycles, unknown names, a job after itself and
# `after` with `schedule`. Commented out to keep the example at two jobs
# running; take the #s off to see it follow hello.
# job "after-hello" {
#   after = ["hello"]
#
#   # The parents' outcome that starts it: "success" (default: the run
#   # returned without error), "failure" (it failed after its retries,
#   # was interrupted and abandoned, or was replaced by a later tick) or
#   # "always". Its runs queue: overlap is "queue" (no other is accepted).
#   when = "success"
#
#   exec {
#     command = ["sh", "-c", "echo following $LOCKCRON_PARENT"]
#     grace   = "2s"
#   }
# }
