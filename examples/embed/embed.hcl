# embed.hcl: the config of examples/embed. Two func jobs, which the embed
# program registers in Go, beside an exec job, which any scheduler can run.
#
#   go run ./examples/embed validate -config examples/embed/embed.hcl
#   go run ./examples/embed run      -config examples/embed/embed.hcl
#
# No redis block: it runs on the in-memory backend, one process. Set
# REDIS_URL=redis://127.0.0.1:6379/0 to run it on several replicas.

# A graceful stop waits this long for running jobs; it must be longer than
# the exec job's grace.
shutdown_timeout = "15s"

admin {
  # Not 9090, so that it runs beside a scheduler started with `make run`.
  listen = "127.0.0.1:9091"
}

# A Go func, registered as "report": logs its tick and fencing token.
job "report" {
  schedule = "@every 10s"
  func     = "report"
  timeout  = "5s"
}

# A Go func, registered as "cleanup": five batches of 500ms, stopped
# between two batches when its ctx ends. On a stop, the tick is handed to
# another replica (on_shutdown = "handoff", the default).
job "cleanup" {
  schedule = "*/30 * * * * *"
  func     = "cleanup"
  timeout  = "20s"
  retries  = 1
}

# An exec job: a program, with the run's info in LOCKCRON_* variables.
job "disk-usage" {
  schedule = "@every 1m"
  timeout  = "10s"

  exec {
    command = ["sh", "-c", "echo \"tick $LOCKCRON_TICK token $LOCKCRON_TOKEN\"; df -h ."]
    grace   = "2s"
  }
}
