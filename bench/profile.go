package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

// memProfileRate is runtime.MemProfileRate while -memprofile records: one
// sample per 4 KiB allocated on average (the default, 512 KiB, gives too
// few samples for a few seconds of Lock+Unlock pairs).
const memProfileRate = 4096

// profileLockcron runs lockcron's uncontended rows (scenarios 1 and 2)
// once more after the measured windows, for -duration each, and profiles
// those runs alone: with -cpuprofile, a CPU profile of this process whose
// samples carry the label scenario=1 or scenario=2 (go tool pprof
// -tagfocus scenario:1); with -memprofile, the allocations of scenario 1
// (pprof's allocs profile, taken while only that run allocates). It prints
// the pairs each run made, to turn the profiles' totals into figures per
// Lock+Unlock. These runs are in no table.
func profileLockcron(ctx context.Context, cfg *config, im impl) error {
	if cfg.cpuProfile == "" && cfg.memProfile == "" {
		return nil
	}
	if im.name != nameLockcronA {
		return fmt.Errorf("profile: implementation %q, want %q", im.name, nameLockcronA)
	}
	stop, err := benchutil.StartCPUProfile(cfg.cpuProfile)
	if err != nil {
		return fmt.Errorf("-cpuprofile: %w", err)
	}
	defer stop()
	for _, sc := range []struct {
		label string
		n     int
	}{{"1", 1}, {"2", 64}} {
		name := "profile " + sc.label
		r, err := newPairsRunner(ctx, cfg, im, name, sc.n) // warms up before the profile of allocations starts
		if err != nil {
			return err
		}
		mem := cfg.memProfile != "" && sc.n == 1
		if mem {
			runtime.MemProfileRate = memProfileRate
		}
		pprof.Do(ctx, pprof.Labels("scenario", sc.label), func(ctx context.Context) {
			err = r.round(ctx, cfg.duration)
		})
		if mem && err == nil {
			// Written before the rate changes again: pprof scales the
			// samples by the rate in force when it writes them.
			if werr := writeAllocs(cfg.memProfile); werr != nil {
				err = fmt.Errorf("-memprofile: %w", werr)
			}
		}
		if mem {
			runtime.MemProfileRate = 0
		}
		res := r.finish()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Printf("profiled lockcron, scenario %s (%d goroutines): %d pairs in %v, %d failed or errors\n",
			sc.label, sc.n, res.ops, res.elapsed.Round(time.Millisecond), res.Fails+res.Errs)
	}
	return nil
}

// writeAllocs writes pprof's allocs profile to path, after a garbage
// collection so that it counts every allocation made so far.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	runtime.GC()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
