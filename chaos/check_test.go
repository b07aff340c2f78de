package chaos

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
)

// run is one run, put together from its events.
type run struct {
	oracle.Run
	start, last       int64 // Mono of its first and last event
	startSeq          int64
	firstAcc, lastAcc int64 // Seq of its first and last accepted write; 0 if none
	lastAccMono       int64 // Mono of its last accepted write
	refused           bool  // some write was refused by the fence
	ended             bool
	status            string
}

// effective reports whether the run ran its course with every write
// accepted: the resource saw it whole.
func (r *run) effective() bool { return r.ended && r.status == oracle.StatusOK && !r.refused }

func runs(evs []oracle.Event) []*run {
	byID := map[string]*run{}
	var out []*run
	for _, ev := range evs {
		r := byID[ev.ID]
		if r == nil {
			r = &run{Run: ev.Run, start: ev.Mono, startSeq: ev.Seq}
			byID[ev.ID] = r
			out = append(out, r)
		}
		r.last = max(r.last, ev.Mono)
		if ev.Accepted {
			if r.firstAcc == 0 {
				r.firstAcc = ev.Seq
			}
			r.lastAcc = ev.Seq
			r.lastAccMono = ev.Mono
		} else {
			r.refused = true
		}
		if ev.Kind == oracle.End {
			r.ended = true
			if r.status == "" || ev.Status != oracle.StatusOK {
				r.status = ev.Status
			}
		}
	}
	return out
}

// groupGoneBound is how long an exec job's process group may outlive its
// SIGKILLed daemon.
const groupGoneBound = 250 * time.Millisecond

// endedAtKill is how long before its replica's SIGKILL a job may have
// completed and still not be recorded: the replica reaps the process, then
// sends the finish, one round trip, after the job's last write.
const endedAtKill = 100 * time.Millisecond

// Result is what the checker found in one scenario.
type Result struct {
	Scenario string
	Ticks    int // ticks that had to run (outside excused windows)
	Runs     int // effective runs
	Starts   int // every run started, effective or not

	Missed []string // required ticks with no effective run
	Twice  []string // ticks with more than one effective run
	// AtKill are the ticks run again because a run completed as its replica
	// was SIGKILLed (within endedAtKill before the kill, or after it): that
	// replica could not record it, so the tick is at least once there.
	AtKill []string
	// Unrecorded are the ticks run again because a run ended while Redis
	// was as good as unreachable (a RedisDown window) for longer than the
	// lease: its finish could not reach Redis before its lock expired, so
	// the tick is at least once there, as documented.
	Unrecorded []string
	Overlaps   []string // runs of one job both accepted by the fence, overlapping
	Backwards  []string // a later run with a smaller token

	Skipped     int           // ticks let go by the overlap policy (due while an earlier tick's run held the lock)
	Interrupted int           // runs of required ticks that did not finish whole
	Rerun       int           // of those, ticks run again whole
	NotRerun    []string      // of those, ticks never run whole
	RerunMax    time.Duration // longest from a kill or interruption to the re-run's start
	RerunWorst  string
	LateP50     time.Duration // scheduled time to start, effective runs
	LateMax     time.Duration
	GroupGone   time.Duration // longest an exec job outlived its SIGKILLed daemon
	LocksLost   float64       // lockcron_lock_lost_total over the replicas still up
	Leaks       []string
	Notes       []string
	Broken      []string // a scenario's own figures that missed their bound
	Err         []string // harness errors (a replica that would not stop, ...)
}

// violations lists what broke an invariant.
func (r *Result) violations() []string {
	var v []string
	add := func(what string, items []string) {
		if len(items) > 0 {
			v = append(v, fmt.Sprintf("%s: %d (%s)", what, len(items), summary(items)))
		}
	}
	add("tick run twice", r.Twice)
	add("runs overlapping, both accepted by the fence", r.Overlaps)
	add("tokens going backwards", r.Backwards)
	add("ticks missed while a replica and Redis were up", r.Missed)
	add("interrupted handoff ticks not re-run", r.NotRerun)
	add("leaks", r.Leaks)
	add("figures missed", r.Broken)
	add("harness", r.Err)
	return v
}

func summary(items []string) string {
	if len(items) <= 3 {
		return fmt.Sprint(items)
	}
	return fmt.Sprint(items[:3]) + " ..."
}

// window is the span of scheduled times that must be run, and the faults
// that excuse some of it.
type window struct {
	wall0   time.Time // a wall time and
	mono0   int64     // the monotonic reading taken with it
	from    int64     // Mono: first tick checked
	to      int64     // Mono: last tick checked
	excused []Window
	period  time.Duration
	lease   time.Duration
}

func (w *window) mono(t time.Time) int64 { return w.mono0 + int64(t.Sub(w.wall0)) }

func (w *window) required(tick time.Time) bool {
	m := w.mono(tick)
	if m < w.from || m > w.to {
		return false
	}
	for _, x := range w.excused {
		if !x.RedisDown {
			continue
		}
		lead := x.Lead
		if lead == 0 {
			lead = time.Second
		}
		if m >= x.From-int64(lead) && m <= x.To+int64(w.lease+time.Second) {
			return false
		}
	}
	return true
}

// unrecordable reports whether a run that ended at m (Mono) could not have
// been recorded: it ended inside a window in which Redis was as good as
// unreachable for longer than the lease (killed, paused, cut off, or every
// round trip over redis.timeout), or less than the window's InFlight
// before it (its finish was on the way when the round trips grew), so its
// finish could not reach Redis before its lock expired. Its tick runs
// again, at least once; a shorter window is ridden out and excuses nothing.
func (w *window) unrecordable(m int64) bool {
	for _, x := range w.excused {
		if x.RedisDown && x.To-x.From >= int64(w.lease) && m >= x.From-int64(x.InFlight) && m <= x.To {
			return true
		}
	}
	return false
}

// check applies the invariants to the events of a scenario.
func check(name string, evs []oracle.Event, w *window, jobs []string, kills []Kill) *Result {
	res := &Result{Scenario: name}
	rs := runs(evs)
	res.Starts = len(rs)
	type key struct{ job, tick, trigger string }
	byTick := map[key][]*run{}
	byJob := map[string][]*run{}
	var late []time.Duration
	for _, r := range rs {
		k := key{r.Job, r.Tick, r.Trigger}
		byTick[k] = append(byTick[k], r)
		byJob[r.Job] = append(byJob[r.Job], r)
		if r.effective() {
			res.Runs++
			if tick, err := time.Parse(time.RFC3339, r.Tick); err == nil && r.Trigger == "" {
				late = append(late, time.Duration(r.start-w.mono(tick)))
			}
		}
	}
	// No tick started twice: at most one run of a tick is effective. A run
	// whose job completed as its replica was SIGKILLed (its end within
	// endedAtKill of the kill) could not be recorded by that replica: its
	// tick runs again, at least once, and is listed apart. That holds for
	// every run of the replica, not only the one the kill was aimed at: a
	// replica runs several jobs at once.
	for k, list := range byTick {
		n, atKill, unrecorded := 0, 0, 0
		for _, r := range list {
			if !r.effective() {
				continue
			}
			n++
			if w.unrecordable(r.last) {
				unrecorded++
				continue
			}
			for _, kl := range kills {
				if kl.Replica == r.Replica &&
					r.last >= kl.At-int64(endedAtKill) && r.last <= kl.At+int64(groupGoneBound) {
					atKill++
					break
				}
			}
		}
		switch {
		case n > 1 && n-atKill-unrecorded <= 1 && atKill == 0:
			res.Unrecorded = append(res.Unrecorded, fmt.Sprintf("%s@%s×%d", k.job, k.tick, n))
		case n > 1 && n-atKill-unrecorded <= 1:
			res.AtKill = append(res.AtKill, fmt.Sprintf("%s@%s×%d", k.job, k.tick, n))
		case n > 1:
			res.Twice = append(res.Twice, fmt.Sprintf("%s@%s×%d", k.job, k.tick, n))
		}
	}
	// No two runs of a job overlapping while both accepted by the fence, and
	// tokens never going backwards.
	for job, list := range byJob {
		acc := slices.Clone(list)
		acc = slices.DeleteFunc(acc, func(r *run) bool { return r.firstAcc == 0 })
		sort.Slice(acc, func(i, j int) bool { return acc[i].firstAcc < acc[j].firstAcc })
		for i := 1; i < len(acc); i++ {
			if acc[i].firstAcc < acc[i-1].lastAcc {
				res.Overlaps = append(res.Overlaps, fmt.Sprintf("%s: %s@%s (token %d) and %s@%s (token %d)", job, acc[i-1].Replica, acc[i-1].Tick, acc[i-1].Token, acc[i].Replica, acc[i].Tick, acc[i].Token))
			}
		}
		byStart := slices.Clone(list)
		sort.Slice(byStart, func(i, j int) bool { return byStart[i].startSeq < byStart[j].startSeq })
		var top int64
		for _, r := range byStart {
			if r.Token < top {
				res.Backwards = append(res.Backwards, fmt.Sprintf("%s: %s@%s token %d after %d", job, r.Replica, r.Tick, r.Token, top))
			}
			top = max(top, r.Token)
		}
	}
	// Every required tick ran, unless the overlap policy let it go: it was
	// due while an earlier tick was in hand, from its own scheduled time
	// (replicas claiming it) until its run ended (a lock whose holder
	// vanished is held until its lease runs out); every interrupted tick
	// was run again.
	held := func(job string, t time.Time) bool {
		m := w.mono(t)
		for _, r := range byJob[job] {
			if r.Tick >= t.UTC().Format(time.RFC3339) {
				continue
			}
			from, to := r.start-int64(200*time.Millisecond), r.last+int64(200*time.Millisecond)
			if due, err := time.Parse(time.RFC3339, r.Tick); err == nil {
				from = min(from, w.mono(due))
			}
			if !r.effective() {
				to = r.last + int64(w.lease+200*time.Millisecond)
			}
			if m >= from && m <= to {
				return true
			}
		}
		return false
	}
	for _, job := range jobs {
		first := w.wall0.Add(time.Duration(w.from - w.mono0)).Truncate(w.period)
		for t := first; w.mono(t) <= w.to; t = t.Add(w.period) {
			if !w.required(t) {
				continue
			}
			list := byTick[key{job, t.UTC().Format(time.RFC3339), ""}]
			var done *run
			for _, r := range list {
				if r.effective() {
					done = r
				}
			}
			if done == nil && len(list) == 0 && held(job, t) {
				res.Skipped++
				continue
			}
			res.Ticks++
			if done == nil {
				res.Missed = append(res.Missed, job+"@"+t.UTC().Format("15:04:05"))
				continue
			}
			for _, r := range list {
				if r == done || r.start > done.start {
					continue
				}
				res.Interrupted++
				res.Rerun++
				// The delay is to the next try of the tick, whoever made it.
				var next *run
				for _, o := range list {
					if o.start > r.start && (next == nil || o.start < next.start) {
						next = o
					}
				}
				from := r.last
				if r.refused && r.lastAccMono != 0 {
					from = r.lastAccMono // paused: it was cut short at its last accepted write
				}
				killed := false
				for _, k := range kills {
					if k.Job == job && k.Tick == r.Tick && k.Replica == r.Replica {
						from, killed = k.At, true
					}
				}
				d := time.Duration(next.start - from)
				if d > res.RerunMax {
					res.RerunMax = d
					res.RerunWorst = fmt.Sprintf("%s@%s: %s's run (try %d) interrupted, tried again by %s (try %d) %v later", job, t.UTC().Format("15:04:05"), r.Replica, r.Attempt, next.Replica, next.Attempt, d.Round(time.Millisecond))
				}
				// Replicas are killed one at a time, so others are up: a
				// killed handoff tick is due again within lease + 1 s.
				if killed && d > w.lease+time.Second {
					res.Broken = append(res.Broken, fmt.Sprintf("%s@%s killed on %s re-run %v later, over lease + 1s", job, t.UTC().Format("15:04:05"), r.Replica, d.Round(time.Millisecond)))
				}
			}
		}
	}
	// Interrupted runs of required ticks that were never run whole are in
	// Missed already; list them apart as well.
	for k, list := range byTick {
		if k.trigger != "" {
			continue
		}
		tick, err := time.Parse(time.RFC3339, k.tick)
		if err != nil || !w.required(tick) || !slices.Contains(jobs, k.job) {
			continue
		}
		if !slices.ContainsFunc(list, (*run).effective) {
			res.Interrupted += len(list)
			res.NotRerun = append(res.NotRerun, k.job+"@"+tick.Format("15:04:05"))
		}
	}
	slices.Sort(res.Missed)
	slices.Sort(res.NotRerun)
	slices.Sort(res.Twice)
	slices.Sort(res.AtKill)
	slices.Sort(res.Unrecorded)
	if len(res.Unrecorded) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("ended while Redis was as good as unreachable for longer than the lease, so not recorded, and run again (at least once, as documented): %d %s", len(res.Unrecorded), summary(res.Unrecorded)))
	}
	if len(res.AtKill) > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("completed as its replica was SIGKILLed, so not recorded, and run again (at least once, as documented): %d %s", len(res.AtKill), summary(res.AtKill)))
	}
	if len(late) > 0 {
		slices.Sort(late)
		res.LateP50 = late[len(late)/2]
		res.LateMax = late[len(late)-1]
	}
	for _, k := range kills {
		if k.Gone < 0 {
			res.Leaks = append(res.Leaks, fmt.Sprintf("exec job of %s still running 10s after its daemon's SIGKILL", k.Replica))
		}
		res.GroupGone = max(res.GroupGone, k.Gone)
	}
	if res.GroupGone > groupGoneBound {
		res.Broken = append(res.Broken, fmt.Sprintf("exec job outlived its SIGKILLed daemon by %v, over %v", res.GroupGone.Round(time.Millisecond), groupGoneBound))
	}
	return res
}
