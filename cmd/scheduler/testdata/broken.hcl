# A config with four mistakes, for TestValidate: each is reported with its
# file:line:col.
log {
  json  = true
  level = "loud"
}
job "typo" {
  # misspelled key
  scheduel = "@every 1s"
  exec { command = ["true"] }
}
job "bad-cron" {
  # three fields
  schedule = "* * *"
  exec {
    # empty command
    command = []
  }
}
