package core

import (
	"cmp"
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

// inspectBackend is what Client.Locks needs from a backend.
type inspectBackend interface {
	// locks lists the locks kept under prefix that are held, or waited
	// for in the store, or whose keys hold something that is not a lock
	// (LockInfo.Err). The order is the caller's to set.
	locks(ctx context.Context, prefix string) ([]LockInfo, error)
}

// LockInfo is one lock as Client.Locks finds it in the store: a snapshot,
// taken for operators (`scheduler locks`), that may be out of date as soon
// as it is returned.
type LockInfo struct {
	// Name is the lock's name.
	Name string
	// Kind is "mutex" (a Mutex or a FairMutex, which share their lock),
	// "rwmutex" or "semaphore".
	Kind string
	// Holders are those who hold the lock now, in the order write, read,
	// permit, then by owner id: one for a Mutex or a write lock, several
	// for read locks and permits. Empty while the lock is only waited for.
	Holders []Holder
	// TTL is how long the lock lasts in the store unless renewed: its
	// longest lease's (a Mutex's key's). 0 if the lock is not held.
	TTL time.Duration
	// Token is the fencing token of the current or last lease of a lock of
	// this name, of any kind (prefix:{name}:token); 0 if there is none.
	Token int64
	// Waiters are the waiters queued in the store: the places in a fair
	// lock's queue, and the marks of an RWMutex's waiting writers. Other
	// waiters wait in their own process, where the store does not see
	// them (Client.Waiting counts them there).
	Waiters int
	// Err, if not nil, wraps ErrBadKey and names each key of the lock that
	// holds something that is not part of a lock of this kind (another
	// type, or no TTL), its fencing token key included; the fields above
	// say what could be read. The memory backend never sets it.
	Err error
}

// Holder is one holder of a lock, as Client.Locks finds it.
type Holder struct {
	// Owner is the owner id of the lease (Lease.Owner): the holding
	// Client's id, an instance id and a sequence number.
	Owner string
	// Holds is how many times the lease is held (re-entries count).
	Holds int
	// Mode is "write" for the write lock of an RWMutex, "read" for a read
	// lock, "permit" for a Semaphore's permit, and "" for a Mutex.
	Mode string
	// Token is the lease's fencing token where the kind keeps one per
	// lease (RWMutex, Semaphore); else 0, and LockInfo.Token is the
	// Mutex's.
	Token int64
	// TTL is how long the lease lasts unless renewed: its own deadline for
	// RWMutex and Semaphore leases, the lock's TTL for a Mutex.
	TTL time.Duration
}

// The values of LockInfo.Kind and Holder.Mode.
const (
	kindMutex     = "mutex"
	kindRWMutex   = "rwmutex"
	kindSemaphore = "semaphore"

	modeWrite  = "write"
	modeRead   = "read"
	modePermit = "permit"
)

// Locks lists every lock kept under the Client's key prefix (WithKeyPrefix)
// that is held, or waited for in the store (a fair lock's queue, an
// RWMutex's waiting writers), sorted by name, then kind: who holds it, with
// what holds, TTLs and fencing tokens, and how many wait. Ledgers are not
// locks and are not listed (their lock is, while held), nor is a fencing
// token left alone by leases that ended. It is for operators: it reads the
// store and changes nothing there.
//
// On Redis it walks the keyspace with SCAN (never KEYS), on every primary
// of a Cluster, and reads each lock name with one script that only reads
// (its keys share a slot), sent in pipelines: each lock is read at one
// instant, but a busy store changes between two locks, and a lock taken or
// released during the walk may or may not be listed. A key of the
// wrong type does not fail the listing: its lock is listed with Err set
// (wrapping ErrBadKey).
//
// It returns ctx's error (wrapped) if ctx ends first, an error wrapping
// ErrClosed after Close, or the store's error. It is safe for concurrent
// use.
func (c *Client) Locks(ctx context.Context) ([]LockInfo, error) {
	if c.isClosed() {
		return nil, fmt.Errorf("lock: Locks: %w", ErrClosed)
	}
	out, err := c.be.locks(ctx, c.opt.prefix)
	if err != nil {
		return nil, fmt.Errorf("lock: Locks: %w", err)
	}
	for i := range out {
		slices.SortFunc(out[i].Holders, compareInspectHolders)
	}
	slices.SortFunc(out, func(a, b LockInfo) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Kind, b.Kind))
	})
	return out, nil
}

func compareInspectHolders(a, b Holder) int {
	rank := func(mode string) int {
		switch mode {
		case modeWrite:
			return 0
		case modeRead:
			return 1
		}
		return 2
	}
	return cmp.Or(cmp.Compare(rank(a.Mode), rank(b.Mode)), strings.Compare(a.Owner, b.Owner))
}

// splitLockKey splits a key kept under prefix, prefix:{name}suffix, into the
// lock's name and the suffix.
func splitLockKey(prefix, key string) (name, suffix string, ok bool) {
	rest, ok := strings.CutPrefix(key, prefix+":{")
	if !ok {
		return "", "", false
	}
	name, suffix, ok = strings.Cut(rest, "}")
	if !ok || name == "" {
		return "", "", false
	}
	return name, suffix, true
}

// lockSuffixes are the suffixes (after prefix:{name}) of the keys that make
// a lock worth reading: the token alone does not, and ledgers are not locks.
var lockSuffixes = map[string]bool{
	"": true, ":queue": true, ":timeout": true,
	":rw": true, ":rw:readers": true, ":rw:writers": true,
	":sem": true, ":sem:holds": true, ":sem:tokens": true,
}

// inspectBatch is how many locks go in one pipeline.
const inspectBatch = 256

// inspectScanCount is the COUNT hint of each SCAN.
const inspectScanCount = 1000

// inspect.lua dumps the keys of one lock name (one hash tag, so one slot).
//
//go:embed scripts/inspect.lua
var inspectSrc string

var inspectScript = redis.NewScript(inspectSrc)

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

func inspectKeys(prefix, name string) []string {
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
			out = append(out, d.infos(batch[i], inspectKeys(prefix, batch[i]))...)
		}
	}
	return out, nil
}

// lockNames walks the keys under prefix with SCAN, on every primary of a
// Cluster (every shard of a Ring), and returns the names, sorted, of those
// with a lock key.
func (b *redisBackend) lockNames(ctx context.Context, prefix string) ([]string, error) {
	match := matchEscape(prefix) + ":{*"
	var (
		mu  sync.Mutex
		set = make(map[string]bool)
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
				if name, suffix, ok := splitLockKey(prefix, key); ok && lockSuffixes[suffix] {
					set[name] = true
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
	names := make([]string, 0, len(set))
	for name := range set {
		names = append(names, name)
	}
	slices.Sort(names)
	return names, nil
}

// dumpLocks runs the inspect script for each name, in one pipeline: by
// EVALSHA, then by EVAL for the names whose server did not have it.
func (b *redisBackend) dumpLocks(ctx context.Context, prefix string, names []string) ([]lockDump, error) {
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
