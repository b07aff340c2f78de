// Command schedbench measures lockcron's scheduler at fleet scale: -jobs
// jobs, each "@every 1s", on -replicas replica processes (each its own
// go-redis client, lock.Client and Scheduler, as they are deployed) against
// one throwaway redis-server, for -duration. It reports, over a measured
// window that leaves out the first -warmup and the last -cooldown of the
// run:
//
//  1. whether every tick ran exactly once: duplicate ticks (the same job and
//     tick run twice, counted over the whole run) and missed ticks (a tick
//     of the window that no replica ran);
//  2. the lateness of the runs: the start of the job func minus its tick;
//  3. the Redis commands the clients sent per job-tick (INFO commandstats,
//     without the calls made inside Lua scripts and without the benchmark's
//     own INFO);
//  4. Redis's CPU per job-tick (INFO cpu, main thread), and the CPU time
//     per 1,000 job-ticks of the replica processes.
//
// It runs these rows (-rows):
//
//   - floor: the same jobs on one process on the in-memory backend, no
//     Redis: the harness's own lateness, which the fleet's is compared to;
//   - fleet: the jobs on -replicas processes;
//   - kill: the same, with one replica SIGKILLed in the middle of the
//     window;
//   - hog: the same as fleet beside a process that spins two busy loops;
//   - single (not run by default): the jobs on one process on Redis;
//   - cluster (not run by default): the jobs on -replicas processes on a
//     Redis Cluster of three primaries with a replica each
//     (cluster-node-timeout 1 s), the locks with lock.WithReplicaAck; one
//     primary is SIGKILLed in the middle of the window, its replica
//     promoted, and the killed node restarted as the new primary's
//     replica. Each primary's share of the client commands, the commands
//     and Redis CPU per job-tick are read over the window's first half,
//     before the kill; missed ticks are counted outside the failover
//     (from 1 s before the kill, claims on their way, to the promotion
//   - 2 s) and within it, and the scripts the replicas sent from the
//     kill to the promotion;
//   - cluster-noack (not run by default): the same without
//     lock.WithReplicaAck.
//
// The replicas and the hog are this program again, re-executed with the
// hidden flag -replica-child or -hog-child. A child runs until its stdin
// closes (or SIGTERM), so it also ends when this process dies; a replica
// streams its runs to this process over its stdout.
//
// It measures and prints; it never fails on timing. Run it with
// `cd bench && go run ./schedbench` or `make bench` from the repository root.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

type config struct {
	jobs            int
	replicas        int
	rows            []string
	duration        time.Duration
	warmup          time.Duration
	cooldown        time.Duration
	killOffset      time.Duration // the kill row's SIGKILL: this long after the window's middle tick
	work            time.Duration // how long each run lasts
	poolSize        int
	lease           time.Duration // lock.WithLeaseTime of every replica; 0: the library's default
	shutdownTimeout time.Duration
	verbose         bool
	cpuProfile      string // each row's replica r1 writes a CPU profile to this path + "." + row

	// In a child process only.
	replicaChild bool
	hogChild     bool
	childID      int    // the replica's index: r1 is 0
	childAddr    string // the Redis address; "" is the in-memory backend
	childCluster bool   // childAddr is a Cluster's nodes, comma-separated
	childAck     bool   // lock.WithReplicaAck(1, ackTimeout)
}

// allRows are the rows -rows may name, in the order they run; the default
// is all but single.
var allRows = []string{"floor", "fleet", "kill", "hog", "single", "cluster", "cluster-noack"}

func main() {
	cfg := &config{}
	rows := flag.String("rows", "floor,fleet,kill,hog", "rows to run, comma-separated, from "+strings.Join(allRows, ","))
	flag.IntVar(&cfg.replicas, "replicas", 5, "replica processes of the fleet, kill and hog rows")
	flag.DurationVar(&cfg.duration, "duration", 30*time.Second, "length of each row's run, from the start of the Schedulers to their Shutdown")
	flag.DurationVar(&cfg.warmup, "warmup", 2*time.Second, "left out of the measured window at the start")
	flag.DurationVar(&cfg.cooldown, "cooldown", 2*time.Second, "left out of the measured window at the end")
	flag.DurationVar(&cfg.killOffset, "kill-offset", 50*time.Millisecond, "kill row: SIGKILL the last replica this long after the window's middle tick (within 1s)")
	flag.BoolVar(&cfg.verbose, "v", false, "also print the journal's run counts and the load average at the window's edges")
	childFlags(flag.CommandLine, cfg)
	flag.Parse()

	if childRun(cfg) {
		return
	}
	for r := range strings.SplitSeq(*rows, ",") {
		r = strings.TrimSpace(r)
		if !slices.Contains(allRows, r) {
			fmt.Fprintf(os.Stderr, "schedbench: -rows: unknown row %q (rows: %s)\n", r, strings.Join(allRows, ", "))
			os.Exit(2)
		}
		if !slices.Contains(cfg.rows, r) {
			cfg.rows = append(cfg.rows, r)
		}
	}
	slices.SortFunc(cfg.rows, func(a, b string) int { return slices.Index(allRows, a) - slices.Index(allRows, b) })
	if cfg.jobs < 1 || cfg.replicas < 1 || cfg.poolSize < 1 || cfg.warmup < 0 || cfg.cooldown < 0 {
		fmt.Fprintln(os.Stderr, "schedbench: -jobs, -replicas and -pool must be ≥ 1, -warmup and -cooldown ≥ 0")
		os.Exit(2)
	}
	if cfg.duration-cfg.warmup-cfg.cooldown < 2*time.Second {
		fmt.Fprintln(os.Stderr, "schedbench: -duration must leave at least 2 s after -warmup and -cooldown")
		os.Exit(2)
	}
	if cfg.killOffset < 0 || cfg.killOffset >= time.Second {
		fmt.Fprintln(os.Stderr, "schedbench: -kill-offset must be in [0, 1s)")
		os.Exit(2)
	}
	benchutil.Main("schedbench", func(ctx context.Context) error { return mainErr(ctx, cfg) })
}

// childFlags defines on fs the flags that a child process reads too.
func childFlags(fs *flag.FlagSet, cfg *config) {
	fs.IntVar(&cfg.jobs, "jobs", 1000, "jobs, each \"@every 1s\", on every replica")
	fs.DurationVar(&cfg.work, "work", 0, "how long each run's job func lasts (0: it returns at once)")
	fs.IntVar(&cfg.poolSize, "pool", 256, "go-redis PoolSize of each replica")
	fs.DurationVar(&cfg.lease, "lease", 0, "lock.WithLeaseTime of every replica: how long a killed replica's lock outlives it (0: the library's default, 30s)")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 30*time.Second, "bound of each replica's Shutdown")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of each row's replica r1 to this file + \".\" + the row's name")
	fs.BoolVar(&cfg.replicaChild, "replica-child", false, "internal: run as one replica process")
	fs.BoolVar(&cfg.hogChild, "hog-child", false, "internal: run as the CPU hog")
	fs.IntVar(&cfg.childID, "child-id", 0, "internal: the replica's index")
	fs.StringVar(&cfg.childAddr, "child-addr", "", "internal: the Redis address (empty: in-memory backend)")
	fs.BoolVar(&cfg.childCluster, "child-cluster", false, "internal: -child-addr is a Redis Cluster's nodes, comma-separated")
	fs.BoolVar(&cfg.childAck, "child-ack", false, "internal: the locks wait for a replica's acknowledgement")
}

// childRun runs the child process that cfg names, if any, and reports
// whether it did.
func childRun(cfg *config) bool {
	switch {
	case cfg.hogChild:
		hogMain()
		return true
	case cfg.replicaChild:
		benchutil.Main(fmt.Sprintf("schedbench r%d", cfg.childID+1), func(ctx context.Context) error { return childMain(ctx, cfg) })
		return true
	}
	return false
}

func mainErr(ctx context.Context, cfg *config) error {
	fmt.Printf("lockcron schedbench: %s, Go %s, GOMAXPROCS %d, %d CPUs\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.TrimPrefix(runtime.Version(), "go"), runtime.GOMAXPROCS(0), runtime.NumCPU())
	lease := "the default"
	if cfg.lease > 0 {
		lease = cfg.lease.String()
	}
	fmt.Printf("%d jobs @every 1s; rows %s; %v per row (measured window without the first %v and the last %v); job func lasts %v; go-redis PoolSize %d; lease %s\n",
		cfg.jobs, strings.Join(cfg.rows, ","), cfg.duration, cfg.warmup, cfg.cooldown, cfg.work, cfg.poolSize, lease)
	fmt.Printf("load average at the start: %s\n\n", benchutil.Loadavg())

	var results []*result
	for _, row := range cfg.rows {
		spec := rowSpec(cfg, row)
		fmt.Fprintf(os.Stderr, "  %s: %d jobs on %s for %v ...\n", row, cfg.jobs, spec.title(), cfg.duration)
		r, err := runRow(ctx, cfg, spec)
		if err != nil {
			return fmt.Errorf("row %s: %w", row, err)
		}
		results = append(results, r)
	}
	fmt.Printf("load average at the end: %s\n\n", benchutil.Loadavg())

	floor := findRow(results, "floor")
	printTable(os.Stdout, results, floor)
	printTargets(os.Stdout, results, floor)
	for _, r := range results {
		printDetails(os.Stdout, cfg, r)
	}
	return nil
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
