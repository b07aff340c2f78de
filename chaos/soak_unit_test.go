package chaos

import (
	"testing"
	"time"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
)

// Every fault the soak draws is a schedule of the suite's that is meant to
// be survived, or one of the soak's own; a scenario renamed or marked not
// survived is caught here, in make test, not half an hour into a soak.
func TestSoakFaults(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range soakFaults() {
		if k.Run == nil {
			t.Errorf("soak fault %q: no survived scenario of that name with a fault schedule", k.Name)
		}
		if k.Length <= 0 {
			t.Errorf("soak fault %q: length %v", k.Name, k.Length)
		}
		if seen[k.Name] {
			t.Errorf("soak fault %q listed twice", k.Name)
		}
		seen[k.Name] = true
	}
	for _, sc := range scenarios() {
		if seen[sc.Name] && sc.NotSurvived != "" {
			t.Errorf("soak draws %q, which is not survived", sc.Name)
		}
	}
}

// A curve is flat when the median of its last quarter is within the bound
// of its first quarter's: noise and a spike pass, a steady climb does not,
// and a curve too short is not judged.
func TestFlat(t *testing.T) {
	b := flatBound{Ratio: 1.25, Plus: 4}
	for _, c := range []struct {
		name           string
		vals           []float64
		judged, isFlat bool
	}{
		{"constant", []float64{20, 20, 20, 20, 20, 20, 20, 20}, true, true},
		{"noise and one spike", []float64{20, 22, 19, 21, 80, 20, 23, 21, 22, 20, 19, 24}, true, true},
		{"within the bound", []float64{20, 20, 20, 20, 24, 26, 28, 29, 29, 29, 29, 29}, true, true},
		{"a climb", []float64{20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35}, true, false},
		{"too short", []float64{1, 100, 1000}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, last, judged, ok := flat(c.vals, b)
			if judged != c.judged || ok != c.isFlat {
				t.Errorf("flat = judged %v, flat %v (medians %v → %v); want judged %v, flat %v", judged, ok, first, last, c.judged, c.isFlat)
			}
		})
	}
}

// A row of the soak's table for one kind of fault sees the kills just
// before its spans: a run that completed as its replica was SIGKILLed at the
// end of the fault before, and was run again in this one, is at least once
// there too (the soak's row says so), not a tick run twice.
func TestByKindKillBefore(t *testing.T) {
	wall0 := time.Date(2026, 11, 27, 10, 5, 0, 0, time.UTC)
	const mono0 = int64(1_000 * time.Second)
	at := func(d time.Duration) int64 { return mono0 + int64(d) }
	sc := base("soak")
	w := &window{wall0: wall0, mono0: mono0, from: at(0), to: at(20 * time.Second), period: time.Second, lease: sc.Lease}
	ev := eventsOf(wall0.Add(9 * time.Second))
	evs := []oracle.Event{
		ev("a", "r9", 1, oracle.Start, at(9*time.Second)),
		ev("a", "r9", 1, oracle.End, at(9600*time.Millisecond)),
		ev("b", "r2", 2, oracle.Start, at(11600*time.Millisecond)),
		ev("b", "r2", 2, oracle.End, at(12*time.Second)),
	}
	kills := []Kill{{Replica: "r9", At: at(9620 * time.Millisecond), Job: "exec1", Gone: time.Millisecond}}
	spans := []*span{
		{kind: "SIGKILL", from: at(0), to: at(10 * time.Second)},
		{kind: "Redis paused", from: at(10 * time.Second), to: at(20 * time.Second)},
	}
	for _, kind := range []string{"SIGKILL", "Redis paused"} {
		r, n := byKind(kind, spans, evs, w, sc, kills)
		if n != 1 {
			t.Errorf("%s: %d spans, want 1", kind, n)
		}
		if len(r.Twice) != 0 {
			t.Errorf("%s: ticks run twice %v; want the tick completed at the kill listed apart", kind, r.Twice)
		}
	}
	// Without the kill, it is a tick run twice: the test sees the rule.
	if r, _ := byKind("Redis paused", spans, evs, w, sc, nil); len(r.Twice) != 1 {
		t.Errorf("without the kill: ticks run twice %v, want 1", r.Twice)
	}
}
