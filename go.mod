module github.com/lockcron/lockcron

go 1.25

require (
	github.com/hashicorp/go-hclog v1.6.3
	github.com/redis/go-redis/v9 v9.16.0
	github.com/robfig/cron/v3 v3.0.1
	go.opentelemetry.io/otel v1.20.0
	go.opentelemetry.io/otel/metric v1.20.0
	go.opentelemetry.io/otel/trace v1.20.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.0.0-20220503163025-988cb79eb6c6
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/fatih/color v1.13.0 // indirect
	github.com/go-logr/logr v1.3.0 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/mattn/go-colorable v0.1.12 // indirect
	github.com/mattn/go-isatty v0.0.14 // indirect
)
