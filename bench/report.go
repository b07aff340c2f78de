package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

var header = []string{
	"scenario", "implementation", "ops/s", "× ref",
	"lock p50", "lock p99", "lock max", "unlock p50", "unlock p99",
	"hold", "prev holder", "Jain", "cmds/acq", "+Lua/acq", "fails", "errs",
}

func printTable(w io.Writer, cfg *config, results []*result) {
	var rows [][]string
	lastScenario := ""
	for _, r := range results {
		contended := strings.HasPrefix(r.scenario, "3:")
		if contended && r.scenario != lastScenario {
			rows = append(rows, ceilingRow(cfg, r.scenario, results))
		}
		lastScenario = r.scenario
		row := []string{
			r.scenario, r.impl, fmt.Sprintf("%.0f", r.rate), ratio(r.rate, r.reference),
			fmtDur(r.lock.pct(50)), fmtDur(r.lock.pct(99)), fmtDur(r.lock.max()),
			fmtDur(r.unlock.pct(50)), fmtDur(r.unlock.pct(99)),
			"-", "-", "-", "-", "-",
			fmt.Sprint(r.fails), fmt.Sprint(r.errs),
		}
		if r.floor {
			row[3] = "1 (ref)"
		}
		if contended {
			row[9] = fmtDur(r.hold)
			row[10] = fmt.Sprintf("%.1f%%", 100*r.prevHolder)
			row[11] = fmt.Sprintf("%.3f", r.jain)
			if r.allAcq > 0 {
				row[12] = fmt.Sprintf("%.2f", r.clientCmdsPerAcq())
				row[13] = fmt.Sprintf("%.2f", float64(r.luaCmds)/float64(r.allAcq))
			}
		}
		rows = append(rows, row)
	}
	writeMarkdown(w, header, rows)
	fmt.Fprintf(w, "\nops/s: Lock+Unlock pairs/s in 1 and 2 (× ref: ÷ the floor's pairs/s), acquisitions/s in 3 (× ref: ÷ the ceiling 1/(this row's mean hold + 2 × PING RTT), PING RTT %s).\n", fmtDur(cfg.rtt))
	fmt.Fprintf(w, "lock p50/p99/max: latency of Lock in 1 and 2; in 3, the wait from asking (right after the previous Unlock) to holding, across failed attempts.\n")
	fmt.Fprintf(w, "prev holder: share of acquisitions won by the goroutine that had just released. cmds/acq: commands the clients sent per acquisition, from the server\n")
	fmt.Fprintf(w, "(INFO commandstats calls, minus INFO itself, minus the calls made inside Lua scripts, which MONITOR shows as [lua]); +Lua/acq: those Lua-internal calls.\n")
	fmt.Fprintf(w, "fails: attempts that ended without the lock within their retry budget (redislock's default makes one try per call); errs: anything else.\n\n")
}

func ceilingRow(cfg *config, scenario string, results []*result) []string {
	var sum time.Duration
	var n int
	for _, r := range results {
		if r.scenario == scenario && r.hold > 0 {
			sum += r.hold
			n++
		}
	}
	row := make([]string, len(header))
	for i := range row {
		row[i] = "-"
	}
	row[0], row[1] = scenario, "ceiling 1/(hold+2·RTT)"
	if n > 0 && cfg.rtt > 0 {
		hold := sum / time.Duration(n)
		row[2] = fmt.Sprintf("%.0f", 1/(hold+2*cfg.rtt).Seconds())
		row[3] = "1 (ref)"
		row[9] = fmtDur(hold)
	}
	return row
}

func ratio(x, ref float64) string {
	if ref <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", x/ref)
}

func writeMarkdown(w io.Writer, header []string, rows [][]string) {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i < 2 {
				b.WriteString(" " + c + pad + " |")
			} else {
				b.WriteString(" " + pad + c + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(header)
	sep := make([]string, len(header))
	for i := range sep {
		if i < 2 {
			sep[i] = strings.Repeat("-", width[i])
		} else {
			sep[i] = strings.Repeat("-", width[i]-1) + ":"
		}
	}
	line(sep)
	for _, row := range rows {
		line(row)
	}
}

func find(results []*result, scenarioPrefix, impl string) *result {
	for _, r := range results {
		if strings.HasPrefix(r.scenario, scenarioPrefix) && r.impl == impl {
			return r
		}
	}
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

func printTargets(w io.Writer, results []*result) {
	fmt.Fprintln(w, "Targets (ratios within this run):")
	pairs := func(label, sc string, want float64) {
		r := find(results, sc, "lockcron")
		if r == nil || r.reference <= 0 {
			fmt.Fprintf(w, "- %s: not measured\n", label)
			return
		}
		got := r.rate / r.reference
		fmt.Fprintf(w, "- %s ≥ %.2f × floor: %.0f/s vs %.0f/s = %.2f × → %s\n", label, want, r.rate, r.reference, got, verdict(got >= want))
	}
	pairs("lockcron uncontended pairs/s", "1:", 0.9)
	pairs("lockcron 64-goroutine pairs/s", "2:", 0.85)
	for _, n := range []int{8, 32} {
		sc := fmt.Sprintf("3: %d ", n)
		r := find(results, sc, nameLockcronA)
		if r == nil || r.reference <= 0 {
			fmt.Fprintf(w, "- lockcron A, %d goroutines: not measured\n", n)
			continue
		}
		got := r.rate / r.reference
		fmt.Fprintf(w, "- lockcron A, %d goroutines: acquisitions/s ≥ 0.85 × ceiling: %.0f/s vs %.0f/s = %.2f × → %s\n",
			n, r.rate, r.reference, got, verdict(got >= 0.85))
		c := r.clientCmdsPerAcq()
		fmt.Fprintf(w, "- lockcron A, %d goroutines: ≤ 3 client commands per acquisition: %.2f (%.2f counting the calls inside Lua scripts) → %s\n",
			n, c, r.srvCmdsPerAcq(), verdict(r.allAcq > 0 && c <= 3))
		if n == 32 {
			m := r.lock.max()
			fmt.Fprintf(w, "- lockcron A, 32 goroutines: wait max ≤ 250ms: %s → %s\n", fmtDur(m), verdict(r.ops > 0 && m <= 250*time.Millisecond))
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
		if r.firstEr != "" {
			notes = append(notes, fmt.Sprintf("%s / %s: first error (of %d): %s", r.scenario, r.impl, r.errs, r.firstEr))
		}
		if r.firstFail != "" && cfg.verbose {
			notes = append(notes, fmt.Sprintf("%s / %s: first failed attempt (of %d): %s", r.scenario, r.impl, r.fails, r.firstFail))
		}
		if r.monErr != nil {
			notes = append(notes, fmt.Sprintf("%s / %s: %v (cmds/acq counts Lua-internal calls as client commands)", r.scenario, r.impl, r.monErr))
		}
		if cfg.verbose && r.delta != nil {
			per := float64(r.allAcq)
			notes = append(notes, fmt.Sprintf("%s / %s: %d acquisitions (%d after the stop); server calls (per acq): %s; inside Lua: %s; MONITOR non-Lua: %s",
				r.scenario, r.impl, r.allAcq, r.allAcq-r.ops, formatCounts(r.delta, per), formatCounts(r.luaDiff, per), formatCounts(r.monClient, per)))
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
