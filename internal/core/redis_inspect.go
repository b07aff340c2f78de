package core

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// inspectBatch is how many locks go in one pipeline.
const inspectBatch = 256

// inspectScanCount is the COUNT hint of each SCAN.
const inspectScanCount = 1000

// inspect.lua dumps the keys of one lock name (one hash tag, so one slot).
//
//go:embed scripts/inspect.lua
var inspectSrc string

var inspectScript = redis.NewScript(inspectSrc)

func inspectKeys(prefix string, n inspectName) []string {
	if n.own != "" {
		// A lock of its own is a Mutex alone: the other kinds' keys are
		// none (keys beside its own, in its slot, that nothing writes).
		m := n.mutexKeys(prefix)
		return []string{
			ikLock: m.lock, ikToken: m.token, ikQueue: m.queue, ikTimeout: m.timeout,
			ikRW: m.lock + ":rw", ikReaders: m.lock + ":rw:readers", ikWriters: m.lock + ":rw:writers",
			ikSem: m.lock + ":sem", ikSemHolds: m.lock + ":sem:holds", ikSemTokens: m.lock + ":sem:tokens",
		}
	}
	name := n.lock
	m, rw, sem := newKeys(prefix, name), rwKeys(prefix, name), semKeys(prefix, name)
	return []string{
		ikLock: m.lock, ikToken: m.token, ikQueue: m.queue, ikTimeout: m.timeout,
		ikRW: rw.lock, ikReaders: rw.readers, ikWriters: rw.writerWaiting,
		ikSem: sem.lock, ikSemHolds: sem.holds, ikSemTokens: semTokens(sem),
	}
}

// matchEscape escapes the characters that SCAN's MATCH treats as a pattern.
func matchEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (b *redisBackend) locks(ctx context.Context, prefix string) ([]LockInfo, error) {
	names, err := b.lockNames(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var out []LockInfo
	for batch := range slices.Chunk(names, inspectBatch) {
		dumps, err := b.dumpLocks(ctx, prefix, batch)
		if err != nil {
			return nil, err
		}
		for i, d := range dumps {
			out = append(out, d.infos(batch[i].String(), inspectKeys(prefix, batch[i]))...)
		}
	}
	return out, nil
}

// lockNames walks the keys under prefix with SCAN, on every primary of a
// Cluster (every shard of a Ring), and returns the names, sorted, of those
// with a lock key (lockKeyName).
func (b *redisBackend) lockNames(ctx context.Context, prefix string) ([]inspectName, error) {
	match := matchEscape(prefix) + ":{*"
	var (
		mu  sync.Mutex
		set = make(map[inspectName]bool)
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, match, inspectScanCount).Result()
			if err != nil {
				return fmt.Errorf("scan: %w", err)
			}
			mu.Lock()
			for _, key := range keys {
				if n, _, ok := lockKeyName(prefix, key); ok {
					set[n] = true
				}
			}
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	var err error
	switch rdb := b.rdb.(type) {
	case *redis.ClusterClient:
		err = rdb.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	case *redis.Ring:
		err = rdb.ForEachShard(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	default:
		err = scan(ctx, rdb)
	}
	if err != nil {
		return nil, err
	}
	names := make([]inspectName, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.SortFunc(names, compareInspectNames)
	return names, nil
}

// dumpLocks runs the inspect script for each name, in one pipeline: by
// EVALSHA, then by EVAL for the names whose server did not have it.
func (b *redisBackend) dumpLocks(ctx context.Context, prefix string, names []inspectName) ([]lockDump, error) {
	run := func(idx []int, eval bool) ([]*redis.Cmd, error) {
		pipe := b.rdb.Pipeline()
		cmds := make([]*redis.Cmd, len(idx))
		for j, i := range idx {
			keys := inspectKeys(prefix, names[i])
			if eval {
				cmds[j] = inspectScript.Eval(ctx, pipe, keys)
			} else {
				cmds[j] = inspectScript.EvalSha(ctx, pipe, keys)
			}
		}
		_, err := pipe.Exec(ctx)
		if err != nil && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return cmds, nil
	}
	dumps := make([]lockDump, len(names))
	idx := make([]int, len(names))
	for i := range idx {
		idx[i] = i
	}
	for _, eval := range []bool{false, true} {
		cmds, err := run(idx, eval)
		if err != nil {
			return nil, err
		}
		var again []int
		for j, cmd := range cmds {
			i := idx[j]
			v, err := cmd.Slice()
			switch {
			case err != nil && !eval && redis.HasErrorPrefix(err, "NOSCRIPT"):
				again = append(again, i)
				continue
			case err != nil:
				return nil, fmt.Errorf("lock %q: inspect: %w", names[i], err)
			}
			if dumps[i], err = parseDump(v); err != nil {
				return nil, fmt.Errorf("lock %q: inspect: %w", names[i], err)
			}
		}
		if idx = again; len(idx) == 0 {
			break
		}
	}
	return dumps, nil
}

// lockDump is what the inspect script read of one lock name.
type lockDump struct {
	now  int64 // the server's clock, ms
	keys [ikCount]keyDump
}

// keyDump is one key: its type ("none" if absent), PTTL and contents.
type keyDump struct {
	typ  string
	pttl int64
	str  string   // a string's value
	list []string // a hash's fields and values, a sorted set's members and scores, a list's elements
}

func parseDump(v []any) (lockDump, error) {
	var d lockDump
	if len(v) != 2+ikCount {
		return d, fmt.Errorf("%d values in reply, want %d", len(v), 2+ikCount)
	}
	sec, err1 := strconv.ParseInt(fmt.Sprint(v[0]), 10, 64)
	usec, err2 := strconv.ParseInt(fmt.Sprint(v[1]), 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return d, fmt.Errorf("TIME: %w", err)
	}
	d.now = sec*1000 + usec/1000
	for i := range ikCount {
		kv, ok := v[2+i].([]any)
		if !ok || len(kv) != 3 {
			return d, fmt.Errorf("key %d: unexpected reply %v", i, v[2+i])
		}
		k := &d.keys[i]
		k.typ, _ = kv[0].(string)
		k.pttl, _ = kv[1].(int64)
		switch x := kv[2].(type) {
		case string:
			k.str = x
		case []any:
			k.list = make([]string, len(x))
			for j, e := range x {
				k.list[j] = fmt.Sprint(e)
			}
		}
	}
	return d, nil
}

// clampTTLs keeps each holder's TTL within the key's: a deadline and the
// key's PTTL may differ by a rounding of the clock to the millisecond, and
// no lease outlives its key.
func clampTTLs(info *LockInfo) {
	for i := range info.Holders {
		info.Holders[i].TTL = min(info.Holders[i].TTL, info.TTL)
	}
}

// pairs returns a hash's fields or a sorted set's members with their
// values or scores.
func (k *keyDump) pairs() map[string]string {
	m := make(map[string]string, len(k.list)/2)
	for i := 0; i+1 < len(k.list); i += 2 {
		m[k.list[i]] = k.list[i+1]
	}
	return m
}

// infos are the locks of one name in d: those held or waited for, and those
// with a key of the wrong type.
func (d *lockDump) infos(name string, keys []string) []LockInfo {
	// check reports a key that is neither absent nor of the type want, nor
	// (with ttl) without a TTL.
	check := func(errs *[]error, i int, want string, ttl bool) bool {
		k := &d.keys[i]
		switch {
		case k.typ == "none":
			return false
		case k.typ != want:
			*errs = append(*errs, fmt.Errorf("lock %q: key %q holds a %s, not a %s: %w", name, keys[i], k.typ, want, ErrBadKey))
			return false
		case ttl && k.pttl == -1:
			*errs = append(*errs, fmt.Errorf("lock %q: key %q has no TTL: %w", name, keys[i], ErrBadKey))
			return false
		}
		return true
	}
	ms := func(deadline int64) time.Duration { return time.Duration(deadline-d.now) * time.Millisecond }
	num := func(s string) int64 {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n
		}
		f, _ := strconv.ParseFloat(s, 64) // a score Redis wrote as a float
		return int64(f)
	}

	var tokenErrs []error
	var token int64
	if check(&tokenErrs, ikToken, "string", false) {
		token = num(d.keys[ikToken].str)
	}
	var out []LockInfo
	add := func(info LockInfo, errs []error) {
		if len(info.Holders) == 0 && info.Waiters == 0 && len(errs) == 0 {
			return
		}
		info.Name, info.Token = name, token
		info.Err = errors.Join(append(errs, tokenErrs...)...)
		out = append(out, info)
	}

	// Mutex and FairMutex: a hash of owner -> holds and <owner>:token ->
	// the lease's token; the fair queue and its deadlines.
	{
		var errs []error
		info := LockInfo{Kind: kindMutex}
		if check(&errs, ikLock, "hash", true) {
			k := &d.keys[ikLock]
			info.TTL = time.Duration(k.pttl) * time.Millisecond
			for owner, holds := range k.pairs() {
				if strings.HasSuffix(owner, ":token") {
					continue // the lease's token (acquire.lua), not an owner
				}
				info.Holders = append(info.Holders, Holder{Owner: owner, Holds: int(num(holds)), TTL: info.TTL})
			}
		}
		okQ := check(&errs, ikQueue, "list", false)
		okT := check(&errs, ikTimeout, "zset", false)
		if okQ && okT {
			deadlines := d.keys[ikTimeout].pairs()
			for _, w := range d.keys[ikQueue].list {
				if dl, ok := deadlines[w]; ok && num(dl) > d.now {
					info.Waiters++
				}
			}
		}
		if len(info.Holders) == 0 {
			info.TTL = 0
		}
		add(info, errs)
	}

	// RWMutex: a hash (writer, deadline, <owner> -> holds, <owner>:token),
	// the readers' deadlines, the waiting writers' marks.
	{
		var errs []error
		info := LockInfo{Kind: kindRWMutex}
		okH := check(&errs, ikRW, "hash", true)
		okR := check(&errs, ikReaders, "zset", false)
		if check(&errs, ikWriters, "zset", false) {
			for _, dl := range d.keys[ikWriters].pairs() {
				if num(dl) > d.now {
					info.Waiters++
				}
			}
		}
		if okH {
			k := &d.keys[ikRW]
			h := k.pairs()
			lease := func(owner, mode string, deadline int64) {
				if deadline > d.now {
					info.Holders = append(info.Holders, Holder{
						Owner: owner, Holds: int(num(h[owner])), Mode: mode,
						Token: num(h[owner+":token"]), TTL: ms(deadline),
					})
				}
			}
			if w := h["writer"]; w != "" {
				lease(w, modeWrite, num(h["deadline"]))
			}
			if okR {
				for owner, dl := range d.keys[ikReaders].pairs() {
					lease(owner, modeRead, num(dl))
				}
			}
			if len(info.Holders) > 0 {
				info.TTL = time.Duration(k.pttl) * time.Millisecond
				clampTTLs(&info)
			}
		}
		add(info, errs)
	}

	// Semaphore: the permits' deadlines, holds and tokens.
	{
		var errs []error
		info := LockInfo{Kind: kindSemaphore}
		okP := check(&errs, ikSem, "zset", true)
		okH := check(&errs, ikSemHolds, "hash", true)
		okT := check(&errs, ikSemTokens, "hash", true)
		if okP {
			k := &d.keys[ikSem]
			var holds, tokens map[string]string
			if okH {
				holds = d.keys[ikSemHolds].pairs()
			}
			if okT {
				tokens = d.keys[ikSemTokens].pairs()
			}
			for owner, dl := range k.pairs() {
				if num(dl) > d.now {
					info.Holders = append(info.Holders, Holder{
						Owner: owner, Holds: int(num(holds[owner])), Mode: modePermit,
						Token: num(tokens[owner]), TTL: ms(num(dl)),
					})
				}
			}
			if len(info.Holders) > 0 {
				info.TTL = time.Duration(k.pttl) * time.Millisecond
				clampTTLs(&info)
				// The keys outlive the longest permit when its deadline
				// moved earlier (a renewal with a shorter lease: their
				// TTL only grows); the semaphore lasts as long as it.
				longest := time.Duration(0)
				for _, h := range info.Holders {
					longest = max(longest, h.TTL)
				}
				info.TTL = longest
			}
		}
		add(info, errs)
	}

	return out
}

// The keys of one name that the inspect script reads, by index.
const (
	ikLock = iota
	ikToken
	ikQueue
	ikTimeout
	ikRW
	ikReaders
	ikWriters
	ikSem
	ikSemHolds
	ikSemTokens
	ikCount
)
