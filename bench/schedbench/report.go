package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

// slowAfterKill is the lateness above which a run after the kill counts as
// having waited for a fallback (the killed replica's claim or lease).
const slowAfterKill = 200 * time.Millisecond

// killSettle is how long after the SIGKILL the harness reads the killed
// replica's locks: its claims already on the wire land meanwhile, and take
// their locks for a lease.
const killSettle = 200 * time.Millisecond

// result is what one row measured.
type result struct {
	spec
	jobs      int
	work      time.Duration
	version   string // redis-server's; "-" on the in-memory backend
	loadStart string
	loadEnd   string
	start     time.Time // the Schedulers were started
	first     time.Time // the window's ticks: first ≤ tick < last
	last      time.Time
	killed    int                 // the killed replica's index; -1: none
	killAt    time.Time           // when the SIGKILL was sent
	heldUntil map[int32]time.Time // the job locks the killed replica held at its kill, until their leases end

	// cluster rows: the primaries at the start (the order of the
	// snapshots' nodes), the one SIGKILLed at killAt, when its replica
	// had taken over (every node cluster_state:ok) and when the killed
	// node had restarted as a replica; the counters cover the window's
	// first countTicks ticks only.
	primaries     []string
	failedPrimary string
	promotedAt    time.Time
	rejoinedAt    time.Time
	countTicks    int
	counted       int64   // job-ticks the snapshots' counters cover
	nodeCmds      []int64 // client commands per primary between the snapshots
	inFailover    int64   // job-ticks missed from the kill's tick − failoverLead to the promotion + failoverGrace
	// failoverScripts is the scripts (claims, finishes) the replicas sent
	// from the kill to the promotion.
	failoverScripts int64

	stops []stopResult // per replica

	// from the journal
	ticks      int   // ticks in the window, per job
	jobTicks   int64 // ticks × jobs
	runs       int64 // all runs of the whole run
	windowRuns int64
	dups       int64    // runs of a job and tick beyond the first, whole run
	dupList    []string // the first few
	missed     int64    // job-ticks of the window that no replica ran (but blocked ones)
	blocked    int64    // kill row: job-ticks not run because the killed replica held the job's lock at its kill, due before its lease ended
	missedList []string
	missedAt   map[time.Time]int64 // missed job-ticks per tick
	oddTicks   int64               // runs whose tick is not a whole second
	handoffs   int64               // runs with Attempt > 1
	noInfo     int64
	badInfo    int64
	badLines   int64
	late       benchutil.Durations // lateness of the window's runs, sorted
	lateAll    time.Duration
	lateAfter  benchutil.Durations // kill row: the window's runs of the kill's tick and later, sorted
	lateSlow   benchutil.Durations // … those later than slowAfterKill
	perReplica []int64             // the window's runs per replica

	// from the snapshots
	wall        time.Duration // between the two snapshots
	client      map[string]int64
	lua         map[string]int64
	usec        map[string]int64 // INFO commandstats usec per command
	clientUsec  int64            // usec of the names only clients send
	bothUsec    int64            // usec of the names clients sent and scripts run too
	both        []string         // those names
	sentUnknown bool             // a replica was killed: its sends in the window are not known
	procCPU     time.Duration    // this process and the replica processes
	redisCPU    float64          // redis-server, all threads
	redisMain   float64          // its main thread (or all, before Redis 6.2)
	hasMain     bool
	otherCPU    time.Duration // the machine's busy time less procCPU and redis-server's; -1 unknown
	loadWin     [2]string
	window      []replicaMetrics // the window's scheduler metrics, per replica
}

type runKey struct {
	job  int32
	tick int64 // UnixNano
}

// analyze turns the journal and the two snapshots into the result.
func (r *result) analyze(j *journal, before, after snapshot) {
	j.mu.Lock()
	runs := j.runs
	r.noInfo, r.badInfo, r.badLines = j.noInfo, j.badInfo, j.bad
	j.mu.Unlock()

	r.ticks = int(r.last.Sub(r.first) / time.Second)
	r.jobTicks = int64(r.ticks) * int64(r.jobs)
	r.runs = int64(len(runs))
	r.perReplica = make([]int64, r.replicas)
	r.counted = r.jobTicks
	if r.cluster {
		r.counted = int64(r.countTicks) * int64(r.jobs)
	}
	r.missedAt = map[time.Time]int64{}
	killTick := r.killAt.Truncate(time.Second)
	seen := make(map[runKey]int, len(runs))
	for _, x := range runs {
		if x.tick.Truncate(time.Second) != x.tick {
			r.oddTicks++
		}
		if x.attempt > 1 {
			r.handoffs++
		}
		r.lateAll = max(r.lateAll, x.late)
		k := runKey{x.job, x.tick.UnixNano()}
		seen[k]++
		if seen[k] > 1 {
			r.dups++
			if len(r.dupList) < 5 {
				r.dupList = append(r.dupList, fmt.Sprintf("%s tick %s (replica r%d, attempt %d)",
					jobName(int(x.job)), x.tick.UTC().Format(time.TimeOnly), x.replica+1, x.attempt))
			}
		}
		if !x.tick.Before(r.first) && x.tick.Before(r.last) {
			r.windowRuns++
			r.perReplica[x.replica]++
			r.late = append(r.late, x.late)
			if r.faulted() && !x.tick.Before(killTick) {
				r.lateAfter = append(r.lateAfter, x.late)
				if x.late > slowAfterKill {
					r.lateSlow = append(r.lateSlow, x.late)
				}
			}
		}
	}
	slices.Sort(r.late)
	slices.Sort(r.lateAfter)
	slices.Sort(r.lateSlow)
	for t := r.first; t.Before(r.last); t = t.Add(time.Second) {
		for k := range r.jobs {
			if seen[runKey{int32(k), t.UnixNano()}] == 0 {
				if until, ok := r.heldUntil[int32(k)]; ok && t.Before(until) {
					r.blocked++ // no one can take a dead holder's lock before its lease ends
					continue
				}
				if r.cluster && !t.Before(r.killAt.Add(-failoverLead)) && !t.After(r.promotedAt.Add(failoverGrace)) {
					r.inFailover++
					continue
				}
				r.missed++
				r.missedAt[t]++
				if len(r.missedList) < 5 {
					r.missedList = append(r.missedList, fmt.Sprintf("%s tick %s", jobName(k), t.UTC().Format(time.TimeOnly)))
				}
			}
		}
	}

	r.wall = after.at.Sub(before.at)
	r.loadWin = [2]string{before.load, after.load}
	sent := map[string]int64{}
	for i := range after.metrics {
		if after.metrics[i].Outcomes == nil { // killed before the snapshot
			r.window = append(r.window, replicaMetrics{})
			r.sentUnknown = true
			continue
		}
		d := after.metrics[i].minus(before.metrics[i])
		r.window = append(r.window, d)
		for k, v := range d.Sent {
			sent[k] += v
		}
	}
	r.client, r.lua, r.both = splitCommands(benchutil.StatsDelta(before.Calls, after.Calls), sent)
	for i := range min(len(before.nodes), len(after.nodes)) {
		var n int64
		for k, v := range benchutil.StatsDelta(before.nodes[i], after.nodes[i]) {
			if k != "info" && k != "replconf" && !inScripts[k] { // as splitCommands
				n += v
			}
		}
		r.nodeCmds = append(r.nodeCmds, n)
	}
	r.usec = benchutil.StatsDelta(before.Usec, after.Usec)
	r.clientUsec, r.bothUsec = clientSent(r.client, r.usec)
	r.redisCPU, r.procCPU, r.otherCPU = after.CPUSince(before.Snapshot)
	r.redisMain = after.MainThreadCPU() - before.MainThreadCPU()
	r.hasMain = after.HasMain
}

// clientSent is the server time of the commands clients sent: the usec of
// the names of client that no script runs (EVALSHA, whose usec holds its
// script's commands, SUBSCRIBE, ...). It leaves out the commands run
// inside scripts, which INFO commandstats counts under their own names and
// again inside the EVALSHA's usec. The names that clients and scripts both
// send (HGETALL, EXISTS, ...) have one usec for both, which cannot be
// split: their usec is returned apart, as bothUsec, and not guessed at.
func clientSent(client, usec map[string]int64) (only, both int64) {
	for k := range client {
		if inScripts[k] {
			both += usec[k]
		} else {
			only += usec[k]
		}
	}
	return only, both
}

// onlyClients is client without the names that scripts run too.
func onlyClients(client map[string]int64) map[string]int64 {
	m := map[string]int64{}
	for k, v := range client {
		if !inScripts[k] {
			m[k] = v
		}
	}
	return m
}

func (r *result) name() string { return r.row + ": " + r.title() }

// faulted reports whether the row kills something in the middle of the
// window: a replica, or a Cluster's primary.
func (r *result) faulted() bool { return r.killed >= 0 || r.cluster }

// failoverGrace is how long after a Cluster's promotion a tick may still be
// missed: the bound is the node timeout + 2 s from the kill.
const failoverGrace = 2 * time.Second

// failoverLead is how long before a Cluster primary's kill a tick may be
// missed as well: one whose claim or finish was still on its way to the
// primary (as the fault suite's Window.Lead).
const failoverLead = time.Second

// shareSpread is the largest distance of a primary's share of the client
// commands from the mean share, as a fraction of the mean (0.25: ±25 %).
func (r *result) shareSpread() float64 {
	if len(r.nodeCmds) == 0 {
		return 0
	}
	var mean float64
	for _, n := range r.nodeCmds {
		mean += float64(n)
	}
	mean /= float64(len(r.nodeCmds))
	var spread float64
	for _, n := range r.nodeCmds {
		spread = max(spread, abs(float64(n)-mean)/max(mean, 1))
	}
	return spread
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// shares renders each primary's share of the client commands.
func (r *result) shares() string {
	var total int64
	for _, n := range r.nodeCmds {
		total += n
	}
	var parts []string
	for i, n := range r.nodeCmds {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", r.primaries[i], 100*float64(n)/float64(max(total, 1))))
	}
	return strings.Join(parts, ", ")
}

func (r *result) redis() bool { return !r.memory }

func (r *result) clientCmds() int64 { return benchutil.Sum(r.client) }

func (r *result) cmdsPerJobTick() float64 {
	if r.counted == 0 {
		return 0
	}
	return float64(r.clientCmds()) / float64(r.counted)
}

// redisCPUPerJobTick is the CPU of redis-server's main thread per job-tick.
func (r *result) redisCPUPerJobTick() time.Duration {
	return time.Duration(r.redisMain * float64(time.Second) / float64(max(r.counted, 1)))
}

// perKilo is x per 1,000 of the window's job-ticks.
func (r *result) perKilo(x float64) float64 {
	if r.counted == 0 {
		return 0
	}
	return x * 1000 / float64(r.counted)
}

// waitOf sums the window's fire → claim-result histogram for outcome over
// the replicas.
func (r *result) waitOf(outcome string) hist {
	var h hist
	for _, m := range r.window {
		if w, ok := m.Wait[outcome]; ok {
			h = h.add(w)
		}
	}
	return h
}

func (r *result) maxShutdown() time.Duration {
	var d time.Duration
	for _, s := range r.stops {
		d = max(d, s.Shutdown)
	}
	return d
}

// floorRatio is r's lateness p99 ÷ the floor's, or 0 without a floor.
func (r *result) floorRatio(floor *result) float64 {
	if floor == nil || len(floor.late) == 0 || floor.late.Pct(99) <= 0 {
		return 0
	}
	return float64(r.late.Pct(99)) / float64(floor.late.Pct(99))
}

func findRow(results []*result, row string) *result {
	for _, r := range results {
		if r.row == row {
			return r
		}
	}
	return nil
}

// Targets of the issue.
const (
	targetLateP99     = 50 * time.Millisecond
	targetLateKill    = 300 * time.Millisecond // lateness p99 of the ticks after a replica's kill
	targetFloorRatio  = 1.5
	targetCmds        = 2.5                   // Redis commands per job-tick, whole fleet
	targetRedisCPU    = 40 * time.Microsecond // Redis main-thread CPU per job-tick
	targetRedisCPUBig = 25 * time.Microsecond // the same from bigJobs jobs
	bigJobs           = 1000
	targetProcCPU     = 200 * time.Microsecond // the replica processes' CPU per job-tick, all together
	// targetShareSpread bounds each Cluster primary's share of the client
	// commands: within ±25 % of the mean share.
	targetShareSpread = 0.25
)

func pct3(ds benchutil.Durations) string {
	if len(ds) == 0 {
		return "-"
	}
	return fmtDur(ds.Pct(50)) + " / " + fmtDur(ds.Pct(99)) + " / " + fmtDur(ds.Max())
}

func printTable(w io.Writer, results []*result, floor *result) {
	t := benchutil.NewMetricTable("metric", results, (*result).name)
	row := t.Row
	onRedis := func(f func(r *result) string) func(r *result) string {
		return func(r *result) string {
			if !r.redis() {
				return "-"
			}
			return f(r)
		}
	}
	row("measured window (UTC)", func(r *result) string {
		return fmt.Sprintf("%s–%s, %d ticks", r.first.UTC().Format(time.TimeOnly), r.last.Add(-time.Second).UTC().Format(time.TimeOnly), r.ticks)
	})
	row("job-ticks in the window", func(r *result) string { return fmt.Sprint(r.jobTicks) })
	row("runs in the window", func(r *result) string { return fmt.Sprint(r.windowRuns) })
	row("duplicate ticks (whole run)", func(r *result) string { return fmt.Sprintf("%d (of %d runs)", r.dups, r.runs) })
	row("missed ticks (window; cluster: outside the failover)", func(r *result) string { return fmt.Sprint(r.missed) })
	row("cluster: missed from the kill − 1s to promotion + 2s", func(r *result) string {
		if !r.cluster {
			return "-"
		}
		return fmt.Sprint(r.inFailover)
	})
	row("cluster: primary SIGKILLed → promoted; → rejoined", func(r *result) string {
		if !r.cluster {
			return "-"
		}
		return fmt.Sprintf("%s → %s; → %s", r.killAt.UTC().Format("15:04:05.000"), fmtDur(r.promotedAt.Sub(r.killAt)), fmtDur(r.rejoinedAt.Sub(r.killAt)))
	})
	row("cluster: scripts sent to the nodes from the kill to the promotion", func(r *result) string {
		if !r.cluster {
			return "-"
		}
		before := float64(r.client["evalsha"]+r.client["eval"]) / max(r.wall.Seconds(), 0.001)
		return fmt.Sprintf("%d (%.0f/s; %.0f/s before the kill)", r.failoverScripts, float64(r.failoverScripts)/max(r.promotedAt.Sub(r.killAt).Seconds(), 0.001), before)
	})
	row("cluster: spread of the primaries' shares of client commands", func(r *result) string {
		if !r.cluster {
			return "-"
		}
		return fmt.Sprintf("±%.1f%% (%d ticks before the kill)", 100*r.shareSpread(), r.countTicks)
	})
	row("blocked by the killed replica's leases", func(r *result) string {
		if r.killed < 0 {
			return "-"
		}
		return fmt.Sprintf("%d (%d locks)", r.blocked, len(r.heldUntil))
	})
	row("lateness p50", func(r *result) string { return fmtDur(r.late.Pct(50)) })
	row("lateness p90", func(r *result) string { return fmtDur(r.late.Pct(90)) })
	row("lateness p99", func(r *result) string { return fmtDur(r.late.Pct(99)) })
	row("lateness max (window / whole run)", func(r *result) string {
		return fmtDur(r.late.Max()) + " / " + fmtDur(r.lateAll)
	})
	row("lateness p99 ÷ floor's p99", func(r *result) string {
		if x := r.floorRatio(floor); x > 0 {
			return fmt.Sprintf("%.2f", x)
		}
		return "-"
	})
	row("after the kill: runs; p50 / p99 / max", func(r *result) string {
		if !r.faulted() {
			return "-"
		}
		return fmt.Sprintf("%d; %s", len(r.lateAfter), pct3(r.lateAfter))
	})
	row(fmt.Sprintf("… later than %v: runs; p50 / p99 / max", slowAfterKill), func(r *result) string {
		if !r.faulted() {
			return "-"
		}
		return fmt.Sprintf("%d; %s", len(r.lateSlow), pct3(r.lateSlow))
	})
	row("claim, fire → acquired: mean (p99 ≤)", func(r *result) string {
		h := r.waitOf("acquired")
		return fmtDur(h.mean()) + " (" + fmtBound(h.bound(99)) + ")"
	})
	row("claim, fire → skipped_done: mean (p99 ≤)", func(r *result) string {
		h := r.waitOf("skipped_done")
		if h.N == 0 {
			return "-"
		}
		return fmtDur(h.mean()) + " (" + fmtBound(h.bound(99)) + ")"
	})
	row("Redis commands per job-tick (fleet)", onRedis(func(r *result) string { return fmt.Sprintf("%.2f", r.cmdsPerJobTick()) }))
	row("… per job-tick per replica", onRedis(func(r *result) string {
		return fmt.Sprintf("%.2f", r.cmdsPerJobTick()/float64(r.replicas))
	}))
	row("+ calls inside Lua per job-tick", onRedis(func(r *result) string {
		return fmt.Sprintf("%.2f", float64(benchutil.Sum(r.lua))/float64(max(r.counted, 1)))
	}))
	row("Redis CPU per job-tick (main thread)", onRedis(func(r *result) string { return fmtDur(r.redisCPUPerJobTick()) }))
	row("… per tick (busy share of its second)", onRedis(func(r *result) string {
		per := time.Duration(r.redisMain * float64(time.Second) / float64(max(r.ticks, 1)))
		return fmt.Sprintf("%s (%.0f%%)", fmtDur(per), 100*per.Seconds())
	}))
	row("server time of client commands per job-tick", onRedis(func(r *result) string {
		s := fmt.Sprintf("%.1fµs", float64(r.clientUsec)/float64(max(r.counted, 1)))
		if r.bothUsec > 0 {
			s += fmt.Sprintf(" (+ ≤ %.1fµs)", float64(r.bothUsec)/float64(max(r.counted, 1)))
		}
		return s
	}))
	row("replica processes' CPU per 1,000 job-ticks", func(r *result) string {
		return fmt.Sprintf("%.3fs (%.0f%% of a core)", r.perKilo(r.procCPU.Seconds()), 100*r.procCPU.Seconds()/r.wall.Seconds())
	})
	row("redis-server CPU per 1,000 job-ticks", onRedis(func(r *result) string {
		return fmt.Sprintf("%.3fs (%.0f%% of a core)", r.perKilo(r.redisCPU), 100*r.redisCPU/r.wall.Seconds())
	}))
	row("other processes' CPU in the window", func(r *result) string {
		if r.otherCPU < 0 {
			return "?"
		}
		return fmt.Sprintf("%.0f%% of a core", 100*r.otherCPU.Seconds()/r.wall.Seconds())
	})
	row("Shutdown, slowest replica", func(r *result) string { return fmtDur(r.maxShutdown()) })
	row("load average: start / window / end", func(r *result) string {
		return fmt.Sprintf("%s / %s / %s", first(r.loadStart), first(r.loadWin[1]), first(r.loadEnd))
	})
	t.Write(w)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Each replica is a process of its own (this program re-executed); it reports its runs over its stdout. floor: one process on lock.NewMemory, no Redis.")
	fmt.Fprintln(w, "lateness: time.Now() at the start of the job func minus info.Tick, over the runs of the window's ticks (nearest rank).")
	fmt.Fprintf(w, "after the kill: the window's runs of the tick the SIGKILL fell in and later; later than %v: those that waited for a fallback.\n", slowAfterKill)
	fmt.Fprintln(w, "claim: the scheduler's own histogram lockcron.job.wait.duration (timer fired → claim answered), summed over replicas; p99 is a bucket bound.")
	fmt.Fprintln(w, "Redis commands: INFO commandstats calls between two snapshots half a second before the window's first tick and before the tick after")
	fmt.Fprintln(w, "its last, minus the calls Lua scripts made (they are counted too) and minus INFO; per job-tick: ÷ (jobs × ticks of the window). Of a name")
	fmt.Fprintln(w, "that scripts run and clients also send (HGETALL, EXISTS, ...), the clients' share is what the replicas' go-redis hooks counted.")
	fmt.Fprintln(w, "Redis CPU: INFO cpu used_cpu_sys_main_thread + used_cpu_user_main_thread between the same snapshots (the thread that runs every command")
	fmt.Fprintln(w, "and script, socket I/O included). Server time of client commands: INFO commandstats usec of the commands clients sent (EVALSHA with")
	fmt.Fprintln(w, "the commands its script ran, SUBSCRIBE, ...), not of those run inside scripts, which commandstats counts again under their own names;")
	fmt.Fprintln(w, "(+ ≤ x): the usec of the names both clients and scripts ran, which commandstats does not split (an upper bound of the clients' share).")
	fmt.Fprintln(w, "CPU: this process and the replica processes (/proc/pid/stat; a killed replica up to its kill), and redis-server (INFO cpu, all threads);")
	fmt.Fprintln(w, "other processes: the busy time of all CPUs (/proc/stat) less those, a noisy neighbour (the hog row's hog is counted here).")
	fmt.Fprintln(w)
}

// first is the first field of a load average.
func first(load string) string {
	f, _, _ := strings.Cut(load, " ")
	return f
}

func fmtBound(d time.Duration) string {
	if d < 0 {
		return fmt.Sprintf("> %gs", waitBuckets[len(waitBuckets)-1])
	}
	return fmtDur(d)
}

func printTargets(w io.Writer, results []*result, floor *result) {
	for _, r := range results {
		fmt.Fprintf(w, "Targets, %s (%d jobs, load average %s at the start, %s at the end):\n", r.name(), r.jobs, first(r.loadStart), first(r.loadEnd))
		fmt.Fprintf(w, "- no duplicate tick (whole run): %d → %s\n", r.dups, benchutil.Verdict(r.dups == 0))
		switch {
		case r.killed >= 0:
			fmt.Fprintf(w, "- no missed tick (window): %d of %d job-ticks, besides %d that the killed replica's %d unexpired leases kept from anyone → %s\n",
				r.missed, r.jobTicks, r.blocked, len(r.heldUntil), benchutil.Verdict(r.missed == 0))
		case r.cluster:
			fmt.Fprintf(w, "- no missed tick (window) outside [the kill − %v, promotion + %v]: %d of %d job-ticks, besides %d within it → %s\n",
				failoverLead, failoverGrace, r.missed, r.jobTicks, r.inFailover, benchutil.Verdict(r.missed == 0))
			fmt.Fprintf(w, "- each primary's share of the client commands within ±%.0f%% of the mean (%d ticks before the kill): ±%.1f%% (%s) → %s\n",
				100*targetShareSpread, r.countTicks, 100*r.shareSpread(), r.shares(), benchutil.Verdict(len(r.nodeCmds) > 0 && r.shareSpread() <= targetShareSpread))
		default:
			fmt.Fprintf(w, "- no missed tick (window): %d of %d job-ticks → %s\n", r.missed, r.jobTicks, benchutil.Verdict(r.missed == 0))
		}
		p99 := r.late.Pct(99)
		if r.row == "floor" {
			fmt.Fprintf(w, "- (the floor: lateness p50 / p99 / max %s; no target)\n\n", pct3(r.late))
			continue
		}
		if r.hog {
			fmt.Fprintf(w, "- (beside the hog, lateness p50 / p99 / max %s; p99 %.2f × the floor's; no target)\n\n", pct3(r.late), r.floorRatio(floor))
			continue
		}
		fmt.Fprintf(w, "- lateness p99 ≤ %v: %s → %s\n", targetLateP99, fmtDur(p99), benchutil.Verdict(len(r.late) > 0 && p99 <= targetLateP99))
		if x := r.floorRatio(floor); x > 0 {
			fmt.Fprintf(w, "- lateness p99 ≤ %.1f × the floor's p99: %s vs %s = %.2f × → %s\n", targetFloorRatio, fmtDur(p99), fmtDur(floor.late.Pct(99)), x, benchutil.Verdict(x <= targetFloorRatio))
		} else {
			fmt.Fprintf(w, "- lateness p99 ≤ %.1f × the floor's p99: not measured (no floor row)\n", targetFloorRatio)
		}
		c := r.cmdsPerJobTick()
		fmt.Fprintf(w, "- ≤ %.1f Redis commands per job-tick, whole fleet: %.2f (%.2f per replica) → %s\n", targetCmds, c, c/float64(r.replicas), benchutil.Verdict(c <= targetCmds))
		cpu, limit := r.redisCPUPerJobTick(), targetRedisCPU
		if r.jobs >= bigJobs {
			limit = targetRedisCPUBig
		}
		fmt.Fprintf(w, "- Redis CPU per job-tick ≤ %v: %s (main thread, INFO cpu) → %s\n", limit, fmtDur(cpu), benchutil.Verdict(cpu <= limit))
		proc := r.procCPU / time.Duration(max(r.counted, 1))
		fmt.Fprintf(w, "- replicas' CPU per job-tick ≤ %v, all together: %s (and this process's) → %s\n", targetProcCPU, fmtDur(proc), benchutil.Verdict(proc <= targetProcCPU))
		if r.cluster {
			fmt.Fprintf(w, "- (primary %s SIGKILLed at %s, cluster-node-timeout 1s; its replica promoted %s later, the killed node back as a replica %s after the kill; runs of the ticks from the kill's on: %d, lateness p50 / p99 / max %s; later than %v: %d, %s)\n",
				r.failedPrimary, r.killAt.UTC().Format("15:04:05.000"), fmtDur(r.promotedAt.Sub(r.killAt)), fmtDur(r.rejoinedAt.Sub(r.killAt)),
				len(r.lateAfter), pct3(r.lateAfter), slowAfterKill, len(r.lateSlow), pct3(r.lateSlow))
		}
		if r.killed >= 0 {
			fmt.Fprintf(w, "- lateness p99 of the ticks after the kill ≤ %v: %s → %s\n", targetLateKill, fmtDur(r.lateAfter.Pct(99)), benchutil.Verdict(len(r.lateAfter) > 0 && r.lateAfter.Pct(99) <= targetLateKill))
			fmt.Fprintf(w, "- (r%d SIGKILLed at %s; runs of the ticks from then on: %d, lateness p50 / p99 / max %s; later than %v: %d, %s)\n",
				r.killed+1, r.killAt.UTC().Format("15:04:05.000"), len(r.lateAfter), pct3(r.lateAfter), slowAfterKill, len(r.lateSlow), pct3(r.lateSlow))
		}
		fmt.Fprintln(w)
	}
}

// printDetails prints, per row, the replicas' shares and outcomes, the
// command breakdown and anything odd.
func printDetails(w io.Writer, cfg *config, r *result) {
	fmt.Fprintf(w, "%s, %d jobs (redis-server %s), per replica, over the window:\n\n", r.name(), r.jobs, r.version)
	outcomes := map[string]bool{}
	for _, m := range r.window {
		for k := range m.Outcomes {
			outcomes[k] = true
		}
	}
	names := slices.Sorted(maps.Keys(outcomes))
	header := []string{"replica", "runs", "share"}
	header = append(header, names...)
	header = append(header, "acquired: claim mean", "Shutdown")
	var rows [][]string
	for i := range r.replicas {
		row := []string{fmt.Sprintf("r%d", i+1), fmt.Sprint(r.perReplica[i]),
			fmt.Sprintf("%.1f%%", 100*float64(r.perReplica[i])/float64(max(r.windowRuns, 1)))}
		var m replicaMetrics
		if i < len(r.window) {
			m = r.window[i]
		}
		for _, k := range names {
			if m.Outcomes == nil {
				row = append(row, "?")
			} else {
				row = append(row, fmt.Sprint(m.Outcomes[k]))
			}
		}
		row = append(row, fmtDur(m.Wait["acquired"].mean()))
		switch {
		case i < len(r.stops) && r.stops[i].killed:
			row = append(row, "killed")
		case i < len(r.stops):
			row = append(row, fmtDur(r.stops[i].Shutdown))
		default:
			row = append(row, "-")
		}
		rows = append(rows, row)
	}
	benchutil.WriteMarkdown(w, header, rows, 1)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "(runs: job func starts for the window's ticks, from the journal; the outcome columns: the scheduler's lockcron.job.runs between the snapshots;")
	fmt.Fprintln(w, "? for a replica killed before the second snapshot.)")

	per := float64(max(r.counted, 1))
	if r.redis() {
		fmt.Fprintf(w, "- commands sent by clients, per job-tick: %s\n", benchutil.FormatCounts(r.client, per, 3))
		fmt.Fprintf(w, "- calls inside Lua scripts (not counted above), per job-tick: %s\n", benchutil.FormatCounts(r.lua, per, 3))
		if len(r.both) > 0 {
			fmt.Fprintf(w, "- run by clients and inside scripts alike (split by the replicas' go-redis hook counts; their usec, %s in all, not split): %s\n",
				fmtDur(time.Duration(r.bothUsec)*time.Microsecond), strings.Join(r.both, ", "))
		}
		if r.sentUnknown {
			fmt.Fprintln(w, "- the killed replica's own count of the commands it sent in the window is lost: of the names scripts also run, its sends count as inside Lua")
		}
		fmt.Fprintf(w, "- server time per call of the client commands (INFO commandstats usec; EVALSHA's includes its script's commands): %s\n", benchutil.FormatUsecPerCall(onlyClients(r.client), r.usec))
		main := "main thread"
		if !r.hasMain {
			main = "whole process: this Redis has no main-thread fields"
		}
		fmt.Fprintf(w, "- Redis CPU in the window (%s): %s, %.0f%% of a core\n", main, fmtDur(time.Duration(r.redisMain*float64(time.Second))), 100*r.redisMain/r.wall.Seconds())
	}
	waits := map[string]bool{}
	for _, m := range r.window {
		for k := range m.Wait {
			waits[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(waits)) {
		fmt.Fprintf(w, "- claims, timer fired → %s, all replicas, by bucket: %s\n", k, r.waitOf(k))
	}
	var total []string
	for i, s := range r.stops {
		switch {
		case s.killed:
			total = append(total, fmt.Sprintf("r%d: killed", i+1))
		case s.MetErr != "":
			total = append(total, fmt.Sprintf("r%d: %s", i+1, s.MetErr))
		default:
			total = append(total, fmt.Sprintf("r%d: %s", i+1, benchutil.FormatCounts(s.Metrics.Outcomes, 0, 3)))
		}
	}
	fmt.Fprintf(w, "- outcomes over the whole run: %s\n", strings.Join(total, "; "))

	var odd []string
	if r.dups > 0 {
		odd = append(odd, fmt.Sprintf("DUPLICATE TICKS: %d, first: %s", r.dups, strings.Join(r.dupList, ", ")))
	}
	if r.missed > 0 {
		var at []string
		for _, t := range slices.SortedFunc(maps.Keys(r.missedAt), time.Time.Compare) {
			at = append(at, fmt.Sprintf("%s: %d", t.UTC().Format(time.TimeOnly), r.missedAt[t]))
		}
		odd = append(odd, fmt.Sprintf("MISSED TICKS: %d, by tick: %s; first: %s", r.missed, strings.Join(at, ", "), strings.Join(r.missedList, ", ")))
	}
	if r.oddTicks > 0 {
		odd = append(odd, fmt.Sprintf("%d runs had a tick that is not a whole second", r.oddTicks))
	}
	if r.handoffs > 0 {
		odd = append(odd, fmt.Sprintf("%d runs had Attempt > 1 (a tick given back or interrupted)", r.handoffs))
	}
	if r.noInfo > 0 || r.badInfo > 0 {
		odd = append(odd, fmt.Sprintf("RunInfo: missing in %d runs, naming another job or replica in %d", r.noInfo, r.badInfo))
	}
	if r.badLines > 0 {
		odd = append(odd, fmt.Sprintf("%d lines from the replica processes did not parse", r.badLines))
	}
	for i, s := range r.stops {
		if s.killed {
			continue
		}
		if s.Err != "" {
			odd = append(odd, fmt.Sprintf("r%d: Shutdown: %s after %s", i+1, s.Err, fmtDur(s.Shutdown)))
		}
		if s.RunErr != "" {
			odd = append(odd, fmt.Sprintf("r%d: Run returned %s, not ErrClosed", i+1, s.RunErr))
		}
		if s.RunHung {
			odd = append(odd, fmt.Sprintf("r%d: Run had not returned 5 s after Shutdown", i+1))
		}
		if s.GoroutinesLeft > 0 {
			odd = append(odd, fmt.Sprintf("r%d: %d goroutines more than before the replica was built, 200 ms after it stopped and closed", i+1, s.GoroutinesLeft))
		}
		if s.exitErr != nil {
			odd = append(odd, fmt.Sprintf("r%d: process: %v", i+1, s.exitErr))
		}
	}
	for _, o := range odd {
		fmt.Fprintf(w, "- %s\n", o)
	}
	if cfg.verbose {
		fmt.Fprintf(w, "- journal: %d runs over the whole run (%d in the window); load average at the window's start and end: %s, %s\n",
			r.runs, r.windowRuns, r.loadWin[0], r.loadWin[1])
	}
	fmt.Fprintln(w)
}
