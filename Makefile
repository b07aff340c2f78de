GO ?= go
# The oldest Go the library module supports (its go line); CI tests it too.
OLDEST_GO ?= go1.25.0
# The modules of this repository, apart from bench (see README, Layout).
MODULES := . cmd/scheduler chaos examples

# TEST_JOBS: how many modules make test tests at once, longest first (chaos
# mostly waits on its replicas' ticks; the library's tests are the heaviest).
# TEST_PARALLEL: how many tests marked t.Parallel the library's packages run
# at once; most of them wait on leases and ticks, not on the CPU, and the ones
# that time something run alone. The other modules keep go test's default.
TEST_JOBS ?= 2
TEST_PARALLEL ?= 8
TEST_TARGETS := $(addprefix test/,chaos . cmd/scheduler examples bench)

.PHONY: test $(TEST_TARGETS) test-oldest-go chaos bench lint run tidy

## test: vet and race-test every module, and the bench module's own tests, two modules at a time, each module's output together (needs redis-server and redis-sentinel in PATH; the tests start their own)
test:
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) -O $(TEST_TARGETS)

# One module's vet and tests; bench's own tests run without -race (its
# packages are measuring programs).
$(TEST_TARGETS): test/%:
	@echo "== $*"
	@cd $* && $(GO) vet ./... && $(GO) test $(if $(filter bench,$*),,-race) $(if $(filter .,$*),-parallel $(TEST_PARALLEL)) -count=1 ./...

## test-oldest-go: build and test the library module with the oldest Go it supports (fetched through the module proxy)
test-oldest-go:
	GOTOOLCHAIN=$(OLDEST_GO) $(GO) version
	GOTOOLCHAIN=$(OLDEST_GO) $(GO) vet ./...
	GOTOOLCHAIN=$(OLDEST_GO) $(GO) test -count=1 -parallel $(TEST_PARALLEL) ./...

## chaos: the whole fault suite, every scenario, with its table of figures (about 9 minutes; SEED=n replays a schedule)
chaos:
	cd chaos && $(GO) test -count=1 -timeout 20m -v -run 'TestChaos$$' . -args -chaos.full $(if $(SEED),-chaos.seed=$(SEED)) $(if $(TABLE),-chaos.table=$(TABLE))

## bench: the benchmark against peer libraries, then the scheduler's and the fair lock's (bench/, a module of its own)
bench:
	cd bench && $(GO) run .
	cd bench && $(GO) run ./schedbench
	cd bench && $(GO) run ./fairbench

## lint: gofmt check and go vet, every module
lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES) bench; do (cd $$m && $(GO) vet ./...); done

## tidy: go mod tidy in every module
tidy:
	@set -e; for m in $(MODULES) bench; do echo "== $$m"; (cd $$m && $(GO) mod tidy); done

## run: the scheduler daemon with config.example.hcl, on the in-memory backend (Ctrl-C stops it)
run:
	cd cmd/scheduler && $(GO) build -o ../../bin/scheduler .
	./bin/scheduler run -config config.example.hcl
