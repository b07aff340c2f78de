// Package testclock holds the scheduler.Clock implementations that tests
// and the fault suite use: a clock set wrong by a fixed offset, and a fake
// clock that moves only when told to.
package testclock

import (
	"slices"
	"sync"
	"time"

	"github.com/lockcron/lockcron/scheduler"
)

// Offset is the system clock shifted by a fixed offset: a replica whose
// clock runs ahead (positive) or behind (negative). Waiting is unchanged.
type Offset time.Duration

// Now returns time.Now() plus the offset.
func (o Offset) Now() time.Time { return time.Now().Add(time.Duration(o)) }

// NewTimer returns a time.Timer.
func (o Offset) NewTimer(d time.Duration) scheduler.Timer { return scheduler.SystemClock{}.NewTimer(d) }

// Fake is a clock that stands still until Advance or Set moves it; its
// timers fire as it passes their time. It is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced when a timer is made
}

// NewFake returns a Fake clock that reads now.
func NewFake(now time.Time) *Fake { return &Fake{now: now, changed: make(chan struct{})} }

// Now returns the clock's time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer returns a timer that fires once the clock has moved d on; at
// once if d <= 0.
func (c *Fake) NewTimer(d time.Duration) scheduler.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

// Advance moves the clock d on and fires the timers due by then.
func (c *Fake) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

// Set moves the clock to t (never back) and fires the timers due by then.
func (c *Fake) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.After(c.now) {
		c.now = t
	}
	c.timers = slices.DeleteFunc(c.timers, func(ft *fakeTimer) bool {
		if ft.at.After(c.now) {
			return false
		}
		ft.ch <- c.now
		return true
	})
}

// Waiting returns how many timers are waiting, and a channel closed when
// the next timer is made: tests wait on it for a loop to be waiting for its
// next tick before they move the clock.
func (c *Fake) Waiting() (int, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers), c.changed
}

// Next returns when the earliest waiting timer fires, and false if none
// waits.
func (c *Fake) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first time.Time
	for _, t := range c.timers {
		if first.IsZero() || t.at.Before(first) {
			first = t.at
		}
	}
	return first, !first.IsZero()
}

type fakeTimer struct {
	c  *Fake
	at time.Time
	ch chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	n := len(t.c.timers)
	t.c.timers = slices.DeleteFunc(t.c.timers, func(ft *fakeTimer) bool { return ft == t })
	return len(t.c.timers) < n
}
