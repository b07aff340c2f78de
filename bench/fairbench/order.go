package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A snapshot is the fair lock's queue and its fencing-token high-water mark,
// read in one MULTI: the same instant of the server. Every acquisition
// stores a new, larger token, so an acquisition whose lease has a larger
// token than the snapshot's came after it, and one with a token no larger
// came before. That places each snapshot exactly in the order of
// acquisitions, with no race between the sampler and the goroutines.
type snapshot struct {
	token int64    // 0: no acquisition yet
	queue []string // owner ids, head first
}

// sampler reads the queue of one fair lock every period, on a connection
// of its own, from the start of the measured window to its end.
type sampler struct {
	rdb        *redis.Client
	qkey, tkey string

	snaps    []snapshot // consecutive duplicates left out
	n        int64      // MULTI … EXEC transactions that were answered
	errs     int64      // transactions that failed (then the command count is off by up to 4 each)
	firstErr string
	lenSum   int64 // sum of the queue lengths seen, over n
	maxLen   int
}

// newSampler watches the fair lock name of a Client with the default key
// prefix ("lockcron"): its queue is lockcron:{name}:queue and its token
// lockcron:{name}:token.
func newSampler(rdb *redis.Client, name string) *sampler {
	base := "lockcron:{" + name + "}"
	return &sampler{rdb: rdb, qkey: base + ":queue", tkey: base + ":token"}
}

// run samples until stop is set. It keeps its own pace: one sample every
// period from the start, or at once when it falls behind.
func (s *sampler) run(period time.Duration, stop *atomic.Bool) {
	next := time.Now()
	for !stop.Load() {
		s.once()
		next = next.Add(period)
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		} else {
			next = time.Now()
		}
	}
}

func (s *sampler) once() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var lr *redis.StringSliceCmd
	var tok *redis.StringCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		lr = p.LRange(ctx, s.qkey, 0, -1)
		tok = p.Get(ctx, s.tkey)
		return nil
	})
	if err == nil || errors.Is(err, redis.Nil) {
		err = lr.Err()
	}
	var t int64
	if err == nil {
		switch v, gerr := tok.Result(); {
		case errors.Is(gerr, redis.Nil):
		case gerr != nil:
			err = gerr
		default:
			t, err = strconv.ParseInt(v, 10, 64)
		}
	}
	if err != nil {
		s.errs++
		if s.firstErr == "" {
			s.firstErr = err.Error()
		}
		return
	}
	q := lr.Val()
	s.n++
	s.lenSum += int64(len(q))
	s.maxLen = max(s.maxLen, len(q))
	if k := len(s.snaps); k > 0 && s.snaps[k-1].token == t && slices.Equal(s.snaps[k-1].queue, q) {
		return
	}
	s.snaps = append(s.snaps, snapshot{token: t, queue: q})
}

// orderResult is what the snapshots say about the order of acquisitions.
type orderResult struct {
	samples, sampleErrs int64
	firstSampleErr      string
	distinct            int     // snapshots kept (consecutive duplicates left out)
	meanLen             float64 // mean queue length over the samples
	maxLen              int

	// Pairs: Y ahead of X in some snapshot, both acquired later. Inverted
	// if X acquired before Y. Each pair counts once, however many
	// snapshots show it.
	pairs, inversions int64
	// Acquisitions checked against the last snapshot before them: those
	// after which a waiter of that snapshot still had to acquire. Out of
	// order if the acquirer is not the first of those waiters in the
	// snapshot's queue: either it was behind one of them (jumped) or it was
	// not queued at the snapshot at all, so it came later (barged).
	checked, outOfOrder, jumped, barged int64
	examples                            []string // the first few of either kind

	owners       int   // distinct owner ids seen queued
	neverAcq     int   // of them, never acquired (left the queue: timeout, error)
	dupInSnap    int64 // snapshots listing an owner twice
	acqSeen      int64 // acquisitions after the first snapshot whose owner a snapshot showed queued
	acqAfter     int64 // acquisitions after the first snapshot
	tokenDisagre int64 // acquisitions whose token is not larger than the one recorded before
}

// analyzeOrder checks recs (in recording order) against the snapshots.
func analyzeOrder(recs []acqRec, s *sampler) orderResult {
	o := orderResult{samples: s.n, sampleErrs: s.errs, firstSampleErr: s.firstErr, distinct: len(s.snaps), maxLen: s.maxLen}
	if s.n > 0 {
		o.meanLen = float64(s.lenSum) / float64(s.n)
	}
	// Recording order and token order must agree: both are the order of
	// acquisition (the holder records before it unlocks).
	for i := 1; i < len(recs); i++ {
		if recs[i].token <= recs[i-1].token {
			o.tokenDisagre++
		}
	}
	byToken := slices.Clone(recs)
	slices.SortFunc(byToken, func(a, b acqRec) int { return cmp.Compare(a.token, b.token) })
	idx := make(map[string]int, len(byToken)) // owner → index in byToken
	for i, r := range byToken {
		idx[r.owner] = i
	}
	example := func(format string, args ...any) {
		if len(o.examples) < 5 {
			o.examples = append(o.examples, fmt.Sprintf(format, args...))
		}
	}

	// Pairs within each snapshot.
	seenPair := map[uint64]bool{}
	seenOwner := map[string]bool{}
	ids := []int{}
	for _, sn := range s.snaps {
		ids = ids[:0]
		dup := map[string]bool{}
		for _, ow := range sn.queue {
			if dup[ow] {
				o.dupInSnap++
			}
			dup[ow] = true
			seenOwner[ow] = true
			i, ok := idx[ow]
			if !ok {
				i = -1
			}
			ids = append(ids, i)
		}
		for a := range ids {
			if ids[a] < 0 {
				continue
			}
			for b := a + 1; b < len(ids); b++ {
				if ids[b] < 0 || ids[b] == ids[a] {
					continue
				}
				key := uint64(ids[a])<<32 | uint64(ids[b])
				if seenPair[key] {
					continue
				}
				seenPair[key] = true
				o.pairs++
				if ids[b] < ids[a] { // X (behind) acquired before Y (ahead)
					o.inversions++
					y, x := byToken[ids[a]], byToken[ids[b]]
					example("inversion: %s (goroutine %d, token %d) was behind %s (goroutine %d, token %d) at snapshot token %d, and acquired first",
						x.owner, x.g, x.token, y.owner, y.g, y.token, sn.token)
				}
			}
		}
	}
	o.owners = len(seenOwner)
	for ow := range seenOwner {
		if _, ok := idx[ow]; !ok {
			o.neverAcq++
		}
	}

	// Each acquisition against the last snapshot before it.
	p := -1
	for zi, z := range byToken {
		for p+1 < len(s.snaps) && s.snaps[p+1].token < z.token {
			p++
		}
		if p < 0 {
			continue
		}
		o.acqAfter++
		if seenOwner[z.owner] {
			o.acqSeen++
		}
		sn := s.snaps[p]
		first, inSnap := -1, false
		for _, ow := range sn.queue {
			i, ok := idx[ow]
			if !ok || i < zi {
				continue // never acquired, or acquired before z
			}
			if first < 0 {
				first = i
			}
			if i == zi {
				inSnap = true
			}
		}
		if first < 0 {
			continue // no waiter of the snapshot was left: nothing to check
		}
		o.checked++
		if first == zi {
			continue
		}
		o.outOfOrder++
		w := byToken[first]
		if inSnap {
			o.jumped++
			example("jumped: %s (goroutine %d, token %d) acquired while %s (goroutine %d), ahead of it at snapshot token %d, still waited",
				z.owner, z.g, z.token, w.owner, w.g, sn.token)
		} else {
			o.barged++
			example("barged: %s (goroutine %d, token %d), not queued at snapshot token %d, acquired while %s (goroutine %d), queued then, still waited",
				z.owner, z.g, z.token, sn.token, w.owner, w.g)
		}
	}
	return o
}
