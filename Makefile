GO ?= go

.PHONY: test chaos bench lint run

## test: vet and race-test everything, and the bench module's own tests (needs redis-server and redis-sentinel in PATH; the tests start their own)
test:
	$(GO) vet ./...
	cd bench && $(GO) vet ./... && $(GO) test ./...
	$(GO) test -race -count=1 ./...

## chaos: the whole fault suite, every scenario, with its table of figures (about 9 minutes; SEED=n replays a schedule)
chaos:
	$(GO) test -count=1 -timeout 20m -v -run 'TestChaos$$' ./chaos -args -chaos.full $(if $(SEED),-chaos.seed=$(SEED)) $(if $(TABLE),-chaos.table=$(TABLE))

## bench: the benchmark against peer libraries, then the scheduler's and the fair lock's (bench/, a module of its own)
bench:
	cd bench && $(GO) run .
	cd bench && $(GO) run ./schedbench
	cd bench && $(GO) run ./fairbench

## lint: gofmt check and go vet, library and bench
lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd bench && $(GO) vet ./...

## run: the scheduler daemon with config.example.hcl, on the in-memory backend (Ctrl-C stops it)
run:
	$(GO) build -o bin/scheduler ./cmd/scheduler
	./bin/scheduler run -config config.example.hcl
