package core

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoBackfill: CancelBackfill or BackfillProgress of an id that names no
// backfill of the ledger's (or one dropped after BackfillKeep).
var ErrNoBackfill = errors.New("lock: no such backfill")

// ErrBackfillEnded: CancelBackfill of a backfill that has finished.
var ErrBackfillEnded = errors.New("lock: backfill has finished")

// ErrBackfillOverlaps: AddBackfill of a range that overlaps a running
// backfill's (a *BackfillOverlapError).
var ErrBackfillOverlaps = errors.New("lock: the range overlaps a running backfill")

// A BackfillOverlapError is AddBackfill's refusal of a range that overlaps
// the running backfill Running of the same ledger. It matches
// ErrBackfillOverlaps.
type BackfillOverlapError struct{ ID, Running string }

func (e *BackfillOverlapError) Error() string {
	return fmt.Sprintf("lock: backfill %q: its range overlaps that of backfill %s, running", e.ID, e.Running)
}

// Is makes a BackfillOverlapError match ErrBackfillOverlaps.
func (e *BackfillOverlapError) Is(target error) bool { return target == ErrBackfillOverlaps }

// BackfillKeep is how long a backfill is kept once it has ended (finished
// or cancelled), for operators to read.
const BackfillKeep = 7 * 24 * time.Hour

// A Backfill is a run of a job's past ticks, as the store keeps it beside
// the job's ledger: Fields are what AddBackfill was given; State is
// "running", "cancelled" or "finished"; Done counts the ticks handled, up
// to Last; Created and Ended are on the store's clock (Ended zero while
// running).
type Backfill struct {
	ID          string
	Fields      map[string]string
	State       string
	Done        int64
	Last        int64
	Created     time.Time
	Ended       time.Time
	CancelledBy string
	// Next is the earliest start of its next tick, ms on the store's
	// clock (0: at once), as BackfillProgress last set it.
	Next int64
}

// The states of a Backfill.
const (
	BackfillRunning   = "running"
	BackfillCancelled = "cancelled"
	BackfillFinished  = "finished"
)

// BackfillOwnerTag ends the owner id of a backfill's claims
// (WithBackfillClaims): a claim that finds the lock held by such an owner
// waits for it, whatever its queue (claim.lua), so that a job's scheduled
// ticks come before its backfill's.
const BackfillOwnerTag = "/backfill"

// WithBackfillClaims marks the ledger's claims as a backfill's: their
// owner ids end with BackfillOwnerTag, and a claim of another ledger of
// the lock that finds one of them holding it waits for it instead of
// answering busy (ErrLocked).
func WithBackfillClaims() LedgerOption {
	return func(g *Ledger) { g.byBackfill = true }
}

func (g *Ledger) ownerTag() string {
	if g.byBackfill {
		return BackfillOwnerTag
	}
	return ""
}

// backfillBackend keeps the backfills of the ledgers.
type backfillBackend interface {
	// backfills runs backfill.lua on key: op "add" (args: field, value,
	// ...), "cancel" (args: by; it pauses the ledger at pause), "progress"
	// (args: done, last, "1" if finished, ms until the next tick) or
	// "list". It returns the status, the store's time in ms and the rest
	// of the reply.
	backfills(ctx context.Context, key, pause, op, id string, args ...string) (int64, int64, []string, error)
	// backfillIndex runs backfillindex.lua on key: op "add" (of id, for
	// job), "drop" (id) or "list". It returns the store's time in ms and,
	// for list, the hash.
	backfillIndex(ctx context.Context, key, op, id, job string) (int64, []string, error)
}

// backfillsKey is where the backfills of g live: beside its ledger, in its
// lock's hash slot.
func (g *Ledger) backfillsKey() string { return g.m.k.lock + ":backfills:" + g.id }

// BackfillsKey is the Redis key of the ledger's backfills (a hash).
func (g *Ledger) BackfillsKey() string { return g.backfillsKey() }

// AddBackfill records a backfill id of the ledger's task with fields (none
// of them named state, created, ended, done, last, cancelled_by or nonce;
// no "/" in id), running, with nothing done. A retry of the call by the
// Redis client (after a lost reply) changes nothing and answers success:
// the call's random nonce, kept with the backfill, tells it from another
// add of the same id. Fields from and to (ms), when given, are the
// backfill's range: one that overlaps the range of a running backfill is
// refused with a *BackfillOverlapError (ErrBackfillOverlaps), nothing
// changed. It returns ErrInvalid for an id taken by another add
// or malformed, ErrBadKey if the key holds another type, ErrClosed after
// Close.
func (g *Ledger) AddBackfill(ctx context.Context, id string, fields map[string]string) error {
	if id == "" || strings.Contains(id, "/") {
		return fmt.Errorf("lock: backfill id %q: empty or holds a slash: %w", id, ErrInvalid)
	}
	keys := []string{"nonce"}
	fields = maps.Clone(fields)
	fields["nonce"] = randomID()
	for k := range fields {
		if k != "nonce" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	args := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		args = append(args, k, fields[k])
	}
	st, _, rest, err := g.backfill(ctx, "", "add", id, args...)
	if err != nil {
		return err
	}
	if st == 3 && len(rest) == 1 {
		return &BackfillOverlapError{ID: id, Running: rest[0]}
	}
	if st != 1 {
		return fmt.Errorf("lock: backfill %q: id taken: %w", id, ErrInvalid)
	}
	return nil
}

// CancelBackfill marks the backfill id cancelled, by by; one already
// cancelled stays so. In the same step it pauses the ledger ledger (the
// id of the backfill's own ledger, of the same lock), so that no claim of
// it is granted from then on, not even one that was waiting for the lock.
// It returns ErrNoBackfill for no such backfill, ErrBackfillEnded for one
// that has finished, and the errors of AddBackfill.
func (g *Ledger) CancelBackfill(ctx context.Context, id, by, ledger string) error {
	if ledger == "" {
		return fmt.Errorf("lock: backfill %q: no ledger to pause: %w", id, ErrInvalid)
	}
	st, _, _, err := g.backfill(ctx, g.m.k.lock+":ledger:"+ledger, "cancel", id, by)
	switch {
	case err != nil:
		return err
	case st == 0:
		return fmt.Errorf("lock: backfill %q: %w", id, ErrNoBackfill)
	case st == 2:
		return fmt.Errorf("lock: backfill %q: %w", id, ErrBackfillEnded)
	}
	return nil
}

// BackfillProgress records that the backfill id has handled done ticks, up
// to last (kept only if later than the last recorded, so that a late
// carrier never moves it back), and finishes it if finished and it is
// running; its next tick may start next from now (Backfill.Next, on the
// store's clock). It returns the backfill's state, ErrNoBackfill for no
// such backfill, and the errors of AddBackfill.
func (g *Ledger) BackfillProgress(ctx context.Context, id string, done, last int64, finished bool, next time.Duration) (string, error) {
	fin := "0"
	if finished {
		fin = "1"
	}
	st, _, rest, err := g.backfill(ctx, "", "progress", id, strconv.FormatInt(done, 10), strconv.FormatInt(last, 10), fin,
		strconv.FormatInt(max(next, 0).Milliseconds(), 10))
	switch {
	case err != nil:
		return "", err
	case st == 0 || len(rest) != 1:
		return "", fmt.Errorf("lock: backfill %q: %w", id, ErrNoBackfill)
	}
	return rest[0], nil
}

// Backfills returns the ledger's backfills, oldest first, and the store's
// time. It returns the errors of AddBackfill.
func (g *Ledger) Backfills(ctx context.Context) ([]Backfill, time.Time, error) {
	_, now, rest, err := g.backfill(ctx, "", "list", "")
	if err != nil {
		return nil, time.Time{}, err
	}
	byID := make(map[string]*Backfill)
	for i := 0; i+1 < len(rest); i += 2 {
		id, f, ok := strings.Cut(rest[i], "/")
		if !ok {
			continue
		}
		b := byID[id]
		if b == nil {
			b = &Backfill{ID: id, Fields: make(map[string]string)}
			byID[id] = b
		}
		v := rest[i+1]
		n, _ := strconv.ParseInt(v, 10, 64)
		switch f {
		case "state":
			b.State = v
		case "done":
			b.Done = n
		case "last":
			b.Last = n
		case "next":
			b.Next = n
		case "created":
			b.Created = time.UnixMilli(n)
		case "ended":
			if n > 0 {
				b.Ended = time.UnixMilli(n)
			}
		case "cancelled_by":
			b.CancelledBy = v
		case "nonce":
		default:
			b.Fields[f] = v
		}
	}
	out := make([]Backfill, 0, len(byID))
	for _, b := range byID {
		// (One that ended BackfillKeep ago is left out: the next write
		// prunes it.)
		if b.State != "" && (b.Ended.IsZero() || b.Ended.Add(BackfillKeep).After(time.UnixMilli(now))) {
			out = append(out, *b)
		}
	}
	slices.SortFunc(out, func(a, b Backfill) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, time.UnixMilli(now), nil
}

func (g *Ledger) backfill(ctx context.Context, pause, op, id string, args ...string) (int64, int64, []string, error) {
	if g.c.isClosed() {
		return 0, 0, nil, fmt.Errorf("lock %q: backfills: %w", g.m.k.name, ErrClosed)
	}
	key := g.backfillsKey()
	st, now, rest, err := g.c.be.backfills(ctx, key, pause, op, id, args...)
	if err != nil {
		if errors.Is(err, ErrBadKey) || strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return 0, 0, nil, fmt.Errorf("lock: key %q holds another type, not a hash of backfills: %w", key, ErrBadKey)
		}
		return 0, 0, nil, fmt.Errorf("lock %q: backfills: %w", g.m.k.name, err)
	}
	return st, now, rest, nil
}

var (
	//go:embed scripts/backfill.lua
	backfillSrc    string
	backfillScript = redis.NewScript(backfillSrc)
)

func (b *redisBackend) backfills(ctx context.Context, key, pause, op, id string, args ...string) (int64, int64, []string, error) {
	argv := make([]any, 0, 4+len(args))
	argv = append(argv, op, id, LedgerTTL.Milliseconds(), BackfillKeep.Milliseconds())
	for _, a := range args {
		argv = append(argv, a)
	}
	keys := []string{key}
	if pause != "" {
		keys = append(keys, pause)
	}
	v, err := backfillScript.Run(ctx, b.rdb, keys, argv...).Slice()
	return statusReply("backfill.lua", v, err)
}

// memBackfills is the hash of one job's backfills in a MemoryStore, as
// backfill.lua's KEYS[1], and when it expires.
type memBackfills struct {
	m    map[string]string
	ends time.Time
}

// memBackfillsAt is the hash at key (a job's backfills, or the index) at
// now; nil if there is none, or it has expired (then it goes). s.mu is
// held.
func (s *MemoryStore) memBackfillsAt(key string, now time.Time) *memBackfills {
	if s.backfill == nil {
		s.backfill = make(map[string]*memBackfills)
	}
	h := s.backfill[key]
	if h != nil && !now.Before(h.ends) {
		h = nil
		delete(s.backfill, key)
	}
	return h
}

func (b *memoryBackend) backfills(ctx context.Context, key, pause, op, id string, args ...string) (int64, int64, []string, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	nowT := time.Now()
	now := nowT.UnixMilli()
	h := s.memBackfillsAt(key, nowT)
	if h == nil {
		h = &memBackfills{m: make(map[string]string)}
	}
	if op == "list" {
		// Read-only, as the script: the writes prune.
		rest := make([]string, 0, 2*len(h.m))
		for f, v := range h.m {
			rest = append(rest, f, v)
		}
		return 1, now, rest, nil
	}
	keep := BackfillKeep.Milliseconds()
	dead := make(map[string]bool)
	for f, v := range h.m {
		if p, ok := strings.CutSuffix(f, "/ended"); ok {
			if ended, err := strconv.ParseInt(v, 10, 64); err == nil && ended > 0 && ended+keep <= now {
				dead[p+"/"] = true
			}
		}
	}
	for f := range h.m {
		if i := strings.LastIndexByte(f, '/'); i >= 0 && dead[f[:i+1]] {
			delete(h.m, f)
		}
	}
	save := func() {
		s.backfill[key] = h
		h.ends = nowT.Add(LedgerTTL)
	}
	p := id + "/"
	state, ok := h.m[p+"state"]
	switch {
	case op == "add":
		if ok {
			for i := 0; i+1 < len(args); i += 2 {
				if args[i] == "nonce" && args[i+1] == h.m[p+"nonce"] {
					return 1, now, nil, nil
				}
			}
			return 2, now, nil, nil
		}
		if other := memOverlap(h.m, args); other != "" {
			return 3, now, []string{other}, nil
		}
		for i := 0; i+1 < len(args); i += 2 {
			h.m[p+args[i]] = args[i+1]
		}
		n := strconv.FormatInt(now, 10)
		h.m[p+"state"], h.m[p+"created"], h.m[p+"ended"], h.m[p+"done"], h.m[p+"last"], h.m[p+"next"] = BackfillRunning, n, "0", "0", "0", "0"
		save()
		return 1, now, nil, nil
	case !ok:
		return 0, now, nil, nil
	case op == "cancel":
		if state == BackfillFinished {
			return 2, now, nil, nil
		}
		if state == BackfillRunning {
			h.m[p+"state"], h.m[p+"ended"], h.m[p+"cancelled_by"] = BackfillCancelled, strconv.FormatInt(now, 10), args[0]
		}
		g := s.ledgerAt(pause, nowT, false)
		if g == nil {
			g = s.ledgerAt(pause, nowT, true) // a new ledger lives LedgerTTL, as the script's
		}
		g.paused, g.pause = true, memPause{by: args[0], note: "backfill cancelled", at: now}
		save()
		return 1, now, nil, nil
	}
	// progress
	last, _ := strconv.ParseInt(h.m[p+"last"], 10, 64)
	if n, _ := strconv.ParseInt(args[1], 10, 64); n > last {
		h.m[p+"done"], h.m[p+"last"] = args[0], args[1]
	}
	next, _ := strconv.ParseInt(args[3], 10, 64)
	h.m[p+"next"] = strconv.FormatInt(now+max(0, next), 10)
	if args[2] == "1" && state == BackfillRunning {
		state = BackfillFinished
		h.m[p+"state"], h.m[p+"ended"] = state, strconv.FormatInt(now, 10)
	}
	save()
	return 1, now, []string{state}, nil
}

// memOverlap is the id of a running backfill of h whose range overlaps
// that of the add's args (fields from and to, ms), as backfill.lua's add;
// "" if none, or if args give no range.
func memOverlap(h map[string]string, args []string) string {
	var from, to string
	for i := 0; i+1 < len(args); i += 2 {
		switch args[i] {
		case "from":
			from = args[i+1]
		case "to":
			to = args[i+1]
		}
	}
	a, errA := strconv.ParseInt(from, 10, 64)
	b, errB := strconv.ParseInt(to, 10, 64)
	if errA != nil || errB != nil {
		return ""
	}
	var ids []string
	for f, v := range h {
		if id, ok := strings.CutSuffix(f, "/state"); ok && v == BackfillRunning {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		x, errX := strconv.ParseInt(h[id+"/from"], 10, 64)
		y, errY := strconv.ParseInt(h[id+"/to"], 10, 64)
		if errX == nil && errY == nil && x <= b && a <= y {
			return id
		}
	}
	return ""
}

// A BackfillIndexEntry is an entry of the fleet's index of running
// backfills (Client.BackfillIndex): the backfill's job, and when it was
// indexed, on the store's clock.
type BackfillIndexEntry struct {
	Job string
	At  time.Time
}

// backfillIndexKey is where the fleet's index of running backfills lives.
func (c *Client) backfillIndexKey() string { return c.opt.prefix + ":backfills:{backfills}" }

// IndexBackfill records in the fleet's index of running backfills that
// the backfill id is job's: a hint, kept LedgerTTL after the last add, that
// lets the fleet read a job's backfills only when it names them. It
// returns ErrBadKey if the key holds another type, ErrClosed after Close.
func (c *Client) IndexBackfill(ctx context.Context, id, job string) error {
	_, _, err := c.backfillIndex(ctx, "add", id, job)
	return err
}

// UnindexBackfill drops the backfill id from the fleet's index (it has
// ended, or was never added). It returns the errors of IndexBackfill.
func (c *Client) UnindexBackfill(ctx context.Context, id string) error {
	_, _, err := c.backfillIndex(ctx, "drop", id, "")
	return err
}

// BackfillIndex returns the fleet's index of running backfills, by id,
// and the store's time: one round trip. It returns the errors of
// IndexBackfill.
func (c *Client) BackfillIndex(ctx context.Context) (map[string]BackfillIndexEntry, time.Time, error) {
	now, rest, err := c.backfillIndex(ctx, "list", "", "")
	if err != nil {
		return nil, time.Time{}, err
	}
	out := make(map[string]BackfillIndexEntry, len(rest)/2)
	for i := 0; i+1 < len(rest); i += 2 {
		v := rest[i+1]
		j := strings.LastIndexByte(v, '/')
		if j < 0 {
			continue
		}
		ms, err := strconv.ParseInt(v[j+1:], 10, 64)
		if err != nil {
			continue
		}
		out[rest[i]] = BackfillIndexEntry{Job: v[:j], At: time.UnixMilli(ms)}
	}
	return out, time.UnixMilli(now), nil
}

func (c *Client) backfillIndex(ctx context.Context, op, id, job string) (int64, []string, error) {
	if c.isClosed() {
		return 0, nil, fmt.Errorf("lock: backfill index: %w", ErrClosed)
	}
	key := c.backfillIndexKey()
	now, rest, err := c.be.backfillIndex(ctx, key, op, id, job)
	if err != nil {
		if errors.Is(err, ErrBadKey) || strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return 0, nil, fmt.Errorf("lock: key %q holds another type, not the index of backfills: %w", key, ErrBadKey)
		}
		return 0, nil, fmt.Errorf("lock: backfill index: %w", err)
	}
	return now, rest, nil
}

var (
	//go:embed scripts/backfillindex.lua
	backfillIndexSrc    string
	backfillIndexScript = redis.NewScript(backfillIndexSrc)
)

func (b *redisBackend) backfillIndex(ctx context.Context, key, op, id, job string) (int64, []string, error) {
	v, err := backfillIndexScript.Run(ctx, b.rdb, []string{key}, op, id, job, LedgerTTL.Milliseconds()).Slice()
	if err != nil {
		return 0, nil, err
	}
	if len(v) < 1 {
		return 0, nil, fmt.Errorf("backfillindex.lua: an empty reply")
	}
	now, _ := v[0].(int64)
	rest := make([]string, 0, len(v)-1)
	for _, x := range v[1:] {
		s, _ := x.(string)
		rest = append(rest, s)
	}
	return now, rest, nil
}

func (b *memoryBackend) backfillIndex(ctx context.Context, key, op, id, job string) (int64, []string, error) {
	if err := ctx.Err(); err != nil {
		return 0, nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	nowT := time.Now()
	now := nowT.UnixMilli()
	h := s.memBackfillsAt(key, nowT)
	switch op {
	case "add":
		if h == nil {
			h = &memBackfills{m: make(map[string]string)}
			s.backfill[key] = h
		}
		h.m[id] = job + "/" + strconv.FormatInt(now, 10)
		h.ends = nowT.Add(LedgerTTL)
	case "drop":
		if h != nil {
			delete(h.m, id)
			if len(h.m) == 0 {
				delete(s.backfill, key) // as Redis: a hash with no field is no key
			}
		}
	default:
		var rest []string
		if h != nil {
			for k, v := range h.m {
				rest = append(rest, k, v)
			}
		}
		return now, rest, nil
	}
	return now, nil, nil
}
