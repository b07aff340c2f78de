GO ?= go
# The oldest Go the library module supports (its go line); CI tests it too.
OLDEST_GO ?= go1.25.0
# The modules of this repository, apart from bench (see README, Layout).
# go.work develops them together, from this checkout; no go.mod has a
# replace directive (see RELEASING.md).
MODULES := . cmd/scheduler chaos examples
# The version at which the modules that are not released require the
# library and the command (and the command requires the library until its
# first release): go.work maps it to this checkout.
PLACEHOLDER := v0.0.0-00010101000000-000000000000

# TEST_JOBS: how many modules make test tests at once, longest first (chaos
# and cmd/scheduler mostly wait on their replicas' ticks; the library's
# tests are the heaviest). Three keep make test green beside a CPU hog (see
# CONTRIBUTING.md, "How long make test takes").
# TEST_PARALLEL: how many tests marked t.Parallel the library's packages run
# at once; most of them wait on leases and ticks, not on the CPU, and the ones
# that time something run alone. The other modules keep go test's default.
TEST_JOBS ?= 3
TEST_PARALLEL ?= 8
TEST_TARGETS := $(addprefix test/,chaos . cmd/scheduler examples bench)

.PHONY: test $(TEST_TARGETS) test-oldest-go check-modules check-deps chaos soak bench lint run tidy

## test: check the modules' go.mod files, then vet and race-test every module, and the bench module's own tests, three modules at a time, each module's output together (needs redis-server and redis-sentinel in PATH; the tests start their own)
test: check-modules check-deps
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) -O $(TEST_TARGETS)

# One module's vet and tests; bench's own tests run without -race (its
# packages are measuring programs). The library's tests run outside the
# workspace (GOWORK=off), with the lowest versions its go.mod asks for, not
# the newer ones the command's module brings into the workspace.
$(TEST_TARGETS): test/%:
	@echo "== $*"
	@cd $* && $(if $(filter .,$*),GOWORK=off) $(GO) vet ./... && $(if $(filter .,$*),GOWORK=off) $(GO) test $(if $(filter bench,$*),,-race) $(if $(filter .,$*),-parallel $(TEST_PARALLEL)) -count=1 ./...

## check-modules: no go.mod has a replace or exclude directive, which would stop `go install github.com/lockcron/lockcron/cmd/scheduler@TAG` (go.work alone takes the modules from this checkout)
check-modules:
	@set -e; for m in $(MODULES) bench; do \
		if $(GO) mod edit -json $$m/go.mod | grep -Eq '"(Replace|Exclude)": \['; then \
			echo "$$m/go.mod has a replace or exclude directive: remove it; go.work takes the modules from this checkout (see RELEASING.md)"; exit 1; \
		fi; \
	done

## test-oldest-go: build and test the library module with the oldest Go it supports (fetched through the module proxy)
# GOWORK=off: the library module alone (go.work's go line is the newest
# module's).
test-oldest-go:
	GOWORK=off GOTOOLCHAIN=$(OLDEST_GO) $(GO) version
	GOWORK=off GOTOOLCHAIN=$(OLDEST_GO) $(GO) vet ./...
	GOWORK=off GOTOOLCHAIN=$(OLDEST_GO) $(GO) test -count=1 -parallel $(TEST_PARALLEL) ./...

## chaos: the whole fault suite, every scenario, with its table of figures (about 9 minutes; SEED=n replays a schedule)
chaos:
	cd chaos && $(GO) test -count=1 -timeout 20m -v -run 'TestChaos$$' . -args -chaos.full $(if $(SEED),-chaos.seed=$(SEED)) $(if $(TABLE),-chaos.table=$(TABLE))

# SOAK: how long make soak runs its faults (a Go duration).
SOAK ?= 30m

## soak: the fault suite's faults drawn at random, one after another on one fleet, for $(SOAK) (SOAK=10m shortens, SEED=n replays the draw), then the suite's table and the resources' curves (goroutines, sockets, RSS, Redis clients, Pub/Sub channels, keys), which must be flat
soak:
	cd chaos && $(GO) test -count=1 -timeout 24h -v -run 'TestSoak$$' . -args -chaos.soak=$(SOAK) $(if $(SEED),-chaos.seed=$(SEED)) $(if $(TABLE),-chaos.table=$(TABLE))

## bench: the benchmark against peer libraries, then the scheduler's, the fair lock's and the scripts' Redis time per call (bench/, a module of its own)
bench:
	cd bench && $(GO) run .
	cd bench && $(GO) run ./schedbench
	cd bench && $(GO) run ./fairbench
	cd bench && $(GO) run ./scriptbench

## check-deps: the scheduler links the run contract of jobs alone, not os/exec nor the exec and http jobs, and lock, scheduler and jobs have no init function
check-deps:
	@if GOWORK=off $(GO) list -deps ./scheduler | grep -Ex 'os/exec|github.com/lockcron/lockcron/jobs/.+'; then \
		echo "the scheduler package links the packages above: it may depend on the run contract (package jobs) only"; exit 1; \
	fi
	@if grep -rn --include='*.go' '^func init()' lock scheduler jobs; then \
		echo "no init function in a library package: a program enters what it needs from main"; exit 1; \
	fi

## lint: gofmt check, the go.mod and dependency checks, and go vet, every module
lint: check-modules check-deps
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES) bench; do (cd $$m && $(GO) vet ./...); done

## tidy: go mod tidy in every module. go mod tidy ignores go.work, so while a module is tidied, its requirements at $(PLACEHOLDER) are taken from this checkout through replace directives that are dropped again (a released version, such as the command's requirement of the library after a release, comes from the module proxy). Not go work sync: it would raise the library's requirements to the versions the command's module uses
tidy:
	@set -e; echo "== ."; $(GO) mod tidy; \
	for m in $(filter-out .,$(MODULES)) bench; do echo "== $$m"; \
		(cd $$m && \
		$(GO) mod edit -replace=github.com/lockcron/lockcron@$(PLACEHOLDER)=$(CURDIR) -replace=github.com/lockcron/lockcron/cmd/scheduler@$(PLACEHOLDER)=$(CURDIR)/cmd/scheduler && \
		{ $(GO) mod tidy; status=$$?; \
		$(GO) mod edit -dropreplace=github.com/lockcron/lockcron@$(PLACEHOLDER) -dropreplace=github.com/lockcron/lockcron/cmd/scheduler@$(PLACEHOLDER); \
		exit $$status; }); \
	done

## run: the scheduler daemon with config.example.hcl, on the in-memory backend (Ctrl-C stops it)
run:
	cd cmd/scheduler && $(GO) build -o ../../bin/scheduler .
	./bin/scheduler run -config config.example.hcl
