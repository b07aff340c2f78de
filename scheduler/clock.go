package scheduler

import "time"

// A Clock tells the time and waits. The Scheduler takes every tick's time
// from it; tests replace it (WithClock) to skew a replica's clock, or to
// step time by hand.
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

// OffsetClock is the system clock shifted by a fixed offset: a replica whose
// clock runs ahead (positive) or behind (negative). Waiting is unchanged.
type OffsetClock time.Duration

// Now returns time.Now() plus the offset.
func (o OffsetClock) Now() time.Time { return time.Now().Add(time.Duration(o)) }

// NewTimer returns a time.Timer.
func (o OffsetClock) NewTimer(d time.Duration) Timer { return SystemClock{}.NewTimer(d) }
