package core

import (
	"context"
	"time"
)

// memSem is a semaphore's permits (semacquire.lua), by owner id.
type memSem map[string]*memPermit

// memPermit is one permit: its holds, its fencing token and its deadline.
type memPermit struct {
	holds   int
	token   int64
	expires time.Time // on the monotonic clock
}

// semAt returns the permits of k with the expired ones dropped; with
// create, a new set if there is none. s.mu is held.
func (s *MemoryStore) semAt(k *keys, now time.Time, create bool) memSem {
	m := s.sems[k.lock]
	for owner, p := range m {
		if !now.Before(p.expires) {
			delete(m, owner)
		}
	}
	if len(m) == 0 {
		delete(s.sems, k.lock)
		m = nil
	}
	if m == nil && create {
		m = make(memSem)
		s.sems[k.lock] = m
	}
	return m
}

// semSleepMillis is d in whole milliseconds, rounded up, at least 1.
func semSleepMillis(d time.Duration) int64 {
	return max(int64((d+time.Millisecond-1)/time.Millisecond), 1)
}

func (b *memoryBackend) semAcquire(ctx context.Context, k *keys, owner string, lease time.Duration, holds, permits int) (acquireReply, error) {
	if err := ctx.Err(); err != nil {
		return acquireReply{}, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	m := s.semAt(k, now, false)
	p := m[owner]
	if holds != 0 {
		if p == nil {
			return acquireReply{status: acqGone}, nil
		}
		switch p.holds {
		case holds:
			p.holds++
		case holds + 1: // as the script: a repeat of a call that was applied
		default:
			return acquireReply{status: acqMismatch, value: int64(p.holds)}, nil
		}
		return acquireReply{status: acqAcquired, value: p.token}, nil
	}
	if p != nil { // as the script: a repeat of a call that acquired
		p.expires = now.Add(lease) // the lease starts again
		return acquireReply{status: acqAcquired, value: p.token}, nil
	}
	if len(m) >= permits {
		var first time.Time
		for _, p := range m {
			if first.IsZero() || p.expires.Before(first) {
				first = p.expires
			}
		}
		return acquireReply{status: acqHeld, value: semSleepMillis(first.Sub(now))}, nil
	}
	token := s.nextToken(k, now)
	s.semAt(k, now, true)[owner] = &memPermit{holds: 1, token: token, expires: now.Add(lease)}
	return acquireReply{status: acqAcquired, value: token}, nil
}

func (b *memoryBackend) semRenew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	p := s.semAt(k, now, false)[owner]
	if p == nil {
		return false, nil
	}
	p.expires = now.Add(lease)
	return true, nil
}

func (b *memoryBackend) semRelease(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	now := time.Now()
	m := s.semAt(k, now, false)
	p := m[owner]
	if p == nil {
		done := s.wasReleased(k, owner, now)
		s.mu.Unlock()
		if done {
			return relReleased, nil
		}
		return relNotHeld, nil
	}
	if n, last := dropHolds(&p.holds, holds, drop); !last {
		s.mu.Unlock()
		return n, nil
	}
	delete(m, owner)
	s.markReleased(k, owner, now)
	if len(m) == 0 {
		delete(s.sems, k.lock)
	}
	s.unlockAndWake(k, b)
	return relReleased, nil
}

func (b *memoryBackend) semForceUnlock(ctx context.Context, k *keys) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	if s.semAt(k, time.Now(), false) == nil {
		s.mu.Unlock()
		return 0, nil
	}
	delete(s.sems, k.lock)
	s.unlockAndWake(k, nil)
	return 1, nil
}
