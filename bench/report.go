package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
)

var header = []string{
	"scenario", "implementation", "ops/s", "× ref",
	"lock p50", "lock p99", "lock max", "unlock p50", "unlock p99",
	"hold", "gap", "prev holder", "Jain", "cmds/acq", "+Lua/acq", "srv CPU µs/op", "fails", "errs",
}

func printTable(w io.Writer, cfg *config, results []*result) {
	var rows [][]string
	lastScenario := ""
	for _, r := range results {
		contended := strings.HasPrefix(r.scenario, "3:")
		if contended && r.scenario != lastScenario {
			rows = append(rows, ceilingRow(r.scenario, results))
		}
		lastScenario = r.scenario
		row := []string{
			r.scenario, r.impl, fmt.Sprintf("%.0f", r.rate), ratio(r.rate, r.reference),
			benchutil.FmtDur(r.lock.Pct(50)), benchutil.FmtDur(r.lock.Pct(99)), benchutil.FmtDur(r.lock.Max()),
			benchutil.FmtDur(r.unlock.Pct(50)), benchutil.FmtDur(r.unlock.Pct(99)),
			"-", "-", "-", "-", "-", "-", fmtUsec(r.srvCPUPerOp()),
			fmt.Sprint(r.Fails), fmt.Sprint(r.Errs),
		}
		if r.floor {
			row[3] = "1 (ref)"
		}
		if contended {
			row[9] = benchutil.FmtDur(r.hold)
			if r.gapN > 0 {
				row[10] = benchutil.FmtDur(r.gapSum / time.Duration(r.gapN))
			}
			row[11] = fmt.Sprintf("%.1f%%", 100*r.prevHolder)
			row[12] = fmt.Sprintf("%.3f", r.jain)
			if a := r.acct; a != nil && a.allAcq > 0 {
				row[13] = fmt.Sprintf("%.2f", a.clientCmdsPerAcq())
				row[14] = fmt.Sprintf("%.2f", float64(a.luaCmds)/float64(a.allAcq))
			}
		}
		rows = append(rows, row)
	}
	benchutil.WriteMarkdown(w, header, rows, 2)
	fmt.Fprintf(w, "\nops/s: Lock+Unlock pairs/s in 1 and 2 (× ref: ÷ the floor's pairs/s), acquisitions/s in 3 (× ref: ÷ the ceiling 1/(this row's mean hold + 2 × PING RTT),\nwith the RTT sampled by %d PINGs on the idle server before each of the row's windows; the ceiling rows show the means. Scenario 1's floor PING: mean %s).\n", rttSamples, benchutil.FmtDur(cfg.rtt))
	fmt.Fprintf(w, "lock p50/p99/max: latency of Lock in 1 and 2; in 3, the wait from asking (right after the previous Unlock) to holding, across failed attempts,\nfor every wait that began within a window (at the end of a window the goroutines stop asking but finish the wait they are in).\n")
	fmt.Fprintf(w, "hold: mean measured hold (time.Sleep(%v)). gap: mean time the lock sat idle between a holder's Unlock call and the next holder's Lock returning (the ceiling allows 2 × RTT).\n", cfg.hold)
	fmt.Fprintf(w, "prev holder: share of acquisitions won by the goroutine that had just released. cmds/acq: commands the clients sent per acquisition, counted by the server\n")
	fmt.Fprintf(w, "in one extra window per row after the measured ones: INFO commandstats calls, minus INFO itself, minus the calls made inside Lua scripts\n")
	fmt.Fprintf(w, "(INFO counts those too; MONITOR, on only in that window because it slows script-heavy clients, shows them as [lua]); +Lua/acq: those Lua-internal calls.\n")
	fmt.Fprintf(w, "srv CPU µs/op: CPU of the server's main thread (INFO cpu used_cpu_sys_main_thread + used_cpu_user_main_thread) per pair or acquisition over the measured\n")
	fmt.Fprintf(w, "windows: what one op costs Redis's single thread, socket I/O included. (Not the sum of INFO commandstats usec, which counts a script's inner commands twice.)\n")
	fmt.Fprintf(w, "fails: attempts that ended without the lock within their retry budget (redislock's default makes one try per call); errs: anything else.\n\n")
}

func ceilingRow(scenario string, results []*result) []string {
	var sum, rtt time.Duration
	var n int
	for _, r := range results {
		if r.scenario == scenario && r.hold > 0 && r.rtt > 0 {
			sum += r.hold
			rtt += r.rtt
			n++
		}
	}
	row := make([]string, len(header))
	for i := range row {
		row[i] = "-"
	}
	row[0], row[1] = scenario, "ceiling 1/(hold+2·RTT)"
	if n > 0 {
		hold, rtt := sum/time.Duration(n), rtt/time.Duration(n)
		row[2] = fmt.Sprintf("%.0f", 1/(hold+2*rtt).Seconds())
		row[3] = "1 (ref)"
		row[9] = benchutil.FmtDur(hold)
		row[10] = benchutil.FmtDur(2 * rtt)
		row[1] = fmt.Sprintf("ceiling 1/(hold+2·RTT), RTT %s", benchutil.FmtDur(rtt))
	}
	return row
}

func ratio(x, ref float64) string {
	if ref <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", x/ref)
}

func find(results []*result, scenarioPrefix, impl string) *result {
	for _, r := range results {
		if strings.HasPrefix(r.scenario, scenarioPrefix) && r.impl == impl {
			return r
		}
	}
	return nil
}

// nameRedislock is the peer the uncontended targets compare with.
const nameRedislock = "redislock default (no retry)"

// printTargets prints the targets of issue 23 ("a lighter client"), as
// ratios within this run.
func printTargets(w io.Writer, results []*result) {
	fmt.Fprintln(w, "Targets (ratios within this run):")
	pairs := func(label, sc string, wantFloor, wantPeer float64) {
		r := find(results, sc, "lockcron")
		if r == nil || r.reference <= 0 {
			fmt.Fprintf(w, "- %s: not measured\n", label)
			return
		}
		if wantFloor > 0 {
			got := r.rate / r.reference
			fmt.Fprintf(w, "- %s ≥ %.2f × floor: %.0f/s vs %.0f/s = %.3f × → %s\n", label, wantFloor, r.rate, r.reference, got, benchutil.Verdict(got >= wantFloor))
		}
		p := find(results, sc, nameRedislock)
		if p == nil || p.rate <= 0 {
			fmt.Fprintf(w, "- %s ≥ %.2f × %s: not measured\n", label, wantPeer, nameRedislock)
			return
		}
		got := r.rate / p.rate
		fmt.Fprintf(w, "- %s ≥ %.2f × %s: %.0f/s vs %.0f/s = %.3f × → %s\n", label, wantPeer, nameRedislock, r.rate, p.rate, got, benchutil.Verdict(got >= wantPeer))
	}
	pairs("lockcron uncontended pairs/s", "1:", 0.75, 0.85)
	pairs("lockcron 64-goroutine pairs/s", "2:", 0, 0.85)
	for _, n := range []int{8, 32} {
		sc := fmt.Sprintf("3: %d ", n)
		r := find(results, sc, nameLockcronA)
		if r == nil || r.reference <= 0 {
			fmt.Fprintf(w, "- lockcron A, %d goroutines: not measured\n", n)
			continue
		}
		got := r.rate / r.reference
		fmt.Fprintf(w, "- lockcron A, %d goroutines: acquisitions/s ≥ 0.85 × ceiling: %.0f/s vs %.0f/s = %.3f × → %s\n",
			n, r.rate, r.reference, got, benchutil.Verdict(got >= 0.85))
		if a := r.acct; a != nil && a.allAcq > 0 {
			c := a.clientCmdsPerAcq()
			fmt.Fprintf(w, "- lockcron A, %d goroutines: ≤ 2.1 client commands per acquisition: %.2f (INFO commandstats with the calls inside Lua scripts: %.2f) → %s\n",
				n, c, r.srvCmdsPerAcq(), benchutil.Verdict(c <= 2.1))
		} else {
			fmt.Fprintf(w, "- lockcron A, %d goroutines: ≤ 2.1 client commands per acquisition: not measured\n", n)
		}
		if n == 32 {
			m := r.lock.Max()
			fmt.Fprintf(w, "- lockcron A, 32 goroutines: wait max ≤ 250ms: %s → %s\n", benchutil.FmtDur(m), benchutil.Verdict(r.ops > 0 && m <= 250*time.Millisecond))
		}
	}
	fmt.Fprintln(w)
}

func printNotes(w io.Writer, cfg *config, results []*result) {
	var notes []string
	for _, r := range results {
		if r.violations > 0 {
			notes = append(notes, fmt.Sprintf("%s / %s: MUTUAL EXCLUSION VIOLATED %d times", r.scenario, r.impl, r.violations))
		}
		if r.FirstErr != "" {
			notes = append(notes, fmt.Sprintf("%s / %s: first error (of %d): %s", r.scenario, r.impl, r.Errs, r.FirstErr))
		}
		if r.FirstFail != "" && cfg.verbose {
			notes = append(notes, fmt.Sprintf("%s / %s: first failed attempt (of %d): %s", r.scenario, r.impl, r.Fails, r.FirstFail))
		}
		if a := r.acct; a != nil && a.monErr != nil {
			notes = append(notes, fmt.Sprintf("%s / %s: %v (cmds/acq counts Lua-internal calls as client commands)", r.scenario, r.impl, a.monErr))
		}
		if a := r.acct; cfg.verbose && a != nil {
			notes = append(notes, fmt.Sprintf("%s / %s: measured windows: %d acquisitions (%d after the stops, drained in %s); server calls (per acq): %s",
				r.scenario, r.impl, r.allAcq, r.allAcq-r.ops, benchutil.FmtDur(r.drain), benchutil.FormatCounts(r.delta, float64(r.allAcq), 2)))
			per := float64(a.allAcq)
			notes = append(notes, fmt.Sprintf("%s / %s: accounting window: %d acquisitions; server calls (per acq): %s; inside Lua: %s; MONITOR non-Lua: %s",
				r.scenario, r.impl, a.allAcq, benchutil.FormatCounts(a.delta, per, 2), benchutil.FormatCounts(a.luaDiff, per, 2), benchutil.FormatCounts(a.monClient, per, 2)))
		}
	}
	if len(notes) == 0 {
		return
	}
	fmt.Fprintln(w, "Notes:")
	for _, n := range notes {
		fmt.Fprintln(w, "- "+n)
	}
}

func fmtUsec(us float64) string {
	if us <= 0 {
		return "-"
	}
	if us < 10 {
		return fmt.Sprintf("%.1f", us)
	}
	return fmt.Sprintf("%.0f", us)
}
