package scheduler

import "testing"

// A run ended by a later tick (replaced) did not complete: it starts the
// children of when failure and always, not those of success.
func TestWhenMatchesOutcomes(t *testing.T) {
	for _, tc := range []struct {
		outcome                  Outcome
		success, failure, always bool
	}{
		{OutcomeRan, true, false, true},
		{OutcomeFailed, false, true, true},
		{OutcomeInterrupted, false, true, true},
		{OutcomeReplaced, false, true, true},
		{OutcomeDeadlineMissed, false, false, false},
		{OutcomeHandedOff, false, false, false},
	} {
		for w, want := range map[When]bool{WhenSuccess: tc.success, WhenFailure: tc.failure, WhenAlways: tc.always} {
			if got := w.matches(string(tc.outcome)); got != want {
				t.Errorf("when %q matches %q: %t, want %t", w, tc.outcome, got, want)
			}
		}
	}
}
