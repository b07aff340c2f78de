package core

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoFreeze: DeleteFreeze of an id that names no freeze, or one that has
// ended.
var ErrNoFreeze = errors.New("lock: no such freeze")

// A Freeze is a fleet-wide stop of the ticks of the jobs whose names match
// Jobs (a path.Match pattern), from Created until Until, both on the
// store's clock, with a note that says why.
type Freeze struct {
	ID      string    `json:"id"`
	Jobs    string    `json:"jobs"`
	Until   time.Time `json:"until"`
	Created time.Time `json:"created"`
	Note    string    `json:"note"`
}

// freezeBackend keeps the fleet's freezes (AddFreeze, DeleteFreeze,
// Freezes).
type freezeBackend interface {
	// freezes runs freeze.lua on the keys k: op "add" (args: until in ms,
	// the pattern, the note), "del" (the id) or "list", an add or a del
	// with nonce, which a repeat of the call sends again (a retry after a
	// lost reply) and is answered as the first was. It returns the status,
	// the store's time in ms, and the rest of the reply.
	freezes(ctx context.Context, k freezeKeys, op, nonce string, args ...string) (int64, int64, []string, error)
}

// freezeKeys are the keys of the freezes, in a hash slot of their own.
type freezeKeys struct {
	key  string // the freezes
	seq  string // their ids' counter
	reqs string // the nonces of the adds and dels answered lately
}

// freezesKey is where the freezes live.
func (c *Client) freezesKey() freezeKeys {
	k := c.opt.prefix + ":freezes:{freezes}"
	return freezeKeys{key: k, seq: k + ":seq", reqs: k + ":requests"}
}

// freezeNonceTTL is how long freeze.lua remembers an add's or a del's
// nonce: longer than go-redis's retries of it, as releasedTTL.
const freezeNonceTTL = releasedTTL

// AddFreeze adds a freeze of the jobs matching pattern until until, with
// note, and returns it with its id ("f1", "f2", ...) and its start (the
// store's time). until must be after the store's time (Redis TIME): else
// it returns ErrInvalid, and nothing is added. It returns ErrBadKey if the
// freezes' key holds another type, and ErrClosed after Close.
//
// A retry of the call by the Redis client (after a lost reply) makes no
// second freeze: the script keeps the call's nonce for a while
// (freezeNonceTTL) and answers a repeat with the freeze the first made.
func (c *Client) AddFreeze(ctx context.Context, pattern string, until time.Time, note string) (Freeze, error) {
	st, now, rest, err := c.freeze(ctx, "add", randomID(), strconv.FormatInt(until.UnixMilli(), 10), pattern, note)
	if err != nil {
		return Freeze{}, err
	}
	if st != 1 || len(rest) != 2 {
		return Freeze{}, fmt.Errorf("lock: freeze until %s: not after the store's time, %s: %w",
			until.UTC().Format(time.RFC3339), time.UnixMilli(now).UTC().Format(time.RFC3339), ErrInvalid)
	}
	created, _ := strconv.ParseInt(rest[1], 10, 64)
	return Freeze{ID: rest[0], Jobs: pattern, Until: time.UnixMilli(until.UnixMilli()), Created: time.UnixMilli(created), Note: note}, nil
}

// DeleteFreeze ends the freeze id at once. It returns ErrNoFreeze if there
// is no such freeze (or it has ended), and the errors of AddFreeze; a
// retry by the Redis client of a call that ended it answers success, as
// AddFreeze's.
func (c *Client) DeleteFreeze(ctx context.Context, id string) error {
	st, _, _, err := c.freeze(ctx, "del", randomID(), id)
	if err != nil {
		return err
	}
	if st != 1 {
		return fmt.Errorf("lock: freeze %q: %w", id, ErrNoFreeze)
	}
	return nil
}

// Freezes returns the freezes that have not ended, by id (in the order
// they were made), and the store's time. It returns the errors of
// AddFreeze.
func (c *Client) Freezes(ctx context.Context) ([]Freeze, time.Time, error) {
	_, now, rest, err := c.freeze(ctx, "list", "")
	if err != nil {
		return nil, time.Time{}, err
	}
	out := make([]Freeze, 0, len(rest)/2)
	for i := 0; i+1 < len(rest); i += 2 {
		p := strings.SplitN(rest[i+1], "\n", 4)
		if len(p) != 4 {
			continue
		}
		until, _ := strconv.ParseInt(p[0], 10, 64)
		created, _ := strconv.ParseInt(p[1], 10, 64)
		out = append(out, Freeze{ID: rest[i], Until: time.UnixMilli(until), Created: time.UnixMilli(created), Jobs: p[2], Note: p[3]})
	}
	slices.SortFunc(out, func(a, b Freeze) int { return freezeNum(a.ID) - freezeNum(b.ID) })
	return out, time.UnixMilli(now), nil
}

// freezeNum is the number of a freeze's id ("f12": 12).
func freezeNum(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "f"))
	return n
}

func (c *Client) freeze(ctx context.Context, op, nonce string, args ...string) (int64, int64, []string, error) {
	if c.isClosed() {
		return 0, 0, nil, fmt.Errorf("lock: freezes: %w", ErrClosed)
	}
	k := c.freezesKey()
	st, now, rest, err := c.be.freezes(ctx, k, op, nonce, args...)
	if err != nil {
		if errors.Is(err, ErrBadKey) || strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return 0, 0, nil, fmt.Errorf("lock: key %q or %q holds another type, not the freezes' hash: %w", k.key, k.reqs, ErrBadKey)
		}
		return 0, 0, nil, fmt.Errorf("lock: freezes: %w", err)
	}
	return st, now, rest, nil
}

var (
	//go:embed scripts/freeze.lua
	freezeSrc    string
	freezeScript = redis.NewScript(freezeSrc)
)

func (b *redisBackend) freezes(ctx context.Context, k freezeKeys, op, nonce string, args ...string) (int64, int64, []string, error) {
	argv := make([]any, 0, 3+len(args))
	argv = append(argv, op, nonce, freezeNonceTTL.Milliseconds())
	for _, a := range args {
		argv = append(argv, a)
	}
	v, err := freezeScript.Run(ctx, b.rdb, []string{k.key, k.seq, k.reqs}, argv...).Slice()
	return statusReply("freeze.lua", v, err)
}

// statusReply reads the reply v of a script that answers {status, now on
// the server's clock in ms, strings...} (freeze.lua, backfill.lua), or
// passes err on.
func statusReply(script string, v []any, err error) (status, now int64, rest []string, _ error) {
	if err != nil {
		return 0, 0, nil, err
	}
	if len(v) < 2 {
		return 0, 0, nil, fmt.Errorf("%s: a reply of %d values", script, len(v))
	}
	status, _ = v[0].(int64)
	now, _ = v[1].(int64)
	rest = make([]string, 0, len(v)-2)
	for _, x := range v[2:] {
		s, _ := x.(string)
		rest = append(rest, s)
	}
	return status, now, rest, nil
}

// memFreezes are the freezes at one key of a MemoryStore, the counter of
// their ids, and the nonces of the adds and dels answered lately.
type memFreezes struct {
	seq      int64
	m        map[string]string // id -> "until\ncreated\njobs\nnote", as freeze.lua's hash
	reqs     map[string]string // nonce -> "id\ncreated" of an add, "del" of a del
	reqsEnds time.Time         // when reqs expires, as freeze.lua's KEYS[3]
}

func (b *memoryBackend) freezes(ctx context.Context, k freezeKeys, op, nonce string, args ...string) (int64, int64, []string, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixMilli()
	f := s.freeze[k.key]
	if f == nil {
		f = &memFreezes{m: make(map[string]string)}
		s.freeze[k.key] = f
	}
	if f.reqs != nil && !time.UnixMilli(now).Before(f.reqsEnds) {
		f.reqs = nil
	}
	var live []string
	for id, v := range f.m {
		if u, _ := strconv.ParseInt(strings.SplitN(v, "\n", 2)[0], 10, 64); u > now {
			live = append(live, id, v)
		} else {
			delete(f.m, id)
		}
	}
	remember := func(v string) {
		if f.reqs == nil {
			f.reqs = make(map[string]string)
		}
		f.reqs[nonce] = v
		f.reqsEnds = time.UnixMilli(now).Add(freezeNonceTTL)
	}
	if prior, ok := f.reqs[nonce]; ok && op != "list" {
		if op == "add" {
			id, created, _ := strings.Cut(prior, "\n")
			return 1, now, []string{id, created}, nil
		}
		return 1, now, nil, nil
	}
	switch op {
	case "add":
		u, _ := strconv.ParseInt(args[0], 10, 64)
		if u <= now {
			return 0, now, nil, nil
		}
		f.seq++
		id, created := "f"+strconv.FormatInt(f.seq, 10), strconv.FormatInt(now, 10)
		f.m[id] = args[0] + "\n" + created + "\n" + args[1] + "\n" + args[2]
		remember(id + "\n" + created)
		return 1, now, []string{id, created}, nil
	case "del":
		if _, ok := f.m[args[0]]; !ok {
			return 0, now, nil, nil
		}
		delete(f.m, args[0])
		remember("del")
		return 1, now, nil, nil
	}
	return 1, now, live, nil
}
