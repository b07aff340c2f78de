package chaos

import (
	"testing"
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
