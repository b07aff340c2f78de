// Command scriptbench measures the Redis time per call of lockcron's Lua
// scripts, each run alone on one throwaway redis-server, from INFO
// commandstats (usec / calls of evalsha): claim, finish with a history
// entry, claim and finish per job-tick, acquire, release and renew, beside
// a trivial script (`return 1`) and Redisson's lock (tryLockInnerAsync)
// and unlock with its unlock latch (unlockInnerAsync of Redisson 3.2x), in
// the same run.
//
// The scripts are read from this checkout (internal/core/scripts, as the
// Client sends them: lib.lua in front of those that use it), and, with
// -old, those of an older commit too (git show REV:path), so that both are
// measured on one server, round after round, interleaved.
//
// The arguments are those the Client sends (redis_ledger.go, redis.go):
// one client, no contention. Each job's history is filled to its keep
// before the measured rounds, so that finish trims as it does in a fleet
// that has run for a while.
//
// It measures and prints; it never fails on timing. Run it with
// `cd bench && go run ./scriptbench` or `make bench` from the repository
// root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

type config struct {
	jobs   int    // jobs (locks and ledgers) per round
	rounds int    // measured rounds
	warm   int    // ticks run on each job before the measured rounds
	keep   int    // history entries kept (the ledger's WithHistory)
	old    string // a commit whose scripts are measured too; "" none
	root   string // the repository's top directory
}

func main() {
	cfg := &config{}
	flag.IntVar(&cfg.jobs, "jobs", 200, "jobs (each its lock, ledger and history) per round: each phase calls its script this many times")
	flag.IntVar(&cfg.rounds, "rounds", 20, "measured rounds; the script sets take turns within each round")
	flag.IntVar(&cfg.warm, "warm", 0, "ticks run on each job before the measured rounds (0: the history's keep + 10, so that finish trims)")
	flag.IntVar(&cfg.keep, "keep", 100, "history entries kept (the default of fleet.WithHistory)")
	flag.StringVar(&cfg.old, "old", "4f7e06a", "also measure the scripts of this commit (git show REV:internal/core/scripts/...); \"\": none")
	flag.Parse()
	if cfg.jobs < 1 || cfg.rounds < 1 || cfg.keep < 1 {
		fmt.Fprintln(os.Stderr, "scriptbench: -jobs, -rounds and -keep must be ≥ 1")
		os.Exit(2)
	}
	if cfg.warm == 0 {
		cfg.warm = cfg.keep + 10
	}
	benchutil.Main("scriptbench", func(ctx context.Context) error { return mainErr(ctx, cfg) })
}

func mainErr(ctx context.Context, cfg *config) error {
	_, err := run(ctx, cfg)
	return err
}

// run measures as cfg says, prints the report and returns the figures.
func run(ctx context.Context, cfg *config) (*bench, error) {
	root, err := gitOut("rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("finding the repository (run from inside the checkout): %w", err)
	}
	cfg.root = strings.TrimSpace(root)
	sets := []*scriptSet{}
	cur, err := loadSet("new", true, func(f string) (string, error) {
		b, err := os.ReadFile(filepath.Join(cfg.root, "internal", "core", "scripts", f))
		return string(b), err
	})
	if err != nil {
		return nil, err
	}
	sets = append(sets, cur)
	if cfg.old != "" {
		old, err := loadSet("old "+cfg.old, false, func(f string) (string, error) {
			return gitOut("show", cfg.old+":internal/core/scripts/"+f)
		})
		if err != nil {
			return nil, fmt.Errorf("the scripts of %s: %w", cfg.old, err)
		}
		sets = append(sets, old)
	}

	srv, err := benchutil.Launch()
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	ver, err := benchutil.ServerVersionOr(ctx, srv.Ctl, "?")
	if err != nil {
		return nil, err
	}
	load0 := benchutil.Loadavg()
	fmt.Printf("scriptbench: redis-server %s, %s, %d CPUs, load average %s\n", ver, runtime.Version(), runtime.NumCPU(), load0)
	fmt.Printf("%d jobs per round, %d rounds, history keep %d (each job warmed with %d ticks)\n\n", cfg.jobs, cfg.rounds, cfg.keep, cfg.warm)

	rdb := redis.NewClient(srv.Server.Options())
	defer rdb.Close()
	b := &bench{cfg: cfg, rdb: rdb, ctl: srv.Ctl, res: map[string]*stat{}}
	redisson := newRedisson()
	trivial := redis.NewScript("return 1")
	for _, s := range sets {
		if err := s.preload(ctx, rdb); err != nil {
			return nil, err
		}
		if err := b.warm(ctx, s); err != nil {
			return nil, err
		}
	}
	for _, sc := range []*redis.Script{redisson.lock, redisson.unlock, trivial} {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			return nil, err
		}
	}
	for r := range cfg.rounds {
		for i := range sets {
			s := sets[(i+r)%len(sets)]
			if err := b.ledgerRound(ctx, s, cfg.warm+1+3*r); err != nil {
				return nil, err
			}
			if err := b.lockRound(ctx, s, r); err != nil {
				return nil, err
			}
		}
		if err := b.redissonRound(ctx, redisson, r); err != nil {
			return nil, err
		}
		if err := b.phase(ctx, "trivial (return 1)", func(i int) error {
			return trivial.Run(ctx, rdb, nil).Err()
		}); err != nil {
			return nil, err
		}
	}
	b.report(sets, load0, benchutil.Loadavg())
	return b, nil
}

// gitOut runs git in the current directory and returns its output.
func gitOut(args ...string) (string, error) {
	out, err := exec.Command("git", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(ee.Stderr)))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// A stat is the server's accounting of one row, summed over the rounds.
type stat struct {
	calls, usec int64 // evalsha's
	inner       int64 // commands the scripts ran (every command but evalsha, config and info)
	innerBy     map[string]int64
	innerUsec   map[string]int64
}

type bench struct {
	cfg      *config
	rdb, ctl *redis.Client
	res      map[string]*stat
	order    []string
}

// phase runs call for each job, between CONFIG RESETSTAT and INFO
// commandstats on the control connection, and adds the server's figures to
// the row named name.
func (b *bench) phase(ctx context.Context, name string, call func(i int) error) error {
	if err := b.ctl.ConfigResetStat(ctx).Err(); err != nil {
		return err
	}
	for i := range b.cfg.jobs {
		if err := call(i); err != nil {
			return fmt.Errorf("%s, job %d: %w", name, i, err)
		}
	}
	info, err := b.ctl.Info(ctx, "commandstats").Result()
	if err != nil {
		return err
	}
	st, err := benchutil.ParseInfo(info)
	if err != nil {
		return err
	}
	r := b.res[name]
	if r == nil {
		r = &stat{innerBy: map[string]int64{}, innerUsec: map[string]int64{}}
		b.res[name] = r
		b.order = append(b.order, name)
	}
	for cmd, n := range st.Calls {
		switch cmd {
		case "evalsha":
			r.calls += n
			r.usec += st.Usec[cmd]
		case "config|resetstat", "info", "config":
		default:
			r.inner += n
			r.innerBy[cmd] += n
			r.innerUsec[cmd] += st.Usec[cmd]
		}
	}
	return nil
}

func (b *bench) report(sets []*scriptSet, load0, load1 string) {
	fmt.Printf("Redis time per call (INFO commandstats, evalsha usec/calls), load average %s at the start, %s at the end:\n\n", load0, load1)
	rows := [][]string{}
	per := func(name string) (float64, bool) {
		r := b.res[name]
		if r == nil || r.calls == 0 {
			return 0, false
		}
		return float64(r.usec) / float64(r.calls), true
	}
	for _, name := range b.order {
		r := b.res[name]
		us, _ := per(name)
		keys := make([]string, 0, len(r.innerBy))
		for k := range r.innerBy {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var by []string
		var innerUsec int64
		for _, k := range keys {
			by = append(by, fmt.Sprintf("%s %.2f×%.1f", k, float64(r.innerBy[k])/float64(r.calls), float64(r.innerUsec[k])/float64(r.innerBy[k])))
			innerUsec += r.innerUsec[k]
		}
		rows = append(rows, []string{name, fmt.Sprintf("%.1f", us), fmt.Sprintf("%d", r.calls),
			fmt.Sprintf("%.2f", float64(r.inner)/float64(r.calls)), fmt.Sprintf("%.1f", float64(innerUsec)/float64(r.calls)), strings.Join(by, ", ")})
	}
	benchutil.WriteMarkdown(os.Stdout, []string{"script", "µs/call", "calls", "redis.call/call", "their µs/call", "each command: calls per call × µs per command"}, rows, 1)
	fmt.Println()
	triv, _ := per("trivial (return 1)")
	for _, s := range sets {
		c, ok1 := per(s.name + ": claim")
		f, ok2 := per(s.name + ": finish with history")
		if !ok1 || !ok2 {
			continue
		}
		tick, _ := per(s.name + ": claim+finish, one job")
		tick *= 2 // two calls per job-tick
		// The verdict takes the worse of the two ways of measuring.
		fmt.Printf("%s: claim + finish with history per job-tick: %.1f µs (phases apart) / %.1f µs (alternating on one job), %.1f× a trivial script's two calls; target ≤ 35 µs: %s\n",
			s.name, c+f, tick, (c+f)/(2*triv), benchutil.Verdict(max(c+f, tick) <= targetTick))
	}
}

// targetTick is issue 23's target: a claim plus its finish with history,
// in µs of Redis time per job-tick in isolation.
const targetTick = 35.0

// sinceStart is a fixed start for the entries' times.
var sinceStart = time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
