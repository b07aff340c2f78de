package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
)

// Jobs of a scenario with Chain: chainParent runs the worker on the
// schedule, chainChild runs it after each successful run of chainParent.
const (
	chainParent = "chainparent"
	chainChild  = "chainchild"
)

// chainScenario kills the replica that has just finished a run of the
// parent, between the parent's end and its child's start: once the
// parent's finish is in the Redis under test (its run in the parent
// ledger's chain record), within 10ms (the child's claim and its start
// fall in there), then starts a replacement.
func chainScenario() *Scenario {
	sc := base("SIGKILL between a parent's end and its child's start")
	sc.Chain = true
	sc.ExecJobs = 1
	sc.Length, sc.QuickLength = 25*time.Second, 12*time.Second
	sc.Faults = func(f *Faults) {
		kills := 0
		defer func() { f.note("replicas killed just after a run of %s ended: %d", chainParent, kills) }()
		for f.more() {
			ev, ok := f.ended(chainParent)
			if !ok {
				return
			}
			if !f.chainRecorded(ev.Tick) {
				continue // the replica died first, or the finish was not recorded: not this fault
			}
			f.recorded = append(f.recorded, ev.Tick)
			f.sleep(f.between(0, 10*time.Millisecond))
			r := f.c.byID(ev.Replica)
			if r == nil {
				continue
			}
			k := f.c.kill(r, ev.Job, ev.Tick)
			kills++
			f.c.fault(Window{What: "SIGKILL " + r.ID + " after " + chainParent + "@" + ev.Tick, From: k.At, To: k.At, ReplicaOff: r.ID})
			f.sleep(f.between(500*time.Millisecond, 1500*time.Millisecond))
			f.c.start(0) // the autoscaler's replacement
			f.sleep(f.between(time.Second, 3*time.Second))
		}
	}
	return sc
}

// chainConfig is the job blocks of a scenario with Chain.
func (c *Cluster) chainConfig(sched string) string {
	job := func(name, when string) string {
		return fmt.Sprintf(`job %q {
  %s
  overlap = "queue"
  on_shutdown = "handoff"
  retries = 0
  exec {
    command = [%q]
    env = { CHAOS_ORACLE = %q, CHAOS_HOLD = %q }
    grace = "1s"
  }
}
`, name, when, c.env.worker, c.env.oracleAddr, c.sc.Hold.String())
	}
	return job(chainParent, fmt.Sprintf("schedule = %q", sched)) + job(chainChild, fmt.Sprintf("after = [%q]", chainParent))
}

// ended waits for the End of a successful run of a job whose name starts
// with prefix, on a replica that is up, that reached the oracle in the
// last 50ms, and returns it; false at the end of the fault phase.
func (f *Faults) ended(prefix string) (oracle.Event, bool) {
	if f.open == nil {
		f.open = map[string]oracle.Event{}
	}
	for f.more() {
		evs, err := f.env.oracle.EventsFrom(context.Background(), f.seen)
		if err != nil {
			f.t.Fatal(err)
		}
		f.seen += len(evs)
		now := oracle.Mono()
		for _, ev := range evs {
			switch ev.Kind {
			case oracle.Start:
				f.open[ev.ID] = ev
			case oracle.End:
				delete(f.open, ev.ID)
				if strings.HasPrefix(ev.Job, prefix) && ev.Status == oracle.StatusOK && now-ev.Mono < int64(50*time.Millisecond) && f.c.byID(ev.Replica) != nil {
					return ev, true
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return oracle.Event{}, false
}

// checkChain is the chain's own oracle: each tick of the child ran after
// an effective run of the parent of that tick, and each effective run of
// the parent that ended in the fault phase (the drain after it leaves
// time for the child) has an effective run of the child of its tick. That
// the child ran each tick at most once is the checker's "no tick started
// twice", which covers every job. A tick of recorded (the parent's finish
// seen in its chain record before the kill) ran the parent once: its
// finish was recorded, so no run again is excused as ended at the kill.
// Its notes count the kills aimed at a parent's tick that landed before
// the child of that tick started (the fault the scenario is for).
func checkChain(evs []oracle.Event, w *window, recorded []string, kills []Kill) (broken, notes []string) {
	parent := make(map[string]int64) // tick → the end of its effective run
	parentRuns := make(map[string]int)
	child := make(map[string]bool)
	childStart := make(map[string]int64) // tick → the start of its first run
	for _, r := range runs(evs) {
		if r.Trigger != "" {
			continue
		}
		switch r.Job {
		case chainParent:
			parentRuns[r.Tick]++
		case chainChild:
			if s, ok := childStart[r.Tick]; !ok || r.start < s {
				childStart[r.Tick] = r.start
			}
		}
		if !r.effective() {
			continue
		}
		switch r.Job {
		case chainParent:
			parent[r.Tick] = max(parent[r.Tick], r.last)
		case chainChild:
			child[r.Tick] = true
		}
	}
	for tick := range child {
		if _, ok := parent[tick]; !ok {
			broken = append(broken, fmt.Sprintf("%s@%s ran without an effective run of %s of that tick", chainChild, tick, chainParent))
		}
	}
	for tick, end := range parent {
		if end <= w.to && !child[tick] {
			broken = append(broken, fmt.Sprintf("%s@%s did not run after the effective run of %s", chainChild, tick, chainParent))
		}
	}
	for _, tick := range recorded {
		if n := parentRuns[tick]; n != 1 {
			broken = append(broken, fmt.Sprintf("%s@%s ran %d times, though its finish was in the chain record", chainParent, tick, n))
		}
	}
	before := 0
	for _, k := range kills {
		if s, ok := childStart[k.Tick]; k.Job == chainParent && (!ok || s > k.At) {
			before++
		}
	}
	slices.Sort(broken)
	notes = append(notes, fmt.Sprintf("kills after a run of %s that landed before its child's start: %d of %d", chainParent, before, len(kills)))
	return broken, notes
}

// chainRecorded waits up to a second for the finish of the parent's run
// of tick (RFC 3339) to be recorded for its child, polling the parent
// ledger's chain record in the Redis under test.
func (f *Faults) chainRecorded(tick string) bool {
	t, err := time.Parse(time.RFC3339, tick)
	if err != nil {
		return false
	}
	ms := t.UnixMilli()
	key := "lockcron:{" + chainParent + "}:ledger:" + chainParent + ":chain"
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		v, err := f.c.sutDo(context.Background(), "ZRANGEBYSCORE", key, ms, ms)
		if list, ok := v.([]any); err == nil && ok && len(list) > 0 {
			return true
		}
		time.Sleep(time.Millisecond) // the pace of the poll
	}
	return false
}
