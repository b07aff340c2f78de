// Command fairbench measures lockcron's fair lock (Client.FairMutex): G
// goroutines (8, then 32) spread round-robin over 4 lock.Clients, each on
// its own go-redis client as separate replicas would be, all on one lock
// name, each looping Lock → hold -hold (time.Sleep) → Unlock, on one
// throwaway redis-server. Over a measured window after a warm-up it
// reports:
//
//  1. order: whether every acquisition came in queue order. A sampler reads
//     the queue (LRANGE) together with the fencing-token high-water mark
//     (GET) in one MULTI, so each snapshot is atomic and placed exactly in
//     the server's acquisition order (tokens increase with every
//     acquisition); the goroutines record each lease's owner id and token.
//     An inversion is an owner X that acquired before an owner Y that was
//     ahead of it in a snapshot;
//  2. Jain's fairness index over the per-goroutine acquisition counts;
//  3. acquisitions/s against the ceiling 1/(mean hold + 2 × PING RTT), with
//     the hold and the RTT (p50 of -pings PINGs) measured in the same run;
//  4. the commands the clients sent per acquisition (INFO commandstats,
//     without the calls made inside Lua scripts and without the
//     benchmark's own commands), SUBSCRIBE/UNSUBSCRIBE per acquisition,
//     and the wait's p50/p99/max.
//
// With -trace, a go-redis hook also times every script call, and each
// handoff (the holder's Unlock call → the next holder's Lock returning) is
// split into its steps, to show where the time goes.
//
// It measures and prints; it never fails on timing. Run it with
// `cd bench && go run ./fairbench` or `make bench` from the repository root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

type config struct {
	goroutines []int
	clients    int
	duration   time.Duration // measured window per goroutine count
	warmup     time.Duration
	hold       time.Duration
	think      time.Duration // pause after Unlock before asking again
	timeout    time.Duration // lock.WithWait of every Lock, and the bound of every Unlock
	sample     time.Duration // period of the queue sampler; 0: no sampler, no order check
	pings      int           // PINGs that measure the round trip
	cpuProfile string
	trace      bool
	verbose    bool
}

func main() {
	cfg := &config{}
	gs := flag.String("goroutines", "8,32", "comma-separated goroutine counts, one run each")
	flag.IntVar(&cfg.clients, "clients", 4, "lock.Clients (each its own go-redis client) the goroutines are spread over, round-robin")
	flag.DurationVar(&cfg.duration, "duration", 5*time.Second, "measured window per goroutine count")
	flag.DurationVar(&cfg.warmup, "warmup", 500*time.Millisecond, "unmeasured loop before the window, same goroutines")
	flag.DurationVar(&cfg.hold, "hold", time.Millisecond, "how long each goroutine holds the lock (time.Sleep; the actual hold is measured)")
	flag.DurationVar(&cfg.think, "think", 0, "pause after each Unlock before asking again (0: at once, so that the releaser's own request meets the handoff)")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Second, "lock.WithWait of every Lock, and the timeout of every Unlock")
	flag.DurationVar(&cfg.sample, "sample", 500*time.Microsecond, "period of the queue sampler (MULTI LRANGE GET on a connection of its own); 0: no sampler and no order check")
	flag.IntVar(&cfg.pings, "pings", 3000, "PINGs on the idle server before each run; their p50 is the RTT of the ceiling")
	flag.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (all runs) to this file")
	flag.BoolVar(&cfg.trace, "trace", false, "also time each script call (a go-redis hook) and split each handoff into steps: where the time goes")
	flag.BoolVar(&cfg.verbose, "v", false, "also print the per-command counts, the handoff split and the sampler's details")
	flag.Parse()
	for f := range strings.SplitSeq(*gs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "fairbench: -goroutines: %q is not a count ≥ 1\n", f)
			os.Exit(2)
		}
		cfg.goroutines = append(cfg.goroutines, n)
	}
	if cfg.clients < 1 || cfg.duration <= 0 || cfg.warmup < 0 || cfg.hold < 0 || cfg.think < 0 || cfg.timeout <= 0 || cfg.sample < 0 || cfg.pings < 1 {
		fmt.Fprintln(os.Stderr, "fairbench: -clients and -pings must be ≥ 1, -duration and -timeout > 0, -warmup, -hold, -think and -sample ≥ 0")
		os.Exit(2)
	}
	benchutil.Main("fairbench", func(ctx context.Context) error { return mainErr(ctx, cfg) })
}

func mainErr(ctx context.Context, cfg *config) error {
	srv, err := benchutil.Launch()
	if err != nil {
		return err
	}
	defer srv.Close()
	version, err := benchutil.ServerVersionOr(ctx, srv.Ctl, "?")
	if err != nil {
		return err
	}

	fmt.Printf("lockcron fairbench: %s, Go %s, GOMAXPROCS %d, %d CPUs, redis-server %s on %s (loopback TCP)\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.TrimPrefix(runtime.Version(), "go"),
		runtime.GOMAXPROCS(0), runtime.NumCPU(), version, srv.Addr())
	fmt.Printf("fair lock, 1 name, goroutines %v over %d Clients (round-robin); hold %v, then ask again after %v; window %v after %v warm-up; WithWait %v; queue sampled every %v\n",
		cfg.goroutines, cfg.clients, cfg.hold, cfg.think, cfg.duration, cfg.warmup, cfg.timeout, cfg.sample)
	fmt.Printf("load average at the start: %s\n\n", benchutil.Loadavg())

	stopProfile, err := benchutil.StartCPUProfile(cfg.cpuProfile)
	if err != nil {
		return err
	}
	defer stopProfile()

	var results []*result
	for _, g := range cfg.goroutines {
		fmt.Fprintf(os.Stderr, "  %d goroutines over %d Clients for %v ...\n", g, cfg.clients, cfg.warmup+cfg.duration)
		r, err := runOne(ctx, cfg, srv.Server, srv.Ctl, g)
		if err != nil {
			return fmt.Errorf("%d goroutines: %w", g, err)
		}
		fmt.Fprintf(os.Stderr, "  %d goroutines: %.0f acquisitions/s, %d inversions, fails %d errs %d\n",
			g, r.rate(), r.order.inversions+r.order.outOfOrder, r.Fails, r.Errs)
		results = append(results, r)
	}
	fmt.Printf("load average at the end: %s\n\n", benchutil.Loadavg())

	printTable(os.Stdout, cfg, results)
	for _, r := range results {
		printTargets(os.Stdout, cfg, r)
	}
	for _, r := range results {
		printDetails(os.Stdout, cfg, r)
	}
	printTrace(os.Stdout, results)
	return nil
}
