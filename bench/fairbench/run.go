package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

// acqRec is one acquisition, recorded by its goroutine while it still
// holds the lock (after the hold, before Unlock). Given mutual exclusion,
// the order of recording is the order of acquisition; so is the order of
// the tokens, which the server makes strictly increasing.
type acqRec struct {
	seq   int64         // order of recording, under the journal's mutex
	g     int           // goroutine
	owner string        // lease.Owner(): the id the waiter had in the queue
	token int64         // lease.Token()
	asked time.Time     // the first Lock call of this wait
	got   time.Time     // Lock returned the lease
	hold  time.Duration // from got to the Unlock call
	prev  int           // goroutine of the previous acquisition; -1: none
	gap   time.Duration // from the previous holder's Unlock call to got; -1: none
	unl   time.Duration // Unlock's duration; -1: it failed
}

// journal collects every acquisition of a run: warm-up, window and drain.
type journal struct {
	mu   sync.Mutex
	recs []acqRec
}

// add appends r and returns its place.
func (j *journal) add(r acqRec) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	r.seq = int64(len(j.recs))
	j.recs = append(j.recs, r)
	return r.seq
}

// unlocked sets the Unlock duration of the acquisition at place i.
func (j *journal) unlocked(i int64, d time.Duration) {
	j.mu.Lock()
	j.recs[i].unl = d
	j.mu.Unlock()
}

// inScripts are the commands that the fair lock's scripts (fairacquire,
// fairrelease, fairleave) and the watchdog's renew.lua run with
// redis.call. INFO commandstats counts them as well, but no client sends
// them: the lock package talks to Redis through EVALSHA (EVAL on NOSCRIPT)
// and the Pub/Sub commands. The sampler's own GET is subtracted first.
var inScripts = map[string]bool{
	"time": true, "type": true, "lindex": true, "zscore": true, "lpop": true, "zrem": true,
	"pttl": true, "set": true, "hset": true, "pexpire": true, "hexists": true, "get": true,
	"rpush": true, "zadd": true, "lpos": true, "hget": true, "del": true, "publish": true,
	"lrem": true, "exists": true,
}

// pings sends n PINGs one after the other and returns their round trips,
// sorted.
func pings(ctx context.Context, rdb *redis.Client, n int) (benchutil.Durations, error) {
	ds := make(benchutil.Durations, 0, n)
	for range n {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t0 := time.Now()
		err := rdb.Ping(pctx).Err()
		d := time.Since(t0)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("PING: %w", err)
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	return ds, nil
}

// runOne runs g goroutines over cfg.clients Clients on one fair lock name
// and returns what it measured.
func runOne(ctx context.Context, cfg *config, srv *redistest.Server, ctl *redis.Client, g int) (*result, error) {
	name := fmt.Sprintf("fairbench:%d", g)
	res := &result{goroutines: g, clients: cfg.clients, name: name, loadStart: benchutil.Loadavg()}
	goroutinesBefore := runtime.NumGoroutine()

	// The Clients, each on its own go-redis client, as replicas would be.
	var closers []func() error
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			if err := closers[i](); err != nil && res.firstCloseErr == "" {
				res.firstCloseErr = err.Error()
			}
		}
		closers = nil
	}
	defer closeAll()
	clients := make([]*lock.Client, cfg.clients)
	var hooks []*scriptHook
	for i := range clients {
		rdb := redis.NewClient(srv.Options())
		closers = append(closers, rdb.Close)
		if cfg.trace {
			h := &scriptHook{}
			rdb.AddHook(h)
			hooks = append(hooks, h)
		}
		c, err := lock.New(rdb, lock.WithClientID(fmt.Sprintf("c%d", i+1)))
		if err != nil {
			return nil, fmt.Errorf("lock.New: %w", err)
		}
		closers = append(closers, c.Close)
		clients[i] = c
	}
	smp := redis.NewClient(srv.Options()) // the sampler's connection
	closers = append(closers, smp.Close)

	// Each Client takes and releases the lock once, one after the other:
	// scripts loaded, connections and subscriptions open.
	for _, c := range clients {
		l, err := c.FairMutex(name).Lock(ctx, lock.WithWait(cfg.timeout))
		if err == nil {
			uctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
			err = l.Unlock(uctx)
			cancel()
		}
		if err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}

	// The round trip on the idle server, for the ceiling.
	var err error
	if res.rtt, err = pings(ctx, ctl, cfg.pings); err != nil {
		return nil, err
	}
	if cfg.trace {
		if res.idle, err = idleCosts(ctx, cfg, ctl, clients[0], name); err != nil {
			return nil, err
		}
	}

	j := &journal{}
	var (
		stopped    atomic.Bool
		held       atomic.Int32
		lastHolder atomic.Int64
		relAt      atomic.Int64 // when the last holder called Unlock, ns since start; 0: none yet
		violations atomic.Int64
		wg         sync.WaitGroup
	)
	lastHolder.Store(-1)
	start := time.Now()
	since := func(t time.Time) int64 { return int64(t.Sub(start)) + 1 }
	for id := range g {
		mu := clients[id%cfg.clients].FairMutex(name)
		wg.Go(func() {
			for !stopped.Load() && ctx.Err() == nil {
				t0 := time.Now()
				var l *lock.Lease
				var err error
				for {
					l, err = mu.Lock(ctx, lock.WithWait(cfg.timeout))
					if err == nil || ctx.Err() != nil {
						break
					}
					res.Add(errors.Is(err, lock.ErrLocked), err)
					if stopped.Load() {
						break // after the stop: no new wait
					}
				}
				if err != nil {
					break
				}
				t1 := time.Now()
				if !held.CompareAndSwap(0, 1) {
					violations.Add(1)
				}
				r := acqRec{g: id, owner: l.Owner(), token: l.Token(), asked: t0, got: t1, prev: int(lastHolder.Swap(int64(id))), gap: -1}
				if at := relAt.Load(); at > 0 {
					r.gap = time.Duration(since(t1) - at)
				}
				time.Sleep(cfg.hold)
				t2 := time.Now()
				r.hold = t2.Sub(t1)
				i := j.add(r)
				held.Store(0)
				relAt.Store(since(t2))
				uctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
				err = l.Unlock(uctx)
				cancel()
				d := time.Since(t2)
				if err != nil {
					res.Add(false, fmt.Errorf("unlock: %w", err))
					d = -1
				}
				j.unlocked(i, d)
				if cfg.think > 0 {
					time.Sleep(cfg.think)
				}
			}
		})
	}
	stopAll := func() {
		stopped.Store(true)
		waitGroup(&wg, fmt.Sprintf("%d goroutines", g), cfg.timeout+30*time.Second)
	}

	if err := benchutil.Sleep(ctx, cfg.warmup); err != nil {
		stopAll()
		return nil, err
	}
	before, err := benchutil.TakeSnapshot(ctx, ctl)
	if err != nil {
		stopAll()
		return nil, err
	}
	res.start = time.Now()
	s := newSampler(smp, name)
	var sampling sync.WaitGroup
	var stopSampling atomic.Bool
	if cfg.sample > 0 {
		sampling.Go(func() { s.run(cfg.sample, &stopSampling) })
	}
	err = benchutil.Sleep(ctx, cfg.duration)
	stopSampling.Store(true)
	sampling.Wait()
	res.end = time.Now()
	if err != nil {
		stopAll()
		return nil, err
	}
	after, err := benchutil.TakeSnapshot(context.Background(), ctl)
	res.loadEnd = benchutil.Loadavg()
	stopAll()
	res.drain = time.Since(res.end)
	if err != nil {
		return nil, err
	}
	res.violations = violations.Load()
	closeAll()
	time.Sleep(200 * time.Millisecond) // go-redis's housekeeping winds down
	res.goroutinesLeft = runtime.NumGoroutine() - goroutinesBefore

	res.analyze(j.recs, s, before, after)
	if cfg.trace {
		res.trace = analyzeTrace(res, j.recs, hooks)
	}
	return res, nil
}

// waitGroup waits for wg and gives up after grace: every Lock has a
// WithWait and every Unlock a timeout, so goroutines still running then
// mean the library hangs.
func waitGroup(wg *sync.WaitGroup, what string, grace time.Duration) {
	benchutil.WaitOrAbort(wg, grace, fmt.Sprintf("fairbench: %s: still running %v after the stop; every call has a timeout, so the library hangs; giving up", what, grace))
}
