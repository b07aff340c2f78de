package core

import (
	"context"
	"time"
)

func (b *memoryBackend) publish(ctx context.Context, channel, payload string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	fns := make([]func(string), 0, len(s.events[channel]))
	clients := make(map[*memoryBackend]bool)
	for h := range s.events[channel] {
		fns = append(fns, h.fn)
		clients[h.be] = true
	}
	s.mu.Unlock()
	for _, fn := range fns {
		fn(payload)
	}
	return int64(len(clients)), nil
}

// dropHandlers ends the Subscribes of b's Client (at its Close). s.mu is
// not held.
func (b *memoryBackend) dropHandlers() {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch, hs := range s.events {
		for h := range hs {
			if h.be == b {
				delete(hs, h)
			}
		}
		if len(hs) == 0 {
			delete(s.events, ch)
		}
	}
}

func (b *memoryBackend) listen(channel string, fn func(string)) func() {
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := s.events[channel]
	if hs == nil {
		hs = make(map[*handler]struct{})
		s.events[channel] = hs
	}
	h := &handler{fn: fn, be: b}
	hs[h] = struct{}{}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(hs, h)
		if len(hs) == 0 && s.events[channel] != nil && len(s.events[channel]) == 0 {
			delete(s.events, channel)
		}
	}
}

func (b *memoryBackend) listening() bool { return true }

func (b *memoryBackend) ping(ctx context.Context) error { return ctx.Err() }

func (b *memoryBackend) reachable(ctx context.Context) error { return ctx.Err() }

func (b *memoryBackend) members(ctx context.Context, key, member string, ttl time.Duration) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	g := s.groups[key]
	if g == nil {
		g = make(map[string]time.Time)
		s.groups[key] = g
	}
	if ttl > 0 {
		g[member] = now.Add(ttl)
	} else {
		delete(g, member)
	}
	out := make([]string, 0, len(g))
	for m, until := range g {
		if !now.Before(until) {
			delete(g, m)
			continue
		}
		out = append(out, m)
	}
	if len(g) == 0 {
		delete(s.groups, key)
	}
	return out, nil
}

// memReplica is a replica's report, as replicareport.lua keeps it.
type memReplica struct {
	seen, until, first, drop time.Time // to the millisecond, as Redis TIME in the script
	nonce, report            string
}

// dropReplicas drops the reports of rs due at now. s.mu is held.
func dropReplicas(rs map[string]memReplica, now time.Time) {
	for id, r := range rs {
		if !now.Before(r.drop) {
			delete(rs, id)
		}
	}
}

func (b *memoryBackend) reportReplica(ctx context.Context, key, _, id, nonce, report string, ttl, keep time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.UnixMilli(time.Now().UnixMilli())
	rs := s.reps[key]
	if rs == nil {
		rs = make(map[string]memReplica)
		s.reps[key] = rs
	}
	dropReplicas(rs, now)
	first := now
	if old, ok := rs[id]; ok && old.nonce == nonce {
		if old.until.Equal(old.seen) && ttl > 0 {
			return nil
		}
		first = old.first
	}
	until := now.Add(ttl.Truncate(time.Millisecond))
	rs[id] = memReplica{seen: now, until: until, first: first, drop: until.Add(keep.Truncate(time.Millisecond)), nonce: nonce, report: report}
	return nil
}

func (b *memoryBackend) replicas(ctx context.Context, key, _ string) ([]ReplicaReport, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.UnixMilli(time.Now().UnixMilli())
	rs := s.reps[key]
	dropReplicas(rs, now)
	out := make([]ReplicaReport, 0, len(rs))
	for id, r := range rs {
		out = append(out, replicaReport(id, r.report, r.seen, r.until, r.first, now))
	}
	if rs != nil && len(rs) == 0 {
		delete(s.reps, key)
	}
	return out, nil
}
