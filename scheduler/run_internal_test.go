package scheduler

import "testing"

// The outcome strings are in metrics, the history, the status page and
// users' alert rules: they never change. Only handed_off and error give a
// tick back.
func TestOutcomes(t *testing.T) {
	for o, want := range map[Outcome]struct {
		s             string
		done, failure bool
	}{
		OutcomeRan:         {"ran", true, true},
		OutcomeFailed:      {"failed", true, true},
		OutcomeSkippedDone: {"skipped_done", true, false},
		OutcomeSkippedBusy: {"skipped_busy", true, false},
		OutcomeLostLock:    {"lost_lock", true, true},
		OutcomeInterrupted: {"interrupted", true, true},
		OutcomeHandedOff:   {"handed_off", false, true},
		OutcomeMissed:      {"missed", true, true},
		OutcomeError:       {"error", false, true},
		OutcomePaused:      {"paused", true, false},
	} {
		if string(o) != want.s || o.Done() != want.done || o.failure() != want.failure {
			t.Errorf("%q: Done %v, failure %v; want %q, %v, %v", o, o.Done(), o.failure(), want.s, want.done, want.failure)
		}
	}
}

// A run's state moves one way: from claimed to one of succeeded,
// noPermit, permitLost or cut, then to finished, once; a forced stop does
// not cut a run whose job succeeded.
func TestRunStateMoves(t *testing.T) {
	states := []runState{claimed, succeeded, noPermit, permitLost, cut, finished}
	allowed := map[[2]runState]bool{}
	for _, to := range []runState{succeeded, noPermit, permitLost, cut, finished} {
		allowed[[2]runState{claimed, to}] = true
	}
	for _, from := range []runState{succeeded, noPermit, permitLost, cut} {
		allowed[[2]runState{from, finished}] = true
	}
	allowed[[2]runState{noPermit, cut}] = true
	allowed[[2]runState{permitLost, cut}] = true
	for _, from := range states {
		for _, to := range states[1:] {
			r := &run{state: from, outcome: OutcomeRan}
			moved := r.to(to, OutcomeFailed)
			if want := allowed[[2]runState{from, to}]; moved != want {
				t.Errorf("%d → %d: moved %v, want %v", from, to, moved, want)
			}
			if to == finished && moved && r.outcome != OutcomeFailed {
				t.Errorf("%d → finished recorded %q, want failed", from, r.outcome)
			}
			if !moved && r.state != from {
				t.Errorf("%d → %d refused, but the state is %d", from, to, r.state)
			}
		}
	}
}

// Without WithLogger or WithSlog, warnings and errors are logged (to
// stderr), not the INFO lines.
func TestDefaultLoggerLevel(t *testing.T) {
	o, err := buildOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !o.logger.IsWarn() || o.logger.IsInfo() {
		t.Errorf("default logger: IsWarn %v, IsInfo %v; want warnings and errors only", o.logger.IsWarn(), o.logger.IsInfo())
	}
}
