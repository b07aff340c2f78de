// Command bench compares lockcron's Redis mutex with redsync and redislock
// on one throwaway redis-server, side by side in one run:
//
//  1. uncontended Lock+Unlock pairs from one goroutine (floor: two PINGs);
//  2. 64 goroutines, each on its own name (floor: 64 goroutines of PINGs);
//  3. 8 and 32 goroutines on one name, each holding the lock for -hold
//     (ceiling: 1/(mean hold + two PING round trips));
//
// then the lock's two faults (faults.go; -faults runs only these).
//
// It measures and prints; it never fails on timing. Run it with
// `cd bench && go run .` or `make bench` from the repository root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
	"github.com/lockcron/lockcron/internal/redistest"
)

type config struct {
	duration time.Duration // measured time per scenario and implementation
	rounds   int           // the duration is split into this many interleaved windows
	warmup   time.Duration // unmeasured loop before scenarios 1 and 2
	hold     time.Duration // hold time in the contended scenario
	wait     time.Duration // timeout of every operation (and lockcron's WithWait)
	verbose  bool
	filter   *regexp.Regexp

	cpuProfile string // -cpuprofile: lockcron's uncontended rows, run once more (profileLockcron)
	memProfile string // -memprofile: the allocations of its scenario 1

	srv          *redistest.Server
	ctl          *redis.Client // INFO and the PING RTT, never measured
	infoOverhead int64         // INFO calls counted inside one before/after window
	rtt          time.Duration // mean PING round trip of scenario 1's floor (for the record)
	run          atomic.Int64
}

func (c *config) srvOptions() *redis.Options { return c.srv.Options() }
func (c *config) nextRun() int64             { return c.run.Add(1) }

func main() {
	cfg := &config{}
	flag.DurationVar(&cfg.duration, "duration", 4*time.Second, "measured time per implementation and scenario (24 rows; scenario 3 adds one accounting window per row)")
	flag.IntVar(&cfg.rounds, "rounds", 8, "split -duration into this many windows, interleaved across implementations")
	flag.DurationVar(&cfg.warmup, "warmup", 300*time.Millisecond, "unmeasured warm-up before each uncontended/parallel run")
	flag.DurationVar(&cfg.hold, "hold", time.Millisecond, "time each goroutine holds the contended lock")
	flag.DurationVar(&cfg.wait, "timeout", 5*time.Second, "timeout of every lock and unlock call (lockcron: also its WithWait)")
	flag.BoolVar(&cfg.verbose, "v", false, "print per-command server counts for each contended run")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "after scenarios 1 and 2, run lockcron's rows once more, unmeasured, with a CPU profile of this process written to this file (samples labelled scenario 1 or 2: go tool pprof -tagfocus scenario:1)")
	flag.StringVar(&cfg.memProfile, "memprofile", "", "likewise, write the allocations of lockcron's extra scenario 1 run to this file (pprof allocs profile)")
	run := flag.String("run", "", "only run implementations whose name matches this regexp (the floor always runs)")
	faultsOnly := flag.Bool("faults", false, "run only the lock faults' rows (restart and slow network), about a minute")
	flag.Parse()
	if *faultsOnly {
		benchutil.Main("bench", func(ctx context.Context) error { return runFaults(ctx, os.Stdout) })
		return
	}
	if cfg.rounds < 1 || cfg.duration <= 0 {
		fmt.Fprintln(os.Stderr, "bench: -rounds must be ≥ 1 and -duration > 0")
		os.Exit(2)
	}
	if cfg.memProfile != "" {
		runtime.MemProfileRate = 0 // profileLockcron samples its own run alone
	}
	if *run != "" {
		re, err := regexp.Compile(*run)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: -run:", err)
			os.Exit(2)
		}
		cfg.filter = re
	}
	benchutil.Main("bench", func(ctx context.Context) error { return mainErr(ctx, cfg) })
}

func mainErr(ctx context.Context, cfg *config) error {
	srv, err := benchutil.Launch()
	if err != nil {
		return err
	}
	defer srv.Close()
	cfg.srv, cfg.ctl = srv.Server, srv.Ctl

	version, err := benchutil.ServerVersionOr(ctx, cfg.ctl, "?")
	if err != nil {
		return err
	}
	// Calibrate: how many INFO calls does a before/after pair add to the
	// difference? (The server counts a command after running it, so the
	// first INFO shows up in the second: normally 1.)
	a, err := commandStats(ctx, cfg.ctl)
	if err != nil {
		return err
	}
	b, err := commandStats(ctx, cfg.ctl)
	if err != nil {
		return err
	}
	cfg.infoOverhead = benchutil.Sum(benchutil.StatsDelta(a.Calls, b.Calls))

	fmt.Printf("lockcron bench: %s, Go %s, GOMAXPROCS %d, redis-server %s on %s (loopback TCP)\n",
		time.Now().Format("2006-01-02 15:04"), strings.TrimPrefix(runtime.Version(), "go"), runtime.GOMAXPROCS(0), version, srv.Addr())
	fmt.Printf("load average at the start: %s (other processes on this machine add noise; the runs are interleaved so that it hits all alike)\n", benchutil.Loadavg())
	fmt.Printf("%v per implementation and scenario, in %d interleaved windows (+%v warm-up in 1 and 2); hold %v; timeout %v per call\n\n",
		cfg.duration, cfg.rounds, cfg.warmup, cfg.hold, cfg.wait)

	impls := implementations()
	var results []*result
	selected := func(im impl) bool { return im.floor || cfg.filter == nil || cfg.filter.MatchString(im.name) }
	progress := func(r *result) {
		fmt.Fprintf(os.Stderr, "  %-28s %-30s %9.0f/s  fails %d errs %d\n", r.scenario, r.impl, r.rate, r.Fails, r.Errs)
	}

	// Warm up the process, the server and the loopback path before the
	// first measured run, which would otherwise pay for them.
	for _, n := range []int{1, 64} {
		r, err := newPairsRunner(ctx, cfg, impls[0], "warm-up", n)
		if err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		_ = r.round(ctx, time.Second)
		r.finish()
	}

	// Scenarios 1 and 2: lockcron (variant A: it differs from B only under
	// contention), the peers and the floor.
	var pairImpls []impl
	for _, im := range impls {
		if im.name != nameLockcronB && selected(im) {
			pairImpls = append(pairImpls, im)
		}
	}
	for _, sc := range []struct {
		name string
		n    int
	}{{"1: 1 goroutine, 1 name", 1}, {"2: 64 goroutines, 64 names", 64}} {
		rs, err := runScenario(ctx, cfg, pairImpls, func(im impl) (runner, error) {
			return newPairsRunner(ctx, cfg, im, sc.name, sc.n)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		floor := rs[0]
		if sc.n == 1 {
			cfg.rtt = (append(append(benchutil.Durations{}, floor.lock...), floor.unlock...)).Mean()
		}
		for _, r := range rs {
			r.reference = floor.rate
			if r.impl == nameLockcronA {
				r.impl = "lockcron"
			}
			progress(r)
		}
		results = append(results, rs...)
	}

	if err := profileLockcron(ctx, cfg, impls[1]); err != nil {
		return fmt.Errorf("profile: %w", err)
	}

	// Scenario 3: 8 and 32 goroutines on one name.
	var contImpls []impl
	for _, im := range impls {
		if im.contended && selected(im) {
			contImpls = append(contImpls, im)
		}
	}
	for _, n := range []int{8, 32} {
		sc := fmt.Sprintf("3: %d goroutines, 1 name", n)
		rs, err := runScenario(ctx, cfg, contImpls, func(im impl) (runner, error) {
			return newContendedRunner(ctx, cfg, im, sc, n)
		})
		if err != nil {
			return fmt.Errorf("%s: %w", sc, err)
		}
		for _, r := range rs {
			progress(r)
		}
		results = append(results, rs...)
	}
	fmt.Fprintln(os.Stderr)
	fmt.Printf("load average at the end: %s\n\n", benchutil.Loadavg())

	printTable(os.Stdout, cfg, results)
	printTargets(os.Stdout, results)
	printNotes(os.Stdout, cfg, results)
	fmt.Println()
	if err := runFaults(ctx, os.Stdout); err != nil {
		return err
	}
	if cfg.verbose {
		// Every runner has closed its clients; what is left besides main
		// is go-redis's and the runtime's housekeeping, if anything.
		time.Sleep(100 * time.Millisecond)
		fmt.Printf("goroutines left before the control client and the server close: %d\n", runtime.NumGoroutine())
		if os.Getenv("BENCH_STACKS") != "" {
			buf := make([]byte, 1<<20)
			os.Stdout.Write(buf[:runtime.Stack(buf, true)])
		}
	}
	return nil
}
