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

// result is what one configuration measured.
type result struct {
	replicas, jobs int
	work           time.Duration
	version        string
	loadStart      string
	loadEnd        string
	start          time.Time // the Schedulers were started
	first, last    time.Time // the window's ticks: first ≤ tick < last

	stops          []stopResult // per replica
	goroutinesLeft int

	// from the journal
	ticks      int   // ticks in the window, per job
	jobTicks   int64 // ticks × jobs
	runs       int64 // all runs of the whole run
	windowRuns int64
	dups       int64    // runs of a job and tick beyond the first, whole run
	dupList    []string // the first few
	missed     int64    // job-ticks of the window that no replica ran
	missedList []string
	missedAt   map[time.Time]int64 // missed job-ticks per tick
	oddTicks   int64               // runs whose tick is not a whole second
	handoffs   int64               // runs with Attempt > 1
	noInfo     int64
	badInfo    int64
	late       benchutil.Durations // lateness of the window's runs, sorted
	lateAll    time.Duration
	perReplica []int64 // the window's runs per replica

	// from the snapshots
	wall     time.Duration // between the two snapshots
	client   map[string]int64
	lua      map[string]int64
	srvUsec  int64            // INFO commandstats usec of every command but INFO
	usec     map[string]int64 // per command
	procCPU  time.Duration
	redisCPU float64
	otherCPU time.Duration // the machine's busy time less this process's and redis-server's; -1 unknown
	loadWin  [2]string
	window   []replicaMetrics // the window's scheduler metrics, per replica
}

type runKey struct {
	job  int32
	tick int64 // UnixNano
}

// analyze turns the journal and the two snapshots into the result.
func (r *result) analyze(j *journal, before, after snapshot) {
	j.mu.Lock()
	runs := j.runs
	r.noInfo, r.badInfo = j.noInfo, j.badInfo
	j.mu.Unlock()

	r.ticks = int(r.last.Sub(r.first) / time.Second)
	r.jobTicks = int64(r.ticks) * int64(r.jobs)
	r.runs = int64(len(runs))
	r.perReplica = make([]int64, r.replicas)
	r.missedAt = map[time.Time]int64{}
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
		}
	}
	slices.Sort(r.late)
	for t := r.first; t.Before(r.last); t = t.Add(time.Second) {
		for k := range r.jobs {
			if seen[runKey{int32(k), t.UnixNano()}] == 0 {
				r.missed++
				r.missedAt[t]++
				if len(r.missedList) < 5 {
					r.missedList = append(r.missedList, fmt.Sprintf("%s tick %s", jobName(k), t.UTC().Format(time.TimeOnly)))
				}
			}
		}
	}

	r.wall = after.at.Sub(before.at)
	r.client, r.lua = splitCommands(benchutil.StatsDelta(before.Calls, after.Calls))
	usec := benchutil.StatsDelta(before.Usec, after.Usec)
	delete(usec, "info")
	r.usec = usec
	r.srvUsec = benchutil.Sum(usec)
	r.redisCPU, r.procCPU, r.otherCPU = after.CPUSince(before.Snapshot)
	r.loadWin = [2]string{before.load, after.load}
	for i := range after.metrics {
		r.window = append(r.window, after.metrics[i].minus(before.metrics[i]))
	}
}

func (r *result) name() string { return replicasName(r.replicas) }

func replicasName(n int) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}

func (r *result) clientCmds() int64 { return benchutil.Sum(r.client) }

func (r *result) cmdsPerJobTick() float64 {
	if r.jobTicks == 0 {
		return 0
	}
	return float64(r.clientCmds()) / float64(r.jobTicks)
}

func (r *result) cmdsPerJobTickReplica() float64 { return r.cmdsPerJobTick() / float64(r.replicas) }

// perKilo is x per 1,000 of the window's job-ticks.
func (r *result) perKilo(x float64) float64 {
	if r.jobTicks == 0 {
		return 0
	}
	return x * 1000 / float64(r.jobTicks)
}

// waitOf sums the window's fire → claim-result histogram for outcome over
// the replicas.
func (r *result) waitOf(outcome string) hist {
	var h hist
	for _, m := range r.window {
		if w, ok := m.wait[outcome]; ok {
			h = h.add(w)
		}
	}
	return h
}

func (r *result) maxShutdown() time.Duration {
	var d time.Duration
	for _, s := range r.stops {
		d = max(d, s.shutdown)
	}
	return d
}

// Targets of the issue.
const (
	targetLateP99     = 50 * time.Millisecond
	targetCmdsReplica = 3.0
)

func printTable(w io.Writer, results []*result) {
	t := benchutil.NewMetricTable("metric", results, (*result).name)
	row := t.Row
	row("measured window (UTC)", func(r *result) string {
		return fmt.Sprintf("%s–%s, %d ticks", r.first.UTC().Format(time.TimeOnly), r.last.Add(-time.Second).UTC().Format(time.TimeOnly), r.ticks)
	})
	row("job-ticks in the window", func(r *result) string { return fmt.Sprint(r.jobTicks) })
	row("runs in the window", func(r *result) string { return fmt.Sprint(r.windowRuns) })
	row("duplicate ticks (whole run)", func(r *result) string { return fmt.Sprintf("%d (of %d runs)", r.dups, r.runs) })
	row("missed ticks (window)", func(r *result) string { return fmt.Sprint(r.missed) })
	row("lateness p50", func(r *result) string { return fmtDur(r.late.Pct(50)) })
	row("lateness p90", func(r *result) string { return fmtDur(r.late.Pct(90)) })
	row("lateness p99", func(r *result) string { return fmtDur(r.late.Pct(99)) })
	row("lateness max (window / whole run)", func(r *result) string {
		return fmtDur(r.late.Max()) + " / " + fmtDur(r.lateAll)
	})
	row("claim, fire → acquired: mean (p99 ≤)", func(r *result) string {
		h := r.waitOf("acquired")
		return fmtDur(h.mean()) + " (" + fmtBound(h.bound(99)) + ")"
	})
	row("claim, fire → skipped_done: mean (p99 ≤)", func(r *result) string {
		h := r.waitOf("skipped_done")
		if h.n == 0 {
			return "-"
		}
		return fmtDur(h.mean()) + " (" + fmtBound(h.bound(99)) + ")"
	})
	row("Redis commands per job-tick", func(r *result) string { return fmt.Sprintf("%.2f", r.cmdsPerJobTick()) })
	row("… per job-tick per replica", func(r *result) string { return fmt.Sprintf("%.2f", r.cmdsPerJobTickReplica()) })
	row("+ calls inside Lua per job-tick", func(r *result) string {
		return fmt.Sprintf("%.2f", float64(benchutil.Sum(r.lua))/float64(max(r.jobTicks, 1)))
	})
	row("Redis server time per job-tick", func(r *result) string {
		return fmt.Sprintf("%.0fµs", float64(r.srvUsec)/float64(max(r.jobTicks, 1)))
	})
	row("… per tick (busy share of its second)", func(r *result) string {
		per := time.Duration(r.srvUsec) * time.Microsecond / time.Duration(max(r.ticks, 1))
		return fmt.Sprintf("%s (%.0f%%)", fmtDur(per), 100*per.Seconds())
	})
	row("process CPU per 1,000 job-ticks", func(r *result) string {
		return fmt.Sprintf("%.3fs (%.0f%% of a core)", r.perKilo(r.procCPU.Seconds()), 100*r.procCPU.Seconds()/r.wall.Seconds())
	})
	row("redis-server CPU per 1,000 job-ticks", func(r *result) string {
		return fmt.Sprintf("%.3fs (%.0f%% of a core)", r.perKilo(r.redisCPU), 100*r.redisCPU/r.wall.Seconds())
	})
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
	fmt.Fprintln(w, "lateness: time.Now() at the start of the job func minus info.Tick, over the runs of the window's ticks (nearest rank).")
	fmt.Fprintln(w, "claim: the scheduler's own histogram lockcron.job.wait.duration (timer fired → claim answered), summed over replicas; p99 is a bucket bound.")
	fmt.Fprintln(w, "Redis commands: INFO commandstats calls between two snapshots half a second before the window's first tick and before the tick after")
	fmt.Fprintln(w, "its last, minus the calls Lua scripts made (they are counted too) and minus INFO; per job-tick: ÷ (jobs × ticks of the window).")
	fmt.Fprintln(w, "CPU: getrusage(RUSAGE_SELF) user+sys of this process (all replicas, the job funcs and the metrics SDK), and INFO cpu used_cpu_sys+used_cpu_user")
	fmt.Fprintln(w, "of redis-server, between the same snapshots; other processes: the busy time of all CPUs (/proc/stat) less those two, a noisy neighbour.")
	fmt.Fprintln(w, "Server time: INFO commandstats usec of every command but INFO.")
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

func printTargets(w io.Writer, r *result) {
	fmt.Fprintf(w, "Targets, %d jobs on %s:\n", r.jobs, r.name())
	fmt.Fprintf(w, "- no duplicate tick (whole run): %d → %s\n", r.dups, benchutil.Verdict(r.dups == 0))
	fmt.Fprintf(w, "- no missed tick (window): %d of %d job-ticks → %s\n", r.missed, r.jobTicks, benchutil.Verdict(r.missed == 0))
	p99 := r.late.Pct(99)
	fmt.Fprintf(w, "- lateness p99 ≤ %v: %s → %s\n", targetLateP99, fmtDur(p99), benchutil.Verdict(len(r.late) > 0 && p99 <= targetLateP99))
	c := r.cmdsPerJobTickReplica()
	fmt.Fprintf(w, "- ≤ %.0f Redis commands per job-tick per replica: %.2f (%.2f per job-tick) → %s\n\n", targetCmdsReplica, c, r.cmdsPerJobTick(), benchutil.Verdict(c <= targetCmdsReplica))
}

// printDetails prints, per configuration, the replicas' shares and
// outcomes, the command breakdown and anything odd.
func printDetails(w io.Writer, cfg *config, r *result) {
	fmt.Fprintf(w, "%d jobs on %s (redis-server %s), per replica, over the window:\n\n", r.jobs, r.name(), r.version)
	outcomes := map[string]bool{}
	for _, m := range r.window {
		for k := range m.outcomes {
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
			row = append(row, fmt.Sprint(m.outcomes[k]))
		}
		row = append(row, fmtDur(m.wait["acquired"].mean()))
		if i < len(r.stops) {
			row = append(row, fmtDur(r.stops[i].shutdown))
		} else {
			row = append(row, "-")
		}
		rows = append(rows, row)
	}
	benchutil.WriteMarkdown(w, header, rows, 1)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "(runs: job func starts for the window's ticks, from the journal; the outcome columns: the scheduler's lockcron.job.runs between the snapshots.)")

	per := float64(max(r.jobTicks, 1))
	fmt.Fprintf(w, "- commands sent by clients, per job-tick: %s\n", benchutil.FormatCounts(r.client, per, 3))
	fmt.Fprintf(w, "- calls inside Lua scripts (not counted above), per job-tick: %s\n", benchutil.FormatCounts(r.lua, per, 3))
	fmt.Fprintf(w, "- server time per call (INFO commandstats usec, scripts included): %s\n", benchutil.FormatUsecPerCall(r.client, r.usec))
	waits := map[string]bool{}
	for _, m := range r.window {
		for k := range m.wait {
			waits[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(waits)) {
		fmt.Fprintf(w, "- claims, timer fired → %s, all replicas, by bucket: %s\n", k, r.waitOf(k))
	}
	var total []string
	for i, s := range r.stops {
		if s.metErr != nil {
			total = append(total, fmt.Sprintf("r%d: %v", i+1, s.metErr))
			continue
		}
		total = append(total, fmt.Sprintf("r%d: %s", i+1, benchutil.FormatCounts(s.metrics.outcomes, 0, 3)))
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
	for i, s := range r.stops {
		if s.err != nil {
			odd = append(odd, fmt.Sprintf("r%d: Shutdown: %v after %s", i+1, s.err, fmtDur(s.shutdown)))
		}
		if s.runErr != nil {
			odd = append(odd, fmt.Sprintf("r%d: Run returned %v, not ErrClosed", i+1, s.runErr))
		}
		if s.runHung {
			odd = append(odd, fmt.Sprintf("r%d: Run had not returned 5 s after Shutdown", i+1))
		}
	}
	if r.goroutinesLeft > 0 {
		odd = append(odd, fmt.Sprintf("%d goroutines more than before the fleet started, 200 ms after every replica stopped and closed", r.goroutinesLeft))
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
