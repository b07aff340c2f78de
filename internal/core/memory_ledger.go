package core

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// memLedger is a ledger's hash (claim.lua).
type memLedger struct {
	done, seen, running, tries int64
	skipped                    int64 // the latest tick a skip entry was passed for (pass.lua)
	excluded                   int64 // the latest tick an excluded skip entry was passed for (pass.lua)
	triggers                   int64
	paused                     bool
	pause                      memPause // when paused (pause.lua's fields)
	failures                   int64    // failed finishes in a row
	owner, outcome, finished   string
	from                       string           // the owner before owner, when tries > 1
	since                      int64            // ms of the claim of running
	definition, defOwner       string           // recorded by the latest claim that had one, and its owner
	last                       map[string]int64 // at:<outcome>: ms of its last finish
	chain                      []ChainRun       // the chain record (finish.lua's KEYS[7]), by tick
	chainSince                 int64            // chainfloor.lua's field chainsince, ms
	expires                    time.Time
	replace                    int64      // the latest tick that asked an earlier run to end (claim.lua's ARGV[12])
	trig                       memTrigger // trigger.lua's fields
}

// askReplace records, as claim.lua's wait, that tick asks the run of the
// earlier unfinished tick running to end, when the claim replaces.
func (g *memLedger) askReplace(ca claimArgs, running, tick int64) {
	if ca.replace && running != 0 && running < tick && tick > g.replace {
		g.replace = tick
	}
}

// memPause is a ledger's pause: pause.lua's fields.
type memPause struct {
	by, note  string
	at, until int64  // ms; until 0: until a resume
	finish    string // the owner of the finish that paused it
}

// pausedAt reports whether g is paused at now (ms), its pause not over.
func (g *memLedger) pausedAt(now int64) bool {
	return g.paused && (g.pause.until == 0 || g.pause.until > now)
}

// ledgerAt returns the live ledger at key; with create, a new one if
// there is none, and its lifetime renewed. s.mu is held.
func (s *MemoryStore) ledgerAt(key string, now time.Time, create bool) *memLedger {
	g := s.ledger[key]
	if g != nil && !now.Before(g.expires) {
		delete(s.ledger, key)
		g = nil
	}
	if g == nil && create {
		g = &memLedger{}
		s.ledger[key] = g
	}
	if g != nil && create {
		g.expires = now.Add(LedgerTTL)
	}
	return g
}

func (b *memoryBackend) claim(ctx context.Context, k *keys, ledger, owner string, lease time.Duration, tick int64, ca claimArgs) (claimReply, error) {
	if err := ctx.Err(); err != nil {
		return claimReply{}, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	g := s.ledgerAt(ledger, now, true)
	running := g.running
	if running <= g.done {
		running = 0
	}
	seen := g.seen
	g.seen = max(g.seen, tick)
	var q *memQueue
	if ca.fair {
		q = s.queueAt(k, now, false)
	}
	leave := func() {
		if q != nil && q.remove(owner) && len(q.order) == 0 {
			delete(s.queues, k.queue)
		}
	}
	switch {
	case g.pausedAt(now.UnixMilli()):
		leave()
		return claimReply{status: claimPaused, value: g.pause.until}, nil
	case g.done >= tick:
		leave()
		return claimReply{status: claimDone, value: g.done}, nil
	case running > tick:
		leave()
		return claimReply{status: claimDone, value: running}, nil
	}
	waits := ca.fair && (ca.wait == 1 && running == tick || ca.wait == 2)
	if l := s.live(k.lock, now); l != nil {
		if l.owner == owner {
			// As the script: a repeat of the call that claimed starts
			// the lease again, and answers before it moves seen.
			l.expires = now.Add(lease)
			g.seen = seen
			return claimReply{status: claimAcquired, value: l.token, try: g.tries, extra: g.running, from: g.from, def: g.definition, defOwner: g.defOwner, at: now.UnixMilli(), req: g.trig.reqs[g.running]}, nil
		}
		pttl := max(l.expires.Sub(now).Milliseconds(), 1)
		bf := strings.HasSuffix(l.owner, BackfillOwnerTag) && !(ca.fair && ca.wait == 0)
		if waits || bf && ca.fair {
			pttl, _ = s.keepPlace(k, owner, ca.place, now, pttl)
		}
		g.askReplace(ca, running, tick) // as the script: once its place is kept
		return claimReply{status: claimHeld, value: pttl, extra: running, byBackfill: bf}, nil
	}
	if head := q.head(); waits && head != "" && head != owner {
		// Free, but others came first.
		sleep, _ := s.keepPlace(k, owner, ca.place, now, 0)
		g.askReplace(ca, running, tick)
		return claimReply{status: claimHeld, value: sleep, extra: running}, nil
	}
	if tick == g.excluded && !(running != 0 && running < tick) {
		// Recorded excluded: as the script, neither runs it.
		leave()
		return claimReply{status: claimDone, value: tick}, nil
	}
	leave()
	r := claimReply{status: claimAcquired, value: s.take(k, owner, lease, now), extra: tick, at: now.UnixMilli()}
	if running != 0 && running < tick {
		r.extra = running // never overtaken: as the script
		g.askReplace(ca, running, tick)
	} else if running == 0 && g.done+1 < tick && requestOrdered(g.trig.reqs[g.done+1]) {
		r.extra = g.done + 1 // an ordered request is never passed over
	}
	r.req = g.trig.reqs[r.extra]
	g.from = ""
	if running == r.extra {
		g.tries++
		g.from = g.owner
	} else {
		g.tries = 1
	}
	g.running, g.owner, r.try, r.from = r.extra, owner, g.tries, g.from
	g.since = now.UnixMilli()
	r.def, r.defOwner = g.definition, g.defOwner
	if ca.def != "" {
		g.definition, g.defOwner = ca.def, owner
	}
	return r, nil
}

func (b *memoryBackend) finish(ctx context.Context, k *keys, lg ledgerRef, owner string, holds int, tick int64, rec finishArgs) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	now := time.Now()
	// record writes the finish to the ledger and its history, as the
	// script's record.
	paused := false
	record := func(g *memLedger) {
		moved := rec.done && g.done < tick
		if moved {
			g.done = tick
		}
		switch rec.streak {
		case streakFailed:
			g.failures++
			if rec.pauseAfter > 0 && g.failures >= int64(rec.pauseAfter) && !g.pausedAt(now.UnixMilli()) {
				paused = true
				g.paused = true
				g.pause = memPause{by: rec.pauseBy, note: rec.pauseNote, at: now.UnixMilli(), finish: owner}
			}
		case streakReset:
			g.failures = 0
		}
		g.seen = max(g.seen, rec.seen)
		g.outcome, g.tries, g.finished = rec.outcome, int64(rec.tries), owner
		if g.last == nil {
			g.last = make(map[string]int64)
		}
		g.last[rec.outcome] = time.Now().UnixMilli()
		s.appendHistory(lg, rec.entry, now)
		if rec.chain && moved {
			g.addChain(ChainRun{Tick: tick, Outcome: rec.outcome, RunTick: rec.entry["tick"], At: time.UnixMilli(now.UnixMilli()), Params: chainParams(rec.entry["params"])})
		}
	}
	l := s.live(k.lock, now)
	switch {
	case l == nil || l.owner != owner:
		g := s.ledgerAt(lg.key, now, false)
		if g != nil && g.finished == owner {
			s.mu.Unlock()
			if g.paused && g.pause.finish == owner {
				return finishPaused, nil
			}
			return relReleased, nil // as the script: a repeat
		}
		if l == nil && g != nil && rec.done && g.owner == owner && g.running == tick && g.done < tick {
			// As the script: the lock expired under a run that ended, and
			// no one has claimed the tick since: record it done, late,
			// and tell the listeners.
			record(s.ledgerAt(lg.key, now, true))
			subs := s.subscribers(k, b)
			s.mu.Unlock()
			for _, sub := range subs {
				sub.heard(k.channel, TickEvent{Tick: tick, Done: true}, lg.id)
				sub.wake(k.channel)
			}
			if paused {
				return finishPaused, nil
			}
			return relReleased, nil
		}
		s.mu.Unlock()
		return relNotHeld, nil
	case l.holds != holds:
		s.mu.Unlock()
		return relMismatch, nil
	}
	record(s.ledgerAt(lg.key, now, true))
	delete(s.locks, k.lock)
	subs := s.subscribers(k, b)
	head := ""
	if lg.fair {
		head = s.queueAt(k, now, false).head()
	}
	s.mu.Unlock()
	for _, sub := range subs {
		sub.heard(k.channel, TickEvent{Tick: tick, Done: rec.done}, lg.id) // before the wake-up, as on Redis
		if lg.fair {
			if head != "" {
				sub.wakeFair(head)
			}
		} else {
			sub.wake(k.channel)
		}
	}
	if paused {
		return finishPaused, nil
	}
	return relReleased, nil
}

func (b *memoryBackend) ledgerPass(ctx context.Context, lg ledgerRef, upTo int64, settled time.Duration, entry map[string]string) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if upTo != 0 { // 0: append alone
		_, skip := entry[hSkip]
		if g := s.ledgerAt(lg.key, now, false); g != nil && (!skip && g.seen >= upTo || skip && (g.skipped >= upTo || g.done == upTo || g.running == upTo && g.running > g.done)) {
			return 0, nil
		}
		if now.UnixMilli()-upTo < settled.Milliseconds() {
			return 0, nil // the store's clock not settled past upTo
		}
		g := s.ledgerAt(lg.key, now, true)
		g.seen = max(g.seen, upTo)
		if skip {
			g.skipped = upTo
			if entry[hOutcome] == "excluded" {
				g.excluded = upTo
			}
		}
	}
	s.appendHistory(lg, entry, now)
	return 1, nil
}

func (b *memoryBackend) history(ctx context.Context, lg ledgerRef, limit int, before string) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	h := s.hists[lg.history]
	if h == nil || !now.Before(h.expires) {
		delete(s.hists, lg.history)
		return nil, nil
	}
	// As the Redis backend reads: of the latest lg.keep entries, those not
	// older than lg.maxAge (another ledger sharing the history may keep
	// more).
	oldest := now.UnixMilli() - lg.maxAge.Milliseconds()
	var out []Entry
	for i := len(h.entries) - 1; i >= 0 && i >= len(h.entries)-lg.keep && len(out) < limit; i-- {
		e := h.entries[i]
		if e.id.ms < oldest {
			break
		}
		if before != "" && !idBefore(e.id, before) {
			continue
		}
		out = append(out, Entry{ID: e.id.String(), Time: time.UnixMilli(e.id.ms), Fields: maps.Clone(e.fields)})
	}
	return out, nil
}

// memHistory is a ledger's history stream (lib.lua's appendHistory).
type memHistory struct {
	entries []memEntry // oldest first
	last    streamID
	expires time.Time
}

type memEntry struct {
	id     streamID
	fields map[string]string
}

// streamID is a Redis Stream entry id.
type streamID struct{ ms, seq int64 }

func (id streamID) String() string { return fmt.Sprintf("%d-%d", id.ms, id.seq) }

// idBefore reports whether id comes before the entry id s (well formed).
func idBefore(id streamID, s string) bool {
	var b streamID
	if _, err := fmt.Sscanf(s, "%d-%d", &b.ms, &b.seq); err != nil {
		return false
	}
	return id.ms < b.ms || id.ms == b.ms && id.seq < b.seq
}

// Fields of a history entry that the store reads: an entry with skip is
// coalesced with the newest entry of the same skip and outcome, which
// gives it count and first (from the old first, or tick).
const (
	hSkip    = "skip"
	hOutcome = "outcome"
	hCount   = "count"
	hFirst   = "first"
	hTick    = "tick"
)

// mergeWithin is how many of a history's latest entries a skip entry may
// be coalesced with (lib.lua's mergeWithin).
const mergeWithin = 16

// coalesce returns the entry to append to h for fields: fields as they
// are, or, when fields has skip and one of h's latest mergeWithin entries
// (no older than lg.maxAge) has the same skip and outcome, with only skips
// of the same outcome and another cause after it, fields with that entry's
// count + 1 and first, that entry being dropped from h (lib.lua's
// appendHistory). s.mu is held.
func coalesce(h *memHistory, lg ledgerRef, fields map[string]string, now time.Time) map[string]string {
	skip, ok := fields[hSkip]
	if !ok {
		return fields
	}
	at := -1
	floor := now.UnixMilli() - lg.maxAge.Milliseconds()
	for i, n := len(h.entries)-1, 0; i >= 0 && n < mergeWithin && h.entries[i].id.ms >= floor; i, n = i-1, n+1 {
		f := h.entries[i].fields
		if f[hSkip] == skip && f[hOutcome] == fields[hOutcome] {
			at = i
			break
		}
		if _, ok := f[hSkip]; !ok || f[hOutcome] != fields[hOutcome] {
			break
		}
	}
	if at < 0 {
		return fields
	}
	last := h.entries[at]
	count, err := strconv.ParseInt(last.fields[hCount], 10, 64)
	if err != nil {
		count = 1
	}
	out := maps.Clone(fields)
	out[hCount] = strconv.FormatInt(count+1, 10)
	delete(out, hFirst)
	if first, ok := last.fields[hFirst]; ok {
		out[hFirst] = first
	} else if tick, ok := last.fields[hTick]; ok {
		out[hFirst] = tick
	}
	h.entries = slices.Delete(h.entries, at, at+1)
	return out
}

// appendHistory appends fields, if any, to lg's history, trimmed exactly
// to lg.keep and lg.maxAge (the scripts trim approximately; both backends'
// readers show the latest keep entries not older than maxAge, so they
// agree). s.mu is held.
func (s *MemoryStore) appendHistory(lg ledgerRef, fields map[string]string, now time.Time) {
	if len(fields) == 0 {
		return
	}
	key := lg.history
	h := s.hists[key]
	if h == nil || !now.Before(h.expires) {
		h = &memHistory{}
		s.hists[key] = h
	}
	fields = coalesce(h, lg, fields, now)
	id := streamID{ms: now.UnixMilli()}
	if id.ms <= h.last.ms {
		id = streamID{ms: h.last.ms, seq: h.last.seq + 1}
	}
	h.last = id
	h.entries = append(h.entries, memEntry{id: id, fields: maps.Clone(fields)})
	if n := len(h.entries) - lg.keep; n > 0 {
		h.entries = slices.Delete(h.entries, 0, n)
	}
	oldest := id.ms - lg.maxAge.Milliseconds()
	i := 0
	for i < len(h.entries) && h.entries[i].id.ms < oldest {
		i++
	}
	h.entries = slices.Delete(h.entries, 0, i)
	h.expires = now.Add(lg.maxAge)
}

func (b *memoryBackend) ledger(ctx context.Context, k *keys, key string) (map[string]string, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	held := s.live(k.lock, now) != nil
	g := s.ledgerAt(key, now, false)
	if g == nil {
		return map[string]string{}, held, nil
	}
	n := func(v int64) string { return strconv.FormatInt(v, 10) }
	f := map[string]string{
		"done": n(g.done), "seen": n(g.seen), "running": n(g.running), "tries": n(g.tries),
		"owner": g.owner, "outcome": g.outcome, "finished": g.finished,
		"paused": map[bool]string{true: "1", false: ""}[g.paused], "triggers": n(g.triggers),
	}
	if g.failures != 0 {
		f["failures"] = n(g.failures)
	}
	if g.paused {
		f["pausedby"], f["pausenote"], f["pausedat"] = g.pause.by, g.pause.note, n(g.pause.at)
		if g.pause.until != 0 {
			f["pauseduntil"] = n(g.pause.until)
		}
		if g.pause.finish != "" {
			f["pausefinish"] = g.pause.finish
		}
	}
	pauseOver(f, now.UnixMilli())
	if g.since != 0 {
		f["since"] = n(g.since)
	}
	if g.replace != 0 {
		f["replace"] = n(g.replace)
	}
	for outcome, ms := range g.last {
		f["at:"+outcome] = n(ms)
	}
	return f, held, nil
}

func (b *memoryBackend) ledgerPause(ctx context.Context, key string, paused bool, p pauseArgs) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	now := time.Now()
	if paused && p.until != 0 && p.until <= now.UnixMilli() {
		return false, nil // as the script: nothing written
	}
	g := b.s.ledgerAt(key, now, true)
	if !paused {
		g.paused, g.pause, g.failures = false, memPause{}, 0
		return true, nil
	}
	g.paused, g.pause = true, memPause{by: p.by, note: p.note, at: now.UnixMilli(), until: p.until}
	return true, nil
}
