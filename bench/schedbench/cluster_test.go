package main

import (
	"context"
	"flag"
	"os"
	"slices"
	"testing"
	"time"
)

// clusterTest turns on TestClusterFailover: it takes about a minute and
// most of two cores, so make test leaves it out.
var clusterTest = flag.Bool("schedbench.cluster", false, "run TestClusterFailover (about a minute)")

// TestMain lets the test binary be a replica process too: runRow
// re-executes os.Executable with -replica-child.
func TestMain(m *testing.M) {
	if slices.Contains(os.Args, "-replica-child") || slices.Contains(os.Args, "-hog-child") {
		cfg := &config{}
		fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
		childFlags(fs, cfg)
		_ = fs.Parse(os.Args[1:]) // ExitOnError
		childRun(cfg)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestClusterFailover runs the cluster row, smaller: 200 jobs @every 1s on
// 5 replica processes for 40 s on a Redis Cluster of three primaries with a
// replica each (cluster-node-timeout 1 s), the locks acknowledged by a
// replica, and a primary SIGKILLed in the middle. No tick runs twice, none
// is missed outside the failover (from 1 s before the kill to the
// promotion + 2 s), and each primary takes its share of the commands,
// within ±25 % of the mean.
func TestClusterFailover(t *testing.T) {
	if !*clusterTest {
		t.Skip("run with -schedbench.cluster (about a minute)")
	}
	cfg := &config{
		jobs: 200, replicas: 5, duration: 40 * time.Second, warmup: 2 * time.Second, cooldown: 2 * time.Second,
		killOffset: 50 * time.Millisecond, poolSize: 64, shutdownTimeout: 30 * time.Second,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := runRow(ctx, cfg, rowSpec(cfg, "cluster"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("primary %s SIGKILLed at %s, promoted %v later; %d scripts sent meanwhile; %d job-ticks missed within the failover; shares %s; %.2f commands per job-tick",
		r.failedPrimary, r.killAt.UTC().Format("15:04:05.000"), r.promotedAt.Sub(r.killAt).Round(time.Millisecond),
		r.failoverScripts, r.inFailover, r.shares(), r.cmdsPerJobTick())
	if r.promotedAt.IsZero() {
		t.Fatal("no failover happened")
	}
	if r.dups != 0 {
		t.Errorf("%d ticks ran twice, first: %v", r.dups, r.dupList)
	}
	if r.missed != 0 {
		t.Errorf("%d job-ticks missed outside the failover, first: %v", r.missed, r.missedList)
	}
	if r.windowRuns == 0 || len(r.nodeCmds) != 3 {
		t.Fatalf("%d runs in the window, commands counted on %d primaries: nothing measured", r.windowRuns, len(r.nodeCmds))
	}
	if s := r.shareSpread(); s > targetShareSpread {
		t.Errorf("the primaries' shares of the commands spread ±%.1f%% from the mean (%s), want within ±%.0f%%", 100*s, r.shares(), 100*targetShareSpread)
	}
	for i, s := range r.stops {
		if s.Err != "" || s.RunErr != "" || s.RunHung || s.exitErr != nil {
			t.Errorf("r%d did not stop cleanly: %+v", i+1, s)
		}
	}
}
