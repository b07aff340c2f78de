package core

import (
	"context"
	"iter"
	"maps"
	"time"
)

// locks walks the store's maps under s.mu. The expiry helpers (live,
// queueAt, rwAt, semAt) drop what has expired as they go, as the scripts
// do, so only live leases, places and marks are listed.
func (b *memoryBackend) locks(ctx context.Context, prefix string) ([]LockInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()

	// The names first: the helpers delete from the maps.
	names := func(keys iter.Seq[string], suffix string) []string {
		var out []string
		for key := range keys {
			if name, sfx, ok := splitLockKey(prefix, key); ok && sfx == suffix {
				out = append(out, name)
			}
		}
		return out
	}
	mutexes := make(map[string]bool)
	for _, n := range names(maps.Keys(s.locks), "") {
		mutexes[n] = true
	}
	for _, n := range names(maps.Keys(s.queues), ":queue") {
		mutexes[n] = true
	}
	rws := names(maps.Keys(s.rw), ":rw")
	sems := names(maps.Keys(s.sems), ":sem")

	var out []LockInfo
	for name := range mutexes {
		k := newKeys(prefix, name)
		info := LockInfo{Name: name, Kind: kindMutex, Token: s.tokens[k.token]}
		if l := s.live(k.lock, now); l != nil {
			info.TTL = l.expires.Sub(now)
			info.Holders = []Holder{{Owner: l.owner, Holds: l.holds, TTL: info.TTL}}
		}
		if q := s.queueAt(k, now, false); q != nil {
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
		rw := s.rwAt(k, now, false)
		if rw == nil {
			continue
		}
		info := LockInfo{Name: name, Kind: kindRWMutex, Token: s.tokens[k.token], Waiters: len(rw.marks)}
		for owner, l := range rw.leases {
			mode := modeRead
			if owner == rw.writer {
				mode = modeWrite
			}
			ttl := l.expires.Sub(now)
			info.TTL = max(info.TTL, ttl) // the hash lives as long as the longest lease
			info.Holders = append(info.Holders, Holder{Owner: owner, Holds: l.holds, Mode: mode, Token: l.token, TTL: ttl})
		}
		out = append(out, info)
	}
	for _, name := range sems {
		k := semKeys(prefix, name)
		m := s.semAt(k, now, false)
		if len(m) == 0 {
			continue
		}
		info := LockInfo{Name: name, Kind: kindSemaphore, Token: s.tokens[k.token]}
		for owner, p := range m {
			ttl := p.expires.Sub(now)
			info.TTL = max(info.TTL, ttl)
			info.Holders = append(info.Holders, Holder{Owner: owner, Holds: p.holds, Mode: modePermit, Token: p.token, TTL: ttl})
		}
		out = append(out, info)
	}
	return out, nil
}
