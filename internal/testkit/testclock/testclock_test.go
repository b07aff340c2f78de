package testclock_test

import (
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/testkit/testclock"
)

func TestFake(t *testing.T) {
	start := time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC)
	c := testclock.NewFake(start)
	a, b := c.NewTimer(time.Second), c.NewTimer(2*time.Second)
	stopped := c.NewTimer(time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Error("Stop of a waiting timer: want true once, then false")
	}
	if n, _ := c.Waiting(); n != 2 {
		t.Errorf("%d timers wait, want 2", n)
	}
	if at, ok := c.Next(); !ok || !at.Equal(start.Add(time.Second)) {
		t.Errorf("Next = %v, %v; want %v", at, ok, start.Add(time.Second))
	}
	c.Advance(time.Second)
	select {
	case got := <-a.C():
		if !got.Equal(start.Add(time.Second)) {
			t.Errorf("timer fired with %v", got)
		}
	default:
		t.Error("a timer due did not fire")
	}
	select {
	case <-b.C():
		t.Error("a timer not due fired")
	default:
	}
	c.Set(start) // never back
	if !c.Now().Equal(start.Add(time.Second)) {
		t.Errorf("Now = %v after a Set to the past, want it unchanged", c.Now())
	}
	select {
	case <-c.NewTimer(0).C():
	default:
		t.Error("a timer of 0 did not fire at once")
	}
}
