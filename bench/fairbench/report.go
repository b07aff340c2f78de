package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

// Targets of the issue.
const (
	targetJain  = 0.99
	targetRatio = 0.8 // × the ceiling
	targetCmds  = 4.0 // client commands per acquisition
)

// result is what one goroutine count measured.
type result struct {
	goroutines, clients int
	name                string
	loadStart, loadEnd  string
	start, end          time.Time // the measured window
	rtt                 benchutil.Durations
	drain               time.Duration // from the end of the window until every goroutine had stopped
	violations          int64         // acquisitions while another goroutine held the lock
	goroutinesLeft      int
	firstCloseErr       string
	benchutil.ErrorCounts

	// from the journal, over the window
	all      int   // acquisitions of the whole run (warm-up, window, drain)
	acq      int64 // acquisitions whose Lock returned within the window
	counts   []int64
	holdMean time.Duration
	waits    benchutil.Durations // waits that began within the window, sorted
	// handoffs: the previous holder was the same goroutine, another
	// goroutine on the same Client, or one on another Client
	handoffs [3]int64
	gapSum   [3]time.Duration
	gapN     [3]int64

	// from the INFO snapshots
	client, lua map[string]int64 // calls sent by the clients; calls made inside Lua scripts
	own         map[string]int64 // the sampler's calls, subtracted
	ownWant     map[string]int64 // what the sampler counted it sent
	usec        map[string]int64 // server time per command, INFO left out
	redisCPU    float64
	procCPU     time.Duration
	otherCPU    time.Duration // the machine's busy time less this process's and redis-server's; -1 unknown
	unlocks     benchutil.Durations
	trace       *traceResult // -trace
	idle        *idleCost    // -trace

	order orderResult
}

const (
	sameGoroutine = iota
	sameClient
	otherClient
)

var handoffNames = [3]string{"same goroutine", "same Client", "other Client"}

// analyze turns the journal, the snapshots and the INFO pair into the
// result.
func (r *result) analyze(recs []acqRec, s *sampler, before, after benchutil.Snapshot) {
	r.all = len(recs)
	r.counts = make([]int64, r.goroutines)
	var holdSum time.Duration
	for _, x := range recs {
		if !x.asked.Before(r.start) && x.asked.Before(r.end) {
			r.waits = append(r.waits, x.got.Sub(x.asked))
		}
		if x.got.Before(r.start) || !x.got.Before(r.end) {
			continue
		}
		r.acq++
		r.counts[x.g]++
		if x.unl >= 0 {
			r.unlocks = append(r.unlocks, x.unl)
		}
		holdSum += x.hold
		if x.prev < 0 {
			continue
		}
		k := otherClient
		switch {
		case x.prev == x.g:
			k = sameGoroutine
		case x.prev%r.clients == x.g%r.clients:
			k = sameClient
		}
		r.handoffs[k]++
		if x.gap >= 0 {
			r.gapSum[k] += x.gap
			r.gapN[k]++
		}
	}
	if r.acq > 0 {
		r.holdMean = holdSum / time.Duration(r.acq)
	}
	slices.Sort(r.waits)
	slices.Sort(r.unlocks)

	// Commands: the delta less INFO, less the sampler's own calls; of the
	// rest, what only scripts run is Lua-internal, the others the clients
	// sent.
	r.ownWant = map[string]int64{}
	if s.n > 0 {
		r.ownWant = map[string]int64{"multi": s.n, "lrange": s.n, "get": s.n, "exec": s.n}
	}
	r.client, r.lua, r.own = map[string]int64{}, map[string]int64{}, map[string]int64{}
	for k, v := range benchutil.StatsDelta(before.Calls, after.Calls) {
		if k == "info" {
			continue
		}
		if o := min(r.ownWant[k], v); o > 0 {
			r.own[k] = o
			v -= o
		}
		switch {
		case v == 0:
		case inScripts[k]:
			r.lua[k] = v
		default:
			r.client[k] = v
		}
	}
	r.usec = benchutil.StatsDelta(before.Usec, after.Usec)
	delete(r.usec, "info")
	r.redisCPU, r.procCPU, r.otherCPU = after.CPUSince(before)
	r.order = analyzeOrder(recs, s)
}

func (r *result) window() time.Duration { return r.end.Sub(r.start) }

func (r *result) rate() float64 {
	if r.window() <= 0 {
		return 0
	}
	return float64(r.acq) / r.window().Seconds()
}

// ceiling is 1/(hold + 2 × RTT) per second, with the RTT's p50.
func (r *result) ceiling(hold time.Duration) float64 {
	d := hold + 2*r.rtt.Pct(50)
	if d <= 0 {
		return 0
	}
	return 1 / d.Seconds()
}

func (r *result) ratio() float64 {
	c := r.ceiling(r.holdMean)
	if c == 0 {
		return 0
	}
	return r.rate() / c
}

// perAcq is n per acquisition of the window.
func (r *result) perAcq(n int64) float64 {
	if r.acq == 0 {
		return 0
	}
	return float64(n) / float64(r.acq)
}

func (r *result) clientCmds() float64 { return r.perAcq(benchutil.Sum(r.client)) }

func (r *result) jain() float64 { return benchutil.Jain(r.counts) }

func (r *result) gapMean(k int) time.Duration {
	if r.gapN[k] == 0 {
		return 0
	}
	return r.gapSum[k] / time.Duration(r.gapN[k])
}

func (r *result) gapAll() time.Duration {
	var s time.Duration
	var n int64
	for k := range r.gapSum {
		s += r.gapSum[k]
		n += r.gapN[k]
	}
	if n == 0 {
		return 0
	}
	return s / time.Duration(n)
}

func (r *result) label() string {
	return fmt.Sprintf("%d goroutines", r.goroutines)
}

func printTable(w io.Writer, cfg *config, results []*result) {
	t := benchutil.NewMetricTable("metric", results, (*result).label)
	row := t.Row
	dur := benchutil.FmtDur
	row("measured window (UTC)", func(r *result) string {
		return fmt.Sprintf("%s–%s", r.start.UTC().Format("15:04:05.0"), r.end.UTC().Format("15:04:05.0"))
	})
	row("acquisitions in the window", func(r *result) string { return fmt.Sprint(r.acq) })
	row("acquisitions/s", func(r *result) string { return fmt.Sprintf("%.0f", r.rate()) })
	row("ceiling 1/(hold + 2 × RTT), measured hold", func(r *result) string { return fmt.Sprintf("%.0f", r.ceiling(r.holdMean)) })
	row("… acquisitions/s ÷ ceiling", func(r *result) string { return fmt.Sprintf("%.3f", r.ratio()) })
	row(fmt.Sprintf("ceiling with the nominal hold (%v)", cfg.hold), func(r *result) string {
		c := r.ceiling(cfg.hold)
		return fmt.Sprintf("%.0f (× %.3f)", c, r.rate()/c)
	})
	row("hold: mean measured", func(r *result) string { return dur(r.holdMean) })
	row("PING RTT p50 (mean, p99)", func(r *result) string {
		return fmt.Sprintf("%s (%s, %s)", dur(r.rtt.Pct(50)), dur(r.rtt.Mean()), dur(r.rtt.Pct(99)))
	})
	row("gap: Unlock call → next Lock returns, mean", func(r *result) string { return dur(r.gapAll()) })
	row("… next holder on the same / another Client", func(r *result) string {
		return fmt.Sprintf("%s / %s", dur(r.gapMean(sameClient)), dur(r.gapMean(otherClient)))
	})
	row("Unlock p50 (p99)", func(r *result) string { return fmt.Sprintf("%s (%s)", dur(r.unlocks.Pct(50)), dur(r.unlocks.Pct(99))) })
	row("wait p50", func(r *result) string { return dur(r.waits.Pct(50)) })
	row("wait p99", func(r *result) string { return dur(r.waits.Pct(99)) })
	row("wait max", func(r *result) string { return dur(r.waits.Max()) })
	row("Jain's index", func(r *result) string { return fmt.Sprintf("%.4f", r.jain()) })
	row("per-goroutine acquisitions min–max", func(r *result) string {
		if len(r.counts) == 0 {
			return "-"
		}
		return fmt.Sprintf("%d–%d", slices.Min(r.counts), slices.Max(r.counts))
	})
	row("won again by the releasing goroutine", func(r *result) string {
		return fmt.Sprintf("%.1f%%", 100*r.perAcq(r.handoffs[sameGoroutine]))
	})
	row("order: inverted pairs / pairs checked", func(r *result) string {
		if r.order.samples == 0 {
			return "-"
		}
		return fmt.Sprintf("%d / %d", r.order.inversions, r.order.pairs)
	})
	row("order: acquisitions out of queue order / checked", func(r *result) string {
		if r.order.samples == 0 {
			return "-"
		}
		return fmt.Sprintf("%d / %d", r.order.outOfOrder, r.order.checked)
	})
	row("queue length sampled: mean / max", func(r *result) string {
		if r.order.samples == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f / %d", r.order.meanLen, r.order.maxLen)
	})
	row("queue snapshots (distinct)", func(r *result) string {
		return fmt.Sprintf("%d (%d)", r.order.samples, r.order.distinct)
	})
	row("client commands per acquisition", func(r *result) string { return fmt.Sprintf("%.2f", r.clientCmds()) })
	row("… EVALSHA + EVAL", func(r *result) string { return fmt.Sprintf("%.2f", r.perAcq(r.client["evalsha"]+r.client["eval"])) })
	row("… SUBSCRIBE / UNSUBSCRIBE", func(r *result) string {
		return fmt.Sprintf("%.3f / %.3f", r.perAcq(r.client["subscribe"]), r.perAcq(r.client["unsubscribe"]))
	})
	row("+ calls inside Lua per acquisition", func(r *result) string { return fmt.Sprintf("%.2f", r.perAcq(benchutil.Sum(r.lua))) })
	row("… PUBLISH (wake-ups sent)", func(r *result) string { return fmt.Sprintf("%.2f", r.perAcq(r.lua["publish"])) })
	row("server time per acquisition (all but INFO)", func(r *result) string {
		return fmt.Sprintf("%.0fµs", r.perAcq(benchutil.Sum(r.usec)))
	})
	row("… of it the sampler's", func(r *result) string {
		var u int64
		for k := range r.own {
			if k == "multi" || k == "exec" || k == "lrange" {
				u += r.usec[k] // get's usec mixes the sampler's and the scripts'
			}
		}
		return fmt.Sprintf("%.0fµs", r.perAcq(u))
	})
	row("CPU in the window: redis-server / this process", func(r *result) string {
		s := r.window().Seconds()
		return fmt.Sprintf("%.0f%% / %.0f%% of a core", 100*r.redisCPU/s, 100*r.procCPU.Seconds()/s)
	})
	row("… other processes' CPU", func(r *result) string {
		if r.otherCPU < 0 {
			return "?"
		}
		return fmt.Sprintf("%.0f%% of a core", 100*r.otherCPU.Seconds()/r.window().Seconds())
	})
	row("failed Locks / errors", func(r *result) string { return fmt.Sprintf("%d / %d", r.Fails, r.Errs) })
	row("mutual-exclusion violations", func(r *result) string { return fmt.Sprint(r.violations) })
	row("drain after the window", func(r *result) string { return dur(r.drain) })
	t.Write(w)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%d lock.Clients, each on its own go-redis client; goroutine i on Client i mod %d; one lock name per column. The window lies between two\n", cfg.clients, cfg.clients)
	fmt.Fprintln(w, "INFO commandstats snapshots, after the warm-up; acquisitions: Lock returned within it; waits: Lock called within it (finished in the drain if need be).")
	fmt.Fprintf(w, "ceiling: 1/(mean measured hold + 2 × PING RTT p50), the RTT from %d PINGs on the idle server just before the run; hold: Lock returned → Unlock called.\n", cfg.pings)
	fmt.Fprintln(w, "order: the queue and the token high-water mark read in one MULTI every -sample; an inverted pair is a waiter that acquired before one ahead of it")
	fmt.Fprintln(w, "in a snapshot; an acquisition is out of order if a waiter ahead of it (or, if it was not queued yet, any waiter) in the last snapshot before it had")
	fmt.Fprintln(w, "not acquired yet. Waiters that never acquired (left the queue) are left out of both.")
	fmt.Fprintln(w, "commands: INFO commandstats calls between the snapshots, minus INFO, minus the sampler's MULTI/LRANGE/GET/EXEC, minus the calls that only")
	fmt.Fprintln(w, "the fair lock's scripts make (commandstats counts those too), ÷ the window's acquisitions. Percentiles by nearest rank.")
	fmt.Fprintln(w)
}

func printTargets(w io.Writer, cfg *config, r *result) {
	fmt.Fprintf(w, "Targets, %d goroutines over %d Clients:\n", r.goroutines, r.clients)
	o := r.order
	if o.samples == 0 {
		fmt.Fprintln(w, "- order inversions 0: not measured (-sample 0) → -")
	} else {
		ok := o.inversions == 0 && o.outOfOrder == 0 && (o.pairs > 0 || o.checked > 0)
		fmt.Fprintf(w, "- order inversions 0: %d of %d pairs inverted, %d of %d acquisitions out of queue order → %s\n",
			o.inversions, o.pairs, o.outOfOrder, o.checked, benchutil.Verdict(ok))
	}
	j := r.jain()
	fmt.Fprintf(w, "- Jain's index ≥ %.2f: %.4f → %s\n", targetJain, j, benchutil.Verdict(j >= targetJain))
	c := r.ceiling(r.holdMean)
	fmt.Fprintf(w, "- acquisitions/s ≥ %.1f × 1/(hold + 2 × RTT): %.0f/s vs %.0f/s (hold %s, RTT %s) = %.3f × → %s\n",
		targetRatio, r.rate(), c, benchutil.FmtDur(r.holdMean), benchutil.FmtDur(r.rtt.Pct(50)), r.ratio(), benchutil.Verdict(r.acq > 0 && r.ratio() >= targetRatio))
	cc := r.clientCmds()
	fmt.Fprintf(w, "- ≤ %.0f client commands per acquisition: %.2f (with the calls inside Lua scripts: %.2f) → %s\n\n",
		targetCmds, cc, cc+r.perAcq(benchutil.Sum(r.lua)), benchutil.Verdict(r.acq > 0 && cc <= targetCmds))
}

// printDetails prints the breakdowns (-v) and anything odd (always).
func printDetails(w io.Writer, cfg *config, r *result) {
	var lines []string
	add := func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }
	if cfg.verbose {
		add("commands sent by clients, per acquisition: %s", benchutil.FormatCounts(r.client, float64(max(r.acq, 1)), 3))
		add("calls inside Lua scripts, per acquisition: %s", benchutil.FormatCounts(r.lua, float64(max(r.acq, 1)), 3))
		add("the sampler's calls, subtracted: %s", benchutil.FormatCounts(r.own, 0, 0))
		add("server time per call (scripts included): %s", benchutil.FormatUsecPerCall(r.client, r.usec))
		var hs []string
		for k := range handoffNames {
			hs = append(hs, fmt.Sprintf("%s %d (%.1f%%, gap %s)", handoffNames[k], r.handoffs[k], 100*r.perAcq(r.handoffs[k]), benchutil.FmtDur(r.gapMean(k))))
		}
		add("handoffs, by who held before: %s", strings.Join(hs, "; "))
		add("per-goroutine acquisitions: %v", r.counts)
		o := r.order
		add("sampler: %d snapshots (%d distinct), %d owners seen queued (%d never acquired), %d of %d acquisitions after the first snapshot were seen queued (the rest found no queue or were not sampled)",
			o.samples, o.distinct, o.owners, o.neverAcq, o.acqSeen, o.acqAfter)
		add("wait p90 %s; %d acquisitions in the whole run (warm-up and drain included); load average %s → %s",
			benchutil.FmtDur(r.waits.Pct(90)), r.all, r.loadStart, r.loadEnd)
	}
	o := r.order
	for _, e := range o.examples {
		add("ORDER: %s", e)
	}
	if o.jumped > 0 || o.barged > 0 {
		add("ORDER: out-of-order acquisitions: %d jumped ahead in the queue, %d barged in without a place", o.jumped, o.barged)
	}
	if o.tokenDisagre > 0 {
		add("TOKENS: %d acquisitions had a token no larger than the acquisition recorded before them", o.tokenDisagre)
	}
	if o.dupInSnap > 0 {
		add("QUEUE: %d snapshots listed an owner twice", o.dupInSnap)
	}
	if o.sampleErrs > 0 {
		add("sampler: %d failed transactions (the sampler's commands may be off by up to 4 each), first: %s", o.sampleErrs, o.firstSampleErr)
	}
	for k, v := range r.ownWant {
		if r.own[k] != v {
			add("sampler: sent %d %s, the server counted %d", v, strings.ToUpper(k), r.own[k])
		}
	}
	if r.violations > 0 {
		add("MUTUAL EXCLUSION: %d acquisitions while another goroutine held the lock", r.violations)
	}
	if r.Fails > 0 {
		add("failed Locks: %d, first: %s", r.Fails, r.FirstFail)
	}
	if r.Errs > 0 {
		add("errors: %d, first: %s", r.Errs, r.FirstErr)
	}
	if r.firstCloseErr != "" {
		add("close: %s", r.firstCloseErr)
	}
	if r.goroutinesLeft > 0 {
		add("%d goroutines more than before the run, 200 ms after every client closed", r.goroutinesLeft)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "%s (lock %q):\n", r.label(), r.name)
	for _, l := range lines {
		fmt.Fprintf(w, "- %s\n", l)
	}
	fmt.Fprintln(w)
}
