package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
	"github.com/lockcron/lockcron/lock"
)

// With -trace, the run also times where a handoff goes. A go-redis hook
// on every Client's go-redis client times each script call from the
// client's side (send → reply) and notes the owner id it carries (ARGV[1]
// of the fair scripts), so that each handoff, from the holder's Unlock
// call to the next holder's Lock returning, splits into five steps:
//
//  1. Unlock called → its fairrelease.lua sent (Lease.Unlock's own work);
//  2. fairrelease's round trip;
//  3. its reply → the next holder's fairacquire.lua sent (the wake-up:
//     Pub/Sub message and dispatch, or the releasing Client's own wake, and
//     the waiting goroutine being scheduled);
//  4. fairacquire's round trip;
//  5. its reply → Lock returns (the lease's set-up).
//
// The hook costs a little on every command, so it is off by default.

// scriptCall is one EVALSHA (or EVAL) as a Client's go-redis client saw it.
type scriptCall struct {
	kind  string
	owner string // ARGV[1]
	start time.Time
	d     time.Duration
}

// scriptHook is a go-redis hook that times script calls.
type scriptHook struct {
	mu    sync.Mutex
	calls []scriptCall
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := cmd.Name()
		if name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		t0 := time.Now()
		err := next(ctx, cmd)
		d := time.Since(t0)
		c := scriptCall{start: t0, d: d}
		c.kind, c.owner = scriptKind(cmd)
		h.mu.Lock()
		h.calls = append(h.calls, c)
		h.mu.Unlock()
		return err
	}
}

const (
	kindAcquired = "fairacquire → acquired"
	kindWaits    = "fairacquire → waits"
	kindRelease  = "fairrelease"
)

// scriptKind names a script call by its shape (the lock package's scripts
// are not exported), EVALSHA sha numkeys keys... args..., and returns its
// ARGV[1], the owner id in every script the fair lock runs.
func scriptKind(cmd redis.Cmder) (kind, owner string) {
	args := cmd.Args()
	if len(args) < 3 {
		return "other", ""
	}
	nk, _ := strconv.Atoi(fmt.Sprint(args[2]))
	na := len(args) - 3 - nk
	if na > 0 {
		owner = fmt.Sprint(args[3+nk])
	}
	switch {
	case nk == 4 && na == 6:
		if c, ok := cmd.(*redis.Cmd); ok {
			if v, err := c.Slice(); err == nil && len(v) > 0 && v[0] == int64(1) {
				return kindAcquired, owner
			}
		}
		return kindWaits, owner
	case nk == 4 && na == 3:
		return kindRelease, owner
	case nk == 4 && na == 1:
		return "fairleave", owner
	case nk == 1 && na == 2:
		return "renew", owner
	}
	return "other", owner
}

// idleCost is what single calls cost on the idle server, one at a time:
// PINGs spaced out (each one finds the client and the server asleep, as a
// handoff does) and uncontended fair Lock and Unlock calls.
type idleCost struct {
	spacedPing   benchutil.Durations
	lock, unlock benchutil.Durations
	spacing      time.Duration
	samples      int
}

// idleSamples is how many spaced PINGs and Lock/Unlock pairs idleCosts
// makes; idleSpacing the pause before each.
const (
	idleSamples = 500
	idleSpacing = time.Millisecond
)

func idleCosts(ctx context.Context, cfg *config, ctl *redis.Client, c *lock.Client, name string) (*idleCost, error) {
	ic := &idleCost{spacing: idleSpacing, samples: idleSamples}
	mu := c.FairMutex(name)
	for range idleSamples {
		time.Sleep(idleSpacing)
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t0 := time.Now()
		err := ctl.Ping(pctx).Err()
		ic.spacedPing = append(ic.spacedPing, time.Since(t0))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("PING: %w", err)
		}
	}
	for range idleSamples {
		time.Sleep(idleSpacing)
		t0 := time.Now()
		l, err := mu.Lock(ctx, lock.WithWait(cfg.timeout))
		if err != nil {
			return nil, fmt.Errorf("idle Lock: %w", err)
		}
		t1 := time.Now()
		uctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
		err = l.Unlock(uctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("idle Unlock: %w", err)
		}
		ic.lock = append(ic.lock, t1.Sub(t0))
		ic.unlock = append(ic.unlock, time.Since(t1))
	}
	slices.Sort(ic.spacedPing)
	slices.Sort(ic.lock)
	slices.Sort(ic.unlock)
	return ic, nil
}

// traceResult is the handoffs broken down, over the window's acquisitions.
type traceResult struct {
	scripts map[string]benchutil.Durations // client-side round trip per script kind, sorted
	kinds   []string
	// steps of each handoff (see above), by whether the next holder was on
	// the releaser's Client (woken by it) or on another (woken by the
	// Pub/Sub message); each sorted
	steps [2][5]benchutil.Durations
}

var stepNames = [5]string{
	"Unlock called → fairrelease sent",
	"fairrelease round trip",
	"its reply → next holder's fairacquire sent",
	"fairacquire round trip (acquired)",
	"its reply → Lock returns",
}

func analyzeTrace(r *result, recs []acqRec, hooks []*scriptHook) *traceResult {
	t := &traceResult{scripts: map[string]benchutil.Durations{}}
	release := map[string]scriptCall{}
	acquired := map[string]scriptCall{}
	for _, h := range hooks {
		h.mu.Lock()
		for _, c := range h.calls {
			switch c.kind {
			case kindRelease:
				release[c.owner] = c
			case kindAcquired:
				acquired[c.owner] = c
			}
			if c.start.Before(r.start) || !c.start.Before(r.end) {
				continue
			}
			if _, ok := t.scripts[c.kind]; !ok {
				t.kinds = append(t.kinds, c.kind)
			}
			t.scripts[c.kind] = append(t.scripts[c.kind], c.d)
		}
		h.mu.Unlock()
	}
	for k := range t.scripts {
		slices.Sort(t.scripts[k])
	}
	slices.Sort(t.kinds)
	for i := 1; i < len(recs); i++ {
		p, x := recs[i-1], recs[i]
		if x.got.Before(r.start) || !x.got.Before(r.end) {
			continue
		}
		rel, ok1 := release[p.owner]
		acq, ok2 := acquired[x.owner]
		if !ok1 || !ok2 {
			continue
		}
		k := 1
		if p.g%r.clients == x.g%r.clients {
			k = 0
		}
		relDone, acqDone := rel.start.Add(rel.d), acq.start.Add(acq.d)
		for s, d := range [5]time.Duration{
			rel.start.Sub(p.got.Add(p.hold)), rel.d, acq.start.Sub(relDone), acq.d, x.got.Sub(acqDone),
		} {
			t.steps[k][s] = append(t.steps[k][s], d)
		}
	}
	for k := range t.steps {
		for s := range t.steps[k] {
			slices.Sort(t.steps[k][s])
		}
	}
	return t
}

// fmtSigned is benchutil.FmtDur for durations that may be negative (two
// clocks' events: a wake-up that beats the releaser's own reply).
func fmtSigned(d time.Duration) string {
	switch {
	case d < 0:
		return "−" + benchutil.FmtDur(-d)
	case d == 0:
		return "0"
	}
	return benchutil.FmtDur(d)
}

func printTrace(w io.Writer, results []*result) {
	var rs []*result
	for _, r := range results {
		if r.trace != nil {
			rs = append(rs, r)
		}
	}
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w, "Where a handoff goes (-trace): from the holder's Unlock call to the next holder's Lock returning, client-side clocks, the window's handoffs;")
	fmt.Fprintln(w, "mean (p50), next holder on another Client (woken by the Pub/Sub message) / on the releaser's Client (woken by it):")
	fmt.Fprintln(w)
	header := []string{"step"}
	for _, r := range rs {
		header = append(header, r.label()+", other Client", r.label()+", same Client")
	}
	var rows [][]string
	cell := func(ds benchutil.Durations) string {
		if len(ds) == 0 {
			return "-"
		}
		return fmt.Sprintf("%s (%s)", fmtSigned(ds.Mean()), fmtSigned(ds.Pct(50)))
	}
	for s := range stepNames {
		row := []string{fmt.Sprintf("%d. %s", s+1, stepNames[s])}
		for _, r := range rs {
			row = append(row, cell(r.trace.steps[1][s]), cell(r.trace.steps[0][s]))
		}
		rows = append(rows, row)
	}
	row := []string{"sum: the gap"}
	nrow := []string{"handoffs"}
	for _, r := range rs {
		for _, k := range []int{1, 0} {
			var sum time.Duration
			for s := range stepNames {
				sum += r.trace.steps[k][s].Mean()
			}
			if len(r.trace.steps[k][0]) == 0 {
				row = append(row, "-")
			} else {
				row = append(row, fmtSigned(sum))
			}
			nrow = append(nrow, fmt.Sprint(len(r.trace.steps[k][0])))
		}
	}
	rows = append(rows, row, nrow)
	benchutil.WriteMarkdown(w, header, rows, 1)
	fmt.Fprintln(w)
	for _, r := range rs {
		fmt.Fprintf(w, "%s, script calls in the window (client-side round trip):\n", r.label())
		if ic := r.idle; ic != nil {
			fmt.Fprintf(w, "- for reference, on the idle server before the run, one call every %v: PING p50 %s (back to back: %s); uncontended fair Lock p50 %s, Unlock p50 %s (%d each)\n",
				ic.spacing, benchutil.FmtDur(ic.spacedPing.Pct(50)), benchutil.FmtDur(r.rtt.Pct(50)),
				benchutil.FmtDur(ic.lock.Pct(50)), benchutil.FmtDur(ic.unlock.Pct(50)), ic.samples)
		}
		for _, k := range r.trace.kinds {
			ds := r.trace.scripts[k]
			fmt.Fprintf(w, "- %s: %d calls (%.2f per acquisition), p50 %s, mean %s, p99 %s\n",
				k, len(ds), r.perAcq(int64(len(ds))), benchutil.FmtDur(ds.Pct(50)), benchutil.FmtDur(ds.Mean()), benchutil.FmtDur(ds.Pct(99)))
		}
		fmt.Fprintln(w)
	}
}
