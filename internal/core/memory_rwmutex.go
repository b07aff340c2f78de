package core

import (
	"context"
	"time"
)

// memRW is a read-write lock (rwacquire.lua): its leases, and the marks of
// its waiting writers.
type memRW struct {
	writer string                 // the write lease's owner id; "" if none
	leases map[string]*memRWLease // the writer's and every reader's, by owner id
	marks  map[string]time.Time   // waiting writers' marks: when each lapses
	// marksEnd is when the marks' key expires in Redis: at the latest mark
	// when a mark was set (rwacquire.lua), so that a mark that lapsed is
	// kept, or gone with its key, as it is there (see rwLeave).
	marksEnd time.Time
}

type memRWLease struct {
	holds   int
	token   int64
	expires time.Time
}

// rwAt returns the read-write lock of k with the leases and marks whose
// time is over dropped, or nil if nothing is left of it; with create, a new
// one if there is none. s.mu is held.
func (s *MemoryStore) rwAt(k *keys, now time.Time, create bool) *memRW {
	rw := s.rw[k.lock]
	if rw != nil {
		for o, l := range rw.leases {
			if !now.Before(l.expires) {
				delete(rw.leases, o)
				if o == rw.writer {
					rw.writer = ""
				}
			}
		}
		for o, d := range rw.marks {
			if !now.Before(d) {
				delete(rw.marks, o)
			}
		}
		if len(rw.leases) == 0 && len(rw.marks) == 0 {
			delete(s.rw, k.lock)
			rw = nil
		}
	}
	if rw == nil && create {
		rw = &memRW{leases: make(map[string]*memRWLease), marks: make(map[string]time.Time)}
		s.rw[k.lock] = rw
	}
	return rw
}

// tidyRW drops rw when nothing is left of it. s.mu is held.
func (s *MemoryStore) tidyRW(k *keys, rw *memRW) {
	if len(rw.leases) == 0 && len(rw.marks) == 0 {
		delete(s.rw, k.lock)
	}
}

// holding tells whether owner holds a lease of the mode.
func (rw *memRW) holding(write bool, owner string) bool {
	if rw == nil {
		return false
	}
	if write {
		return rw.writer == owner
	}
	_, ok := rw.leases[owner]
	return ok && owner != rw.writer
}

// firstReader is the earliest end of a reader's lease, if there is a reader.
func (rw *memRW) firstReader() (time.Time, bool) {
	var first time.Time
	found := false
	for o, l := range rw.leases {
		if o != rw.writer && (!found || l.expires.Before(first)) {
			first, found = l.expires, true
		}
	}
	return first, found
}

// lastMark is when the last waiting writer's mark lapses, if there is one.
func (rw *memRW) lastMark() (time.Time, bool) {
	var last time.Time
	found := false
	for _, d := range rw.marks {
		if !found || d.After(last) {
			last, found = d, true
		}
	}
	return last, found
}

// nextToken is a new fencing token for k (newToken in lib.lua): the last
// token plus one, or, for a lock never taken, the clock in microseconds.
// s.mu is held.
func (s *MemoryStore) nextToken(k *keys, now time.Time) int64 {
	token := s.tokens[k.token] + 1
	if token == 1 {
		token = now.UnixMicro()
	}
	s.tokens[k.token] = token
	return token
}

func sleepMillis(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

func (b *memoryBackend) rwAcquire(ctx context.Context, k *keys, owner string, write bool, lease time.Duration, holds int, writer string, mark, maxSleep time.Duration) (acquireReply, error) {
	if err := ctx.Err(); err != nil {
		return acquireReply{}, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	rw := s.rwAt(k, now, false)
	held := rw.holding(write, owner)
	if holds != 0 {
		if !held {
			return acquireReply{status: acqGone}, nil
		}
		l := rw.leases[owner]
		switch l.holds {
		case holds:
			l.holds++
		case holds + 1: // as the script: a repeat of a call that was applied
		default:
			return acquireReply{status: acqMismatch, value: int64(l.holds)}, nil
		}
		return acquireReply{status: acqAcquired, value: l.token}, nil
	}
	if held {
		l := rw.leases[owner]
		l.expires = now.Add(lease) // a repeat: the lease starts again
		return acquireReply{status: acqAcquired, value: l.token}, nil
	}
	if rw != nil {
		var until time.Time
		if rw.writer != "" && (write || rw.writer != writer) {
			until = rw.leases[rw.writer].expires
		} else if write {
			until, _ = rw.firstReader()
		} else if last, ok := rw.lastMark(); ok && rw.writer == "" {
			until = last.Add(time.Millisecond)
		}
		if !until.IsZero() {
			sleep := until.Sub(now)
			if write {
				if mark > 0 {
					rw.marks[owner] = now.Add(mark)
					rw.marksEnd, _ = rw.lastMark()
				}
				sleep = min(sleep, maxSleep)
			}
			return acquireReply{status: acqHeld, value: sleepMillis(sleep)}, nil
		}
	}
	rw = s.rwAt(k, now, true)
	token := s.nextToken(k, now)
	rw.leases[owner] = &memRWLease{holds: 1, token: token, expires: now.Add(lease)}
	if write {
		rw.writer = owner
		delete(rw.marks, owner)
	}
	return acquireReply{status: acqAcquired, value: token}, nil
}

func (b *memoryBackend) rwRenew(ctx context.Context, k *keys, owner string, write bool, lease time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	rw := s.rwAt(k, now, false)
	if !rw.holding(write, owner) {
		return false, nil
	}
	rw.leases[owner].expires = now.Add(lease)
	return true, nil
}

func (b *memoryBackend) rwRelease(ctx context.Context, k *keys, owner string, write bool, holds, drop int) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s := b.s
	s.mu.Lock()
	now := time.Now()
	rw := s.rwAt(k, now, false)
	if !rw.holding(write, owner) {
		done := s.wasReleased(k, owner, now)
		s.mu.Unlock()
		if done {
			return relReleased, false, nil
		}
		return relNotHeld, false, nil
	}
	l := rw.leases[owner]
	if n, last := dropHolds(&l.holds, holds, drop); !last {
		s.mu.Unlock()
		return n, false, nil
	}
	delete(rw.leases, owner)
	s.markReleased(k, owner, now)
	if write {
		rw.writer = ""
	}
	// The end of the write lease lets readers in; the end of the last
	// lease, a writer.
	publish := write || len(rw.leases) == 0
	s.tidyRW(k, rw)
	var subs []*memoryBackend
	if publish {
		subs = s.subscribers(k, b)
	}
	s.mu.Unlock()
	for _, sub := range subs {
		sub.wake(k.channel)
	}
	return relReleased, publish, nil
}

func (b *memoryBackend) rwLeave(ctx context.Context, k *keys, owner string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s := b.s
	s.mu.Lock()
	now := time.Now()
	if rw := s.rw[k.lock]; rw == nil {
		s.mu.Unlock()
		return false, nil
	} else if _, ok := rw.marks[owner]; !ok || !now.Before(rw.marksEnd) {
		// No mark, or its key expired with the latest mark.
		s.mu.Unlock()
		return false, nil
	} else {
		delete(rw.marks, owner)
	}
	rw := s.rwAt(k, now, false)
	if rw != nil && (len(rw.marks) > 0 || rw.writer != "") {
		s.mu.Unlock()
		return false, nil
	}
	subs := s.subscribers(k, b)
	s.mu.Unlock()
	for _, sub := range subs {
		sub.wake(k.channel)
	}
	return true, nil
}

func (b *memoryBackend) rwForceUnlock(ctx context.Context, k *keys) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	rw := s.rwAt(k, time.Now(), false)
	if rw == nil {
		s.mu.Unlock()
		return 0, nil
	}
	held := len(rw.leases) > 0
	delete(s.rw, k.lock)
	s.unlockAndWake(k, nil)
	if held {
		return 1, nil
	}
	return 0, nil
}
