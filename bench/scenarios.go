package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

// result is one row of the table.
type result struct {
	scenario string
	impl     string
	floor    bool

	ops     int64               // pairs (scenarios 1, 2) or acquisitions (3)
	elapsed time.Duration       // sum of the measured windows
	lock    benchutil.Durations // lock latency (1, 2) or wait (3), sorted
	unlock  benchutil.Durations // sorted
	rate    float64             // ops per second

	// reference is the floor's pairs/s (1, 2) or the ceiling (3).
	reference float64

	// contended only
	goroutines     int
	hold           time.Duration // mean measured hold
	prevHolder     float64       // share won by the goroutine that just released
	jain           float64
	srvCmds        int64 // INFO commandstats calls, minus the INFO calls
	luaCmds        int64 // calls made inside Lua scripts (MONITOR)
	allAcq         int64 // acquisitions including those after the stop
	violations     int64 // acquisitions while another goroutine held the lock
	delta, luaDiff map[string]int64
	monClient      map[string]int64 // non-Lua commands MONITOR saw (it hides admin commands)
	monErr         error

	// accumulated over rounds
	counts   []int64 // acquisitions per goroutine
	prevWins int64
	holdSum  time.Duration
	holdN    int64
	rttSum   time.Duration // PING round trips sampled before each window
	rttN     int64
	rtt      time.Duration // their mean
	drain    time.Duration // time from the stops until every waiter had its lock
	gapSum   time.Duration // idle time of the lock between a holder's Unlock call and the next acquisition
	gapN     int64
	srvCPU   float64 // µs of CPU of the server's main thread (INFO cpu), over the measured windows
	acct     *result // scenario 3: the accounting window (MONITOR on)

	benchutil.ErrorCounts
}

func (r *result) clientCmdsPerAcq() float64 {
	if r.allAcq == 0 {
		return 0
	}
	return float64(r.srvCmds-r.luaCmds) / float64(r.allAcq)
}

// srvCPUPerOp is the server's main-thread CPU per pair or acquisition, in
// µs.
func (r *result) srvCPUPerOp() float64 {
	n := r.ops
	if r.allAcq > 0 {
		n = r.allAcq
	}
	if n == 0 {
		return 0
	}
	return r.srvCPU / float64(n)
}

// serverCPU is the CPU time of the server's main thread from before to
// after, in µs (INFO cpu; the whole process's before Redis 6.2). It is not
// the sum of INFO commandstats usec: that counts each command a script runs
// with redis.call under its own name and again inside the EVALSHA's usec,
// and leaves out the sockets' reads and writes, which every command pays.
// The one INFO call inside the pair is counted too (tens of µs a window).
func serverCPU(before, after benchutil.InfoStats) float64 {
	return (after.MainThreadCPU() - before.MainThreadCPU()) * 1e6
}

func (r *result) srvCmdsPerAcq() float64 {
	if r.allAcq == 0 {
		return 0
	}
	return float64(r.srvCmds) / float64(r.allAcq)
}

// waitGroup waits for wg, and gives up after grace: a library that ignores
// its ctx would otherwise hang the benchmark forever.
func waitGroup(wg *sync.WaitGroup, what string, grace time.Duration) {
	benchutil.WaitOrAbort(wg, grace, fmt.Sprintf("bench: %s: goroutines still running %v after the stop; every operation has a timeout, so a library is hanging; giving up", what, grace))
}

// A runner is one implementation in one scenario: its clients stay open
// over all rounds; each round adds one measured window to its result.
// The scenario interleaves the runners round by round, so that a load
// spike on the machine hits every implementation alike.
type runner interface {
	round(ctx context.Context, window time.Duration) error
	finish() *result // closes the clients and computes the row
}

// An accounter runs one more window, after the measured ones, to count
// commands with MONITOR on.
type accounter interface {
	account(ctx context.Context, window time.Duration) error
}

// pairsRunner: n goroutines, goroutine i on its own name, each looping
// lock+unlock until the window ends. With n == 1 this is scenario 1.
type pairsRunner struct {
	cfg *config
	im  impl
	g   *group
	res *result
}

func newPairsRunner(ctx context.Context, cfg *config, im impl, scenario string, n int) (*pairsRunner, error) {
	run := cfg.nextRun()
	g, err := im.setup(cfg, n, func(i int) string { return fmt.Sprintf("bench:%d:%d", run, i) })
	if err != nil {
		return nil, err
	}
	p := &pairsRunner{cfg: cfg, im: im, g: g, res: &result{scenario: scenario, impl: im.name, floor: im.floor, goroutines: n}}
	if cfg.warmup > 0 {
		p.loop(ctx, cfg.warmup, false)
	}
	return p, nil
}

func (p *pairsRunner) round(ctx context.Context, window time.Duration) error {
	before, err := commandStats(ctx, p.cfg.ctl)
	if err != nil {
		return err
	}
	p.loop(ctx, window, true)
	after, err := commandStats(context.Background(), p.cfg.ctl)
	if err != nil {
		return err
	}
	p.res.srvCPU += serverCPU(before, after)
	return nil
}

func (p *pairsRunner) loop(ctx context.Context, window time.Duration, record bool) {
	res, cfg, im := p.res, p.cfg, p.im
	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	start := time.Now()
	for _, w := range p.g.workers {
		wg.Go(func() {
			var lk, ul benchutil.Durations
			var pairs int64
			for !stop.Load() && ctx.Err() == nil {
				t0 := time.Now()
				octx, cancel := context.WithTimeout(context.Background(), cfg.wait)
				unlock, err := w(octx)
				cancel()
				t1 := time.Now()
				if err != nil {
					if record {
						res.Add(im.failure(err), err)
					}
					continue
				}
				octx, cancel = context.WithTimeout(context.Background(), cfg.wait)
				err = unlock(octx)
				cancel()
				t2 := time.Now()
				if err != nil {
					if record {
						res.Add(false, fmt.Errorf("unlock: %w", err))
					}
					continue
				}
				pairs++
				if record {
					lk = append(lk, t1.Sub(t0))
					ul = append(ul, t2.Sub(t1))
				}
			}
			if record {
				mu.Lock()
				res.lock = append(res.lock, lk...)
				res.unlock = append(res.unlock, ul...)
				res.ops += pairs
				mu.Unlock()
			}
		})
	}
	timer := time.AfterFunc(window, func() { stop.Store(true) })
	waitGroup(&wg, res.scenario+" / "+im.name, 30*time.Second)
	timer.Stop()
	if record {
		res.elapsed += time.Since(start)
	}
}

func (p *pairsRunner) finish() *result {
	res := p.res
	if err := p.g.close(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s / %s: close: %v\n", res.scenario, res.impl, err)
	}
	slices.Sort(res.lock)
	slices.Sort(res.unlock)
	if res.elapsed > 0 {
		res.rate = float64(res.ops) / res.elapsed.Seconds()
	}
	return res
}

// contendedRunner: n goroutines on ONE name. Each takes the lock, holds it
// for cfg.hold (time.Sleep; the actual hold is measured), unlocks and at
// once asks for it again. The server counts the commands.
type contendedRunner struct {
	cfg  *config
	im   impl
	g    *group
	res  *result // the measured windows
	acct *result // the accounting window
}

func newContendedRunner(ctx context.Context, cfg *config, im impl, scenario string, n int) (*contendedRunner, error) {
	run := cfg.nextRun()
	name := fmt.Sprintf("bench:%d:contended", run)
	g, err := im.setup(cfg, n, func(int) string { return name })
	if err != nil {
		return nil, err
	}
	newResult := func() *result {
		return &result{
			scenario: scenario, impl: im.name, goroutines: n, counts: make([]int64, n),
			delta: map[string]int64{}, luaDiff: map[string]int64{}, monClient: map[string]int64{},
		}
	}
	c := &contendedRunner{cfg: cfg, im: im, g: g, res: newResult(), acct: newResult()}
	// Warm up: each goroutine's locker takes and releases the lock once,
	// one after the other (scripts loaded, connections open).
	for _, w := range g.workers {
		octx, cancel := context.WithTimeout(ctx, cfg.wait)
		unlock, err := w(octx)
		cancel()
		if err == nil {
			octx, cancel = context.WithTimeout(context.Background(), cfg.wait)
			err = unlock(octx)
			cancel()
		}
		if err != nil {
			_ = g.close()
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	return c, nil
}

// round is one measured window, without MONITOR (it slows the server in
// proportion to the commands that scripts run).
func (c *contendedRunner) round(ctx context.Context, window time.Duration) error {
	// Sample the PING round trip on the idle server just before the
	// window, for this row's ceiling.
	for range rttSamples {
		t0 := time.Now()
		pctx, cancel := context.WithTimeout(ctx, c.cfg.wait)
		err := c.cfg.ctl.Ping(pctx).Err()
		cancel()
		if err != nil {
			return fmt.Errorf("PING: %w", err)
		}
		c.res.rttSum += time.Since(t0)
		c.res.rttN++
	}
	return c.window(ctx, window, c.res, nil)
}

// account is one more window, not measured for time, with MONITOR on, to
// count the commands that Lua scripts ran.
func (c *contendedRunner) account(ctx context.Context, window time.Duration) error {
	mon, err := startMonitor(ctx, c.cfg.srv.Addr())
	if err != nil {
		return err
	}
	return c.window(ctx, window, c.acct, mon)
}

// window runs the goroutines for one window and adds what it saw to res.
// With mon, it counts the Lua-internal commands between the INFO markers.
func (c *contendedRunner) window(ctx context.Context, window time.Duration, res *result, mon *monitor) error {
	cfg, im, n := c.cfg, c.im, c.res.goroutines
	before, err := commandStats(ctx, cfg.ctl)
	if err != nil {
		if mon != nil {
			_, _, _ = mon.finish()
		}
		return err
	}

	var (
		stopped    atomic.Bool
		held       atomic.Int32
		lastHolder atomic.Int64
		prevWins   atomic.Int64
		violations atomic.Int64
		allAcq     atomic.Int64
		relStart   atomic.Int64 // when the last holder called Unlock, ns since start; 0: none yet
		stopAt     atomic.Int64 // when the window ended, ns since start
		wg         sync.WaitGroup
		mu         sync.Mutex
		counts     = make([]int64, n)
	)
	lastHolder.Store(-1)
	start := time.Now()
	since := func(t time.Time) int64 { return int64(t.Sub(start)) + 1 }
	for id, w := range c.g.workers {
		wg.Go(func() {
			var wt, ul benchutil.Durations
			var mine int64
			var holdSum, gapSum time.Duration
			var gapN int64
			// At the stop, a goroutine asks no more, but finishes the wait
			// it is in (bounded by cfg.wait), so that a long wait is
			// recorded instead of being cut off by the end of the window.
			for !stopped.Load() && ctx.Err() == nil {
				t0 := time.Now()
				var unlock unlockFunc
				var err error
				for {
					octx, cancel := context.WithTimeout(ctx, cfg.wait)
					unlock, err = w(octx)
					cancel()
					if err == nil || ctx.Err() != nil {
						break
					}
					res.Add(im.failure(err), err) // a failed attempt: ask again
					if stopped.Load() && time.Duration(since(time.Now())-stopAt.Load()) > cfg.wait {
						break // the drain is bounded too
					}
				}
				if err != nil {
					break // interrupted, or failed after the stop
				}
				t1 := time.Now()
				counted := !stopped.Load() // acquired within the window
				if !held.CompareAndSwap(0, 1) {
					violations.Add(1)
				}
				if lastHolder.Swap(int64(id)) == int64(id) && counted {
					prevWins.Add(1)
				}
				if r := relStart.Load(); r > 0 && counted {
					gapSum += time.Duration(since(t1) - r)
					gapN++
				}
				allAcq.Add(1)
				time.Sleep(cfg.hold)
				t2 := time.Now()
				held.Store(0)
				relStart.Store(since(t2))
				octx, cancel := context.WithTimeout(context.Background(), cfg.wait)
				err = unlock(octx)
				cancel()
				t3 := time.Now()
				if err != nil {
					res.Add(false, fmt.Errorf("unlock: %w", err))
				}
				wt = append(wt, t1.Sub(t0))
				ul = append(ul, t3.Sub(t2))
				holdSum += t2.Sub(t1)
				if counted {
					mine++
				}
			}
			mu.Lock()
			res.lock = append(res.lock, wt...)
			res.unlock = append(res.unlock, ul...)
			res.holdSum += holdSum
			res.holdN += int64(len(wt))
			res.gapSum += gapSum
			res.gapN += gapN
			counts[id] = mine
			mu.Unlock()
		})
	}
	_ = benchutil.Sleep(ctx, window) // ctx ended: stop as at the window's end
	stopAt.Store(since(time.Now()))
	stopped.Store(true)
	elapsed := time.Since(start)
	waitGroup(&wg, res.scenario+" / "+im.name, cfg.wait+30*time.Second)
	res.drain += time.Since(start) - elapsed

	after, err := commandStats(context.Background(), cfg.ctl)
	var lua, client map[string]int64
	var monErr error
	if mon != nil {
		lua, client, monErr = mon.finish()
	}
	if err != nil {
		return err
	}
	delta := benchutil.StatsDelta(before.Calls, after.Calls)
	res.srvCPU += serverCPU(before, after)
	res.srvCmds += benchutil.Sum(delta) - cfg.infoOverhead
	for k, v := range delta {
		res.delta[k] += v
	}
	for k, v := range lua {
		res.luaDiff[k] += v
		res.luaCmds += v
	}
	for k, v := range client {
		res.monClient[k] += v
	}
	if monErr != nil && res.monErr == nil {
		res.monErr = monErr
	}
	res.elapsed += elapsed
	for i, v := range counts {
		res.counts[i] += v
		res.ops += v
	}
	res.prevWins += prevWins.Load()
	res.allAcq += allAcq.Load()
	res.violations += violations.Load()
	return nil
}

// rttSamples is how many PINGs measure the round trip before each
// contended window.
const rttSamples = 100

func (c *contendedRunner) finish() *result {
	res, acct := c.res, c.acct
	res.Fails += acct.Fails
	res.Errs += acct.Errs
	if res.FirstErr == "" {
		res.FirstErr = acct.FirstErr
	}
	res.acct = acct
	if err := c.g.close(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %s / %s: close: %v\n", res.scenario, res.impl, err)
	}
	slices.Sort(res.lock)
	slices.Sort(res.unlock)
	if res.holdN > 0 {
		res.hold = res.holdSum / time.Duration(res.holdN)
	}
	if res.elapsed > 0 {
		res.rate = float64(res.ops) / res.elapsed.Seconds()
	}
	if res.ops > 0 {
		res.prevHolder = float64(res.prevWins) / float64(res.ops)
	}
	res.jain = benchutil.Jain(res.counts)
	if res.rttN > 0 {
		res.rtt = res.rttSum / time.Duration(res.rttN)
	}
	if res.rtt > 0 && res.hold > 0 {
		res.reference = 1 / (res.hold + 2*res.rtt).Seconds()
	}
	return res
}

// runScenario sets up one runner per implementation, interleaves them for
// cfg.rounds rounds of cfg.duration/cfg.rounds each (rotating who goes
// first), and returns their rows in the order of impls.
func runScenario(ctx context.Context, cfg *config, impls []impl, newRunner func(impl) (runner, error)) ([]*result, error) {
	runners := make([]runner, 0, len(impls))
	finishAll := func() []*result {
		var rs []*result
		for _, r := range runners {
			rs = append(rs, r.finish())
		}
		return rs
	}
	for _, im := range impls {
		r, err := newRunner(im)
		if err != nil {
			finishAll()
			return nil, fmt.Errorf("%s: %w", im.name, err)
		}
		runners = append(runners, r)
	}
	window := cfg.duration / time.Duration(cfg.rounds)
	for round := range cfg.rounds {
		for i := range runners {
			if ctx.Err() != nil {
				finishAll()
				return nil, ctx.Err()
			}
			k := (i + round) % len(runners)
			if err := runners[k].round(ctx, window); err != nil {
				finishAll()
				return nil, fmt.Errorf("%s: %w", impls[k].name, err)
			}
		}
	}
	// One accounting window each, after the measured ones.
	for i, r := range runners {
		if a, ok := r.(accounter); ok && ctx.Err() == nil {
			if err := a.account(ctx, window); err != nil {
				finishAll()
				return nil, fmt.Errorf("%s: accounting: %w", impls[i].name, err)
			}
		}
	}
	return finishAll(), nil
}
