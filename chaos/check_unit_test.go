package chaos

import (
	"slices"
	"testing"
	"time"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
)

// The checker's rule for a tick run twice around a SIGKILL: a run that
// completed as its replica was killed could not be recorded, so its tick
// runs again (listed apart, at least once); a run that completed well
// before the kill should have been recorded, so a second run of its tick
// is a violation.
func TestCheckTwiceAtKill(t *testing.T) {
	wall0 := time.Date(2026, 11, 24, 22, 50, 50, 0, time.UTC)
	const mono0 = int64(1_000 * time.Second)
	w := &window{wall0: wall0, mono0: mono0, period: time.Second, lease: 2 * time.Second}
	at := func(d time.Duration) int64 { return mono0 + int64(d) }
	tick := wall0.Add(5 * time.Second)
	seq := int64(0)
	ev := func(id, replica string, attempt int, kind string, m int64) oracle.Event {
		seq++
		e := oracle.Event{Run: oracle.Run{ID: id, Job: "exec0", Tick: tick.Format(time.RFC3339), Replica: replica, Token: seq, Attempt: attempt},
			Kind: kind, Mono: m, Seq: seq, Accepted: true}
		if kind == oracle.End {
			e.Status = oracle.StatusOK
		}
		return e
	}
	for _, c := range []struct {
		name      string
		endBefore time.Duration // the first run's end, before the kill
		atKill    bool
	}{
		{"ended 0.2 ms after the kill", -200 * time.Microsecond, true},
		{"ended 30 ms before the kill", 30 * time.Millisecond, true},
		{"ended 500 ms before the kill", 500 * time.Millisecond, false},
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
			kills := []Kill{{Replica: "r9", At: kill, Job: "exec0", Tick: tick.Format(time.RFC3339), Gone: 5 * time.Millisecond}}
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
