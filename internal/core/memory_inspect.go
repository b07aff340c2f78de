package core

import (
	"context"
	"iter"
	"maps"
	"time"
)

// locks walks the store's maps under s.mu. It changes nothing, as
// inspect.lua: what has expired is skipped, not dropped (the scripts drop
// it), so that a listing never changes what a later call answers.
func (b *memoryBackend) locks(ctx context.Context, prefix string) ([]LockInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()

	names := func(keys iter.Seq[string], suffix string) []inspectName {
		var out []inspectName
		for key := range keys {
			if n, sfx, ok := lockKeyName(prefix, key); ok && sfx == suffix {
				out = append(out, n)
			}
		}
		return out
	}
	plain := func(ns []inspectName) []string {
		var out []string
		for _, n := range ns {
			if n.own == "" {
				out = append(out, n.lock)
			}
		}
		return out
	}
	mutexes := make(map[inspectName]bool)
	for _, n := range names(maps.Keys(s.locks), "") {
		mutexes[n] = true
	}
	for _, n := range names(maps.Keys(s.queues), ":queue") {
		mutexes[n] = true
	}
	rws := plain(names(maps.Keys(s.rw), ":rw"))
	sems := plain(names(maps.Keys(s.sems), ":sem"))

	var out []LockInfo
	for n := range mutexes {
		k := n.mutexKeys(prefix)
		info := LockInfo{Name: n.String(), Kind: kindMutex, Token: s.tokens[k.token]}
		if l := s.locks[k.lock]; l != nil && now.Before(l.expires) {
			info.TTL = l.expires.Sub(now)
			info.Holders = []Holder{{Owner: l.owner, Holds: l.holds, TTL: info.TTL}}
		}
		if q := s.queues[k.queue]; q != nil {
			for _, w := range q.order {
				if now.Before(q.deadline[w]) {
					info.Waiters++
				}
			}
		}
		if len(info.Holders) > 0 || info.Waiters > 0 {
			out = append(out, info)
		}
	}
	for _, name := range rws {
		k := rwKeys(prefix, name)
		rw := s.rw[k.lock]
		info := LockInfo{Name: name, Kind: kindRWMutex, Token: s.tokens[k.token]}
		for _, d := range rw.marks {
			if now.Before(d) {
				info.Waiters++
			}
		}
		for owner, l := range rw.leases {
			if !now.Before(l.expires) {
				continue
			}
			mode := modeRead
			if owner == rw.writer {
				mode = modeWrite
			}
			ttl := l.expires.Sub(now)
			info.TTL = max(info.TTL, ttl) // the hash lives as long as the longest lease
			info.Holders = append(info.Holders, Holder{Owner: owner, Holds: l.holds, Mode: mode, Token: l.token, TTL: ttl})
		}
		if len(info.Holders) > 0 || info.Waiters > 0 {
			out = append(out, info)
		}
	}
	for _, name := range sems {
		k := semKeys(prefix, name)
		info := LockInfo{Name: name, Kind: kindSemaphore, Token: s.tokens[k.token]}
		for owner, p := range s.sems[k.lock] {
			if !now.Before(p.expires) {
				continue
			}
			ttl := p.expires.Sub(now)
			info.TTL = max(info.TTL, ttl)
			info.Holders = append(info.Holders, Holder{Owner: owner, Holds: p.holds, Mode: modePermit, Token: p.token, TTL: ttl})
		}
		if len(info.Holders) > 0 {
			out = append(out, info)
		}
	}
	return out, nil
}
