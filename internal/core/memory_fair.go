package core

import (
	"context"
	"slices"
	"time"
)

// memQueue is a fair lock's queue (fairacquire.lua): owner ids in order,
// and their deadlines.
type memQueue struct {
	order    []string
	deadline map[string]time.Time
}

// queueAt returns the fair queue of k with its expired head places
// dropped; with create, a new one if there is none. s.mu is held.
func (s *MemoryStore) queueAt(k *keys, now time.Time, create bool) *memQueue {
	q := s.queues[k.queue]
	if q == nil {
		if !create {
			return nil
		}
		q = &memQueue{deadline: make(map[string]time.Time)}
		s.queues[k.queue] = q
	}
	for len(q.order) > 0 && !now.Before(q.deadline[q.order[0]]) {
		delete(q.deadline, q.order[0])
		q.order = q.order[1:]
	}
	if len(q.order) == 0 && !create {
		delete(s.queues, k.queue)
		return nil
	}
	return q
}

func (q *memQueue) head() string {
	if q == nil || len(q.order) == 0 {
		return ""
	}
	return q.order[0]
}

func (q *memQueue) remove(owner string) bool {
	if _, ok := q.deadline[owner]; !ok {
		return false
	}
	delete(q.deadline, owner)
	q.order = slices.DeleteFunc(q.order, func(x string) bool { return x == owner })
	return true
}

func (b *memoryBackend) fairAcquire(ctx context.Context, k *keys, owner string, lease, place time.Duration, enqueue bool) (fairReply, error) {
	if err := ctx.Err(); err != nil {
		return fairReply{}, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	q := s.queueAt(k, now, false)
	head := q.head()
	l := s.live(k.lock, now)
	if l == nil && (head == "" || head == owner) {
		token := s.take(k, owner, lease, now)
		if q != nil {
			q.remove(owner)
			if len(q.order) == 0 {
				delete(s.queues, k.queue)
			}
		}
		return fairReply{status: acqAcquired, value: token}, nil
	}
	if l != nil && l.owner == owner {
		l.expires = now.Add(lease) // a repeat: the lease starts again
		return fairReply{status: acqAcquired, value: l.token}, nil
	}
	pttl := int64(0)
	if l != nil {
		pttl = max(l.expires.Sub(now).Milliseconds(), 1)
	}
	if !enqueue {
		return fairReply{status: acqHeld, value: pttl, pos: -1}, nil
	}
	sleep, pos := s.keepPlace(k, owner, place, now, pttl)
	return fairReply{status: acqHeld, value: sleep, pos: pos}, nil
}

// keepPlace takes or keeps owner's place in k's queue for place, and
// returns how long it may sleep (ms) and its position (0, 1, or 2 for
// further back), as fairacquire.lua. pttl is the holder's TTL in ms, 0 if
// the lock is free. s.mu is held.
func (s *MemoryStore) keepPlace(k *keys, owner string, place time.Duration, now time.Time, pttl int64) (int64, int64) {
	q := s.queueAt(k, now, true)
	if _, ok := q.deadline[owner]; !ok {
		q.order = append(q.order, owner)
	}
	q.deadline[owner] = now.Add(place)
	pos := min(int64(slices.Index(q.order, owner)), 2)
	sleep := max(place/3, time.Millisecond)
	switch {
	case pos == 0 && pttl > 0:
		sleep = min(sleep, time.Duration(pttl)*time.Millisecond)
	case pos == 1:
		sleep = min(sleep, q.deadline[q.order[0]].Sub(now)+time.Millisecond)
	}
	return max(sleep.Milliseconds(), 1), pos
}

func (b *memoryBackend) fairRelease(ctx context.Context, k *keys, owner string, holds, drop int) (int64, string, error) {
	if err := ctx.Err(); err != nil {
		return 0, "", err
	}
	s := b.s
	s.mu.Lock()
	now := time.Now()
	l := s.live(k.lock, now)
	if l == nil || l.owner != owner {
		done := s.wasReleased(k, owner, now)
		s.mu.Unlock()
		if done {
			return relReleased, "", nil
		}
		return relNotHeld, "", nil
	}
	if n, last := dropHolds(&l.holds, holds, drop); !last {
		s.mu.Unlock()
		return n, "", nil
	}
	delete(s.locks, k.lock)
	s.markReleased(k, owner, now)
	head := s.queueAt(k, time.Now(), false).head()
	subs := s.subscribers(k, b)
	s.mu.Unlock()
	if head != "" {
		for _, sub := range subs {
			sub.wakeFair(head)
		}
	}
	return relReleased, head, nil
}

func (b *memoryBackend) fairLeave(ctx context.Context, k *keys, owner string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s := b.s
	s.mu.Lock()
	now := time.Now()
	q := s.queues[k.queue]
	if q == nil || !q.remove(owner) || s.live(k.lock, now) != nil {
		s.mu.Unlock()
		return "", nil
	}
	head := s.queueAt(k, now, false).head()
	subs := s.subscribers(k, b)
	s.mu.Unlock()
	if head != "" {
		for _, sub := range subs {
			sub.wakeFair(head)
		}
	}
	return head, nil
}
