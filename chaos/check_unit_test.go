package chaos

import (
	"slices"
	"testing"
	"time"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
)

// eventsOf returns a maker of exec0's events for tick: accepted by the
// fence, each with the next sequence number and token; an end is a success.
func eventsOf(tick time.Time) func(id, replica string, attempt int, kind string, m int64) oracle.Event {
	seq := int64(0)
	return func(id, replica string, attempt int, kind string, m int64) oracle.Event {
		seq++
		e := oracle.Event{Run: oracle.Run{ID: id, Job: "exec0", Tick: tick.Format(time.RFC3339), Replica: replica, Token: seq, Attempt: attempt},
			Kind: kind, Mono: m, Seq: seq, Accepted: true}
		if kind == oracle.End {
			e.Status = oracle.StatusOK
		}
		return e
	}
}

// The checker's rule for a tick run twice around a SIGKILL: a run that
// completed as its replica was killed could not be recorded, so its tick
// runs again (listed apart, at least once); a run that completed well
// before the kill should have been recorded, so a second run of its tick
// is a violation. The rule holds for every job of the killed replica, not
// only the one the kill was aimed at, and for no other replica.
func TestCheckTwiceAtKill(t *testing.T) {
	wall0 := time.Date(2026, 11, 24, 22, 50, 50, 0, time.UTC)
	const mono0 = int64(1_000 * time.Second)
	w := &window{wall0: wall0, mono0: mono0, period: time.Second, lease: 2 * time.Second}
	at := func(d time.Duration) int64 { return mono0 + int64(d) }
	tick := wall0.Add(5 * time.Second)
	ev := eventsOf(tick)
	for _, c := range []struct {
		name      string
		endBefore time.Duration // the first run's end, before the kill
		killed    string        // the replica killed (the first run's is r9)
		killJob   string        // the job the kill was aimed at
		atKill    bool
	}{
		{"ended 0.2 ms after the kill", -200 * time.Microsecond, "r9", "exec0", true},
		{"ended 30 ms before the kill", 30 * time.Millisecond, "r9", "exec0", true},
		{"ended 500 ms before the kill", 500 * time.Millisecond, "r9", "exec0", false},
		{"ended 3.8 ms after a kill aimed at another job", -3800 * time.Microsecond, "r9", "exec1", true},
		{"ended 30 ms before another replica's kill", 30 * time.Millisecond, "r4", "exec0", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			kill := at(7 * time.Second)
			evs := []oracle.Event{
				ev("a", "r9", 1, oracle.Start, at(5*time.Second)),
				ev("a", "r9", 1, oracle.End, kill-int64(c.endBefore)),
				ev("b", "r2", 2, oracle.Start, kill+int64(2*time.Second)),
				ev("b", "r2", 2, oracle.End, kill+int64(2500*time.Millisecond)),
			}
			w.from, w.to = at(5*time.Second), at(5*time.Second)
			kills := []Kill{{Replica: c.killed, At: kill, Job: c.killJob, Tick: tick.Format(time.RFC3339), Gone: 5 * time.Millisecond}}
			res := check("test", evs, w, []string{"exec0"}, kills)
			want := []string{"exec0@" + tick.Format(time.RFC3339) + "×2"}
			if c.atKill {
				if len(res.Twice) != 0 || !slices.Equal(res.AtKill, want) || len(res.violations()) != 0 {
					t.Errorf("twice %v, at kill %v, violations %v; want it at kill and no violation", res.Twice, res.AtKill, res.violations())
				}
			} else if !slices.Equal(res.Twice, want) || len(res.AtKill) != 0 || len(res.violations()) == 0 {
				t.Errorf("twice %v, at kill %v; want a tick run twice", res.Twice, res.AtKill)
			}
		})
	}
}

// A run that ends while Redis is as good as unreachable for longer than the
// lease cannot record its finish: its tick runs again (listed apart, at
// least once). A shorter outage is ridden out, and a run that ended before
// the outage should have been recorded: a second run is a violation.
func TestCheckTwiceAfterUnreachable(t *testing.T) {
	wall0 := time.Date(2026, 11, 25, 12, 17, 0, 0, time.UTC)
	const mono0 = int64(1_000 * time.Second)
	const lease = 2 * time.Second
	at := func(d time.Duration) int64 { return mono0 + int64(d) }
	tick := wall0.Add(5 * time.Second)
	for _, c := range []struct {
		name       string
		end        time.Duration // the first run's end, from wall0
		down       time.Duration // the outage's length, from 5.1 s
		inFlight   time.Duration // the round trip before the outage
		unrecorded bool
	}{
		{"ended 0.1 s into an outage of 4× the lease", 5200 * time.Millisecond, 4 * lease, 0, true},
		{"ended 0.1 s into an outage of half the lease", 5200 * time.Millisecond, lease / 2, 0, false},
		{"ended before an outage of 4× the lease", 5050 * time.Millisecond, 4 * lease, 0, false},
		{"ended less than the round trip before it: the finish on the way", 5050 * time.Millisecond, 4 * lease, 800 * time.Millisecond, true},
		{"ended more than the round trip before it", 5050 * time.Millisecond, 4 * lease, 40 * time.Millisecond, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := eventsOf(tick)
			from := at(5100 * time.Millisecond)
			to := from + int64(c.down)
			w := &window{wall0: wall0, mono0: mono0, period: time.Second, lease: lease,
				from: at(5 * time.Second), to: at(5 * time.Second),
				excused: []Window{{What: "round trip 1s", From: from, To: to, RedisDown: true, InFlight: c.inFlight}}}
			evs := []oracle.Event{
				ev("a", "r3", 1, oracle.Start, at(5*time.Second)),
				ev("a", "r3", 1, oracle.End, at(c.end)),
				ev("b", "r2", 2, oracle.Start, to+int64(5*time.Second)),
				ev("b", "r2", 2, oracle.End, to+int64(5200*time.Millisecond)),
			}
			res := check("test", evs, w, []string{"exec0"}, nil)
			want := []string{"exec0@" + tick.Format(time.RFC3339) + "×2"}
			if c.unrecorded {
				if len(res.Twice) != 0 || !slices.Equal(res.Unrecorded, want) || len(res.violations()) != 0 {
					t.Errorf("twice %v, unrecorded %v, violations %v; want it unrecorded and no violation", res.Twice, res.Unrecorded, res.violations())
				}
			} else if !slices.Equal(res.Twice, want) || len(res.Unrecorded) != 0 || len(res.violations()) == 0 {
				t.Errorf("twice %v, unrecorded %v; want a tick run twice", res.Twice, res.Unrecorded)
			}
		})
	}
}
