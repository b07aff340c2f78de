// Command schedbench measures lockcron's scheduler at fleet scale: -jobs
// jobs, each "@every 1s", on -replicas replicas (each its own go-redis
// client, lock.Client and Scheduler, all in this process) against one
// throwaway redis-server, for -duration. It reports, over a measured window
// that leaves out the first -warmup and the last -cooldown of the run:
//
//  1. whether every tick ran exactly once: duplicate ticks (the same job and
//     tick run twice, counted over the whole run) and missed ticks (a tick
//     of the window that no replica ran);
//  2. the lateness of the runs: the start of the job func minus its tick;
//  3. the Redis commands the clients sent per job-tick, and per job-tick
//     per replica (INFO commandstats, without the calls made inside Lua
//     scripts and without the benchmark's own INFO);
//  4. the CPU time per 1,000 job-ticks, of this process and of redis-server.
//
// Then it runs a smaller configuration (-baseline replicas) for comparison.
// It measures and prints; it never fails on timing. Run it with
// `cd bench && go run ./schedbench` or `make bench` from the repository root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

type config struct {
	jobs            int
	replicas        int
	baseline        int // replicas of the comparison run; 0: none
	duration        time.Duration
	warmup          time.Duration
	cooldown        time.Duration
	work            time.Duration // how long each run lasts
	poolSize        int
	shutdownTimeout time.Duration
	verbose         bool
	cpuProfile      string // write a CPU profile of the runs here
}

func main() {
	cfg := &config{}
	flag.IntVar(&cfg.jobs, "jobs", 1000, "jobs, each \"@every 1s\", on every replica")
	flag.IntVar(&cfg.replicas, "replicas", 5, "replicas: each its own go-redis client, lock.Client and Scheduler")
	flag.IntVar(&cfg.baseline, "baseline", 1, "replicas of a second, smaller run for comparison (0: none)")
	flag.DurationVar(&cfg.duration, "duration", 30*time.Second, "length of each run, from the start of the Schedulers to their Shutdown")
	flag.DurationVar(&cfg.warmup, "warmup", 2*time.Second, "left out of the measured window at the start")
	flag.DurationVar(&cfg.cooldown, "cooldown", 2*time.Second, "left out of the measured window at the end")
	flag.DurationVar(&cfg.work, "work", 0, "how long each run's job func lasts (0: it returns at once)")
	flag.IntVar(&cfg.poolSize, "pool", 256, "go-redis PoolSize of each replica")
	flag.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 30*time.Second, "bound of each replica's Shutdown")
	flag.BoolVar(&cfg.verbose, "v", false, "also print the journal's run counts and the load average at the window's edges")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (both runs, set-up included) to this file")
	flag.Parse()
	if cfg.jobs < 1 || cfg.replicas < 1 || cfg.baseline < 0 || cfg.poolSize < 1 || cfg.warmup < 0 || cfg.cooldown < 0 {
		fmt.Fprintln(os.Stderr, "schedbench: -jobs, -replicas and -pool must be ≥ 1, -baseline, -warmup and -cooldown ≥ 0")
		os.Exit(2)
	}
	if cfg.duration-cfg.warmup-cfg.cooldown < 2*time.Second {
		fmt.Fprintln(os.Stderr, "schedbench: -duration must leave at least 2 s after -warmup and -cooldown")
		os.Exit(2)
	}
	benchutil.Main("schedbench", func(ctx context.Context) error { return mainErr(ctx, cfg) })
}

func mainErr(ctx context.Context, cfg *config) error {
	fmt.Printf("lockcron schedbench: %s, Go %s, GOMAXPROCS %d, %d CPUs\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.TrimPrefix(runtime.Version(), "go"), runtime.GOMAXPROCS(0), runtime.NumCPU())
	fmt.Printf("%d jobs @every 1s; %v per run (measured window without the first %v and the last %v); job func lasts %v; go-redis PoolSize %d\n",
		cfg.jobs, cfg.duration, cfg.warmup, cfg.cooldown, cfg.work, cfg.poolSize)
	fmt.Printf("load average at the start: %s\n\n", benchutil.Loadavg())

	stopProfile, err := benchutil.StartCPUProfile(cfg.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()

	sizes := []int{cfg.replicas}
	if cfg.baseline > 0 && cfg.baseline != cfg.replicas {
		sizes = append(sizes, cfg.baseline)
	}
	var results []*result
	for _, n := range sizes {
		fmt.Fprintf(os.Stderr, "  %d jobs on %s for %v ...\n", cfg.jobs, replicasName(n), cfg.duration)
		r, err := runFleet(ctx, cfg, n)
		if err != nil {
			return fmt.Errorf("%d replicas: %w", n, err)
		}
		results = append(results, r)
	}
	fmt.Printf("load average at the end: %s\n\n", benchutil.Loadavg())

	printTable(os.Stdout, results)
	for _, r := range results {
		printTargets(os.Stdout, r)
	}
	for _, r := range results {
		printDetails(os.Stdout, cfg, r)
	}
	return nil
}

// runFleet runs one configuration on a fresh redis-server and returns what
// it measured.
func runFleet(ctx context.Context, cfg *config, replicas int) (*result, error) {
	srv, err := benchutil.Launch()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	ctl := srv.Ctl // INFO only, never measured
	version, err := benchutil.ServerVersion(ctx, ctl)
	if err != nil {
		return nil, err
	}
	goroutines := runtime.NumGoroutine()

	j := &journal{}
	fleet := make([]*replica, 0, replicas)
	stopAll := func() []stopResult {
		// All at once, as a fleet rolled at the same moment would be.
		res := make([]stopResult, len(fleet))
		var wg sync.WaitGroup
		for i, r := range fleet {
			wg.Go(func() { res[i] = r.stop(cfg.shutdownTimeout) })
		}
		wg.Wait()
		return res
	}
	for i := range replicas {
		r, err := newReplica(srv.Server, i, cfg.jobs, cfg.poolSize, cfg.work, j)
		if err != nil {
			stopAll()
			return nil, err
		}
		fleet = append(fleet, r)
	}
	readers := make([]*sdkmetric.ManualReader, len(fleet))
	for i, r := range fleet {
		readers[i] = r.reader
	}

	res := &result{replicas: replicas, jobs: cfg.jobs, work: cfg.work, version: version, loadStart: benchutil.Loadavg()}
	res.start = time.Now()
	for _, r := range fleet {
		r.start()
	}
	// The window's ticks are the whole seconds from the first one at least
	// -warmup after the start up to, not including, the last whole second
	// at least -cooldown before the stop. The counters are read half a
	// second before the window's first tick and half a second before the
	// tick after its last, between two bursts of claims: each snapshot
	// pair holds the work of exactly the window's ticks, give or take the
	// runs that spill over the half second (as many at each end).
	end := res.start.Add(cfg.duration)
	res.first = ceilSecond(res.start.Add(cfg.warmup))
	res.last = end.Add(-cfg.cooldown).Truncate(time.Second)
	var before, after snapshot
	err = sleepUntil(ctx, res.first.Add(-500*time.Millisecond))
	if err == nil {
		before, err = takeSnapshot(ctx, ctl, readers)
	}
	if err == nil {
		err = sleepUntil(ctx, res.last.Add(-500*time.Millisecond))
	}
	if err == nil {
		after, err = takeSnapshot(ctx, ctl, readers)
	}
	if err == nil {
		err = sleepUntil(ctx, end)
	}
	if err != nil {
		stopAll()
		return nil, err
	}
	res.loadEnd = benchutil.Loadavg()
	res.stops = stopAll()
	// Every Scheduler has stopped and every client is closed: what is
	// left over the count taken before the fleet started is a leak (or
	// go-redis's housekeeping winding down; give it a moment).
	time.Sleep(200 * time.Millisecond)
	res.goroutinesLeft = runtime.NumGoroutine() - goroutines

	res.analyze(j, before, after)
	return res, nil
}

// ceilSecond rounds t up to a whole second.
func ceilSecond(t time.Time) time.Time {
	s := t.Truncate(time.Second)
	if s.Equal(t) {
		return s
	}
	return s.Add(time.Second)
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	return benchutil.Sleep(ctx, time.Until(t))
}
