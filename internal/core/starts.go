package core

import (
	"sync"
	"time"
)

// starts holds the leases of one Client whose watchdog has not started
// yet, and starts each one when its time comes (Lease.startWatchdog), from
// one timer for the whole Client. Most leases are released before that
// time; they then add and remove an entry here and touch no runtime timer:
// the timer is set again only when a lease is due before the time it is
// set for, so that a loop of short leases sets it about once per start
// delay instead of once per lease (setting a timer can wake a thread of
// the runtime: a system call on the caller's path).
//
// starts is safe for concurrent use.
type starts struct {
	mu      sync.Mutex
	pending map[*Lease]time.Time // when each watchdog starts
	timer   *time.Timer          // fires at armed; nil until first needed
	armed   time.Time            // zero when the timer is not set
	closed  bool
}

// add registers l, to start at at, unless l's watchdog was stopped
// already: then it reports false and registers nothing. It checks that
// under the same lock as remove, so that a stop cannot fall between the
// check and the registration.
func (s *starts) add(l *Lease, at time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || l.wdCtx.Err() != nil {
		return false
	}
	if s.pending == nil {
		s.pending = make(map[*Lease]time.Time)
	}
	s.pending[l] = at
	s.arm(at)
	return true
}

// remove takes l out if its watchdog has not started, and reports whether
// it did.
func (s *starts) remove(l *Lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pending[l]; !ok {
		return false
	}
	delete(s.pending, l)
	return true
}

// arm makes the timer fire at at, unless it fires sooner already. s.mu is
// held.
func (s *starts) arm(at time.Time) {
	if !s.armed.IsZero() && !at.Before(s.armed) {
		return
	}
	s.armed = at
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(at), s.fire)
		return
	}
	s.timer.Reset(time.Until(at))
}

// fire starts the watchdogs that are due, with those due within a twelfth
// of their lease (early is harmless: a watchdog waits for its first
// renewal itself), and sets the timer for the next.
func (s *starts) fire() {
	s.mu.Lock()
	now := time.Now()
	var due []*Lease
	var next time.Time
	for l, at := range s.pending {
		if at.Sub(now) <= l.lease/12 {
			due = append(due, l)
			delete(s.pending, l)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	s.armed = time.Time{}
	if !next.IsZero() && !s.closed {
		s.arm(next)
	}
	s.mu.Unlock()
	for _, l := range due {
		go l.runWatchdog()
	}
}

// close stops the timer: Client.Close has stopped every watchdog. No
// lease is added after it.
func (s *starts) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
}
