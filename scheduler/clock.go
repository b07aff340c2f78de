package scheduler

import "time"

// A Clock tells the time and waits. The Scheduler takes every tick's time
// from it and waits for each tick on it; tests replace it (WithClock) to
// skew a replica's clock, or to step time by hand. Runs, retries, leases
// and durations stay on the system clock.
type Clock interface {
	// Now is the current time: what the schedules are evaluated against.
	Now() time.Time
	// NewTimer returns a timer that fires once d has passed on this clock.
	NewTimer(d time.Duration) Timer
}

// A Timer fires once, as time.Timer does.
type Timer interface {
	// C receives the time once the timer fires.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// SystemClock is the Clock of the machine: time.Now and time.Timer.
type SystemClock struct{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (SystemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }
