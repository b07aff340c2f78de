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
	// freezes runs freeze.lua on key and its counter seq: op "add" (args:
	// until in ms, the pattern, the note), "del" (the id) or "list". It
	// returns the status, the store's time in ms, and the rest of the
	// reply.
	freezes(ctx context.Context, key, seq, op string, args ...string) (int64, int64, []string, error)
}

// freezesKey is where the freezes live, and their ids' counter: in a hash
// slot of their own.
func (c *Client) freezesKey() (string, string) {
	k := c.opt.prefix + ":freezes:{freezes}"
	return k, k + ":seq"
}

// AddFreeze adds a freeze of the jobs matching pattern until until, with
// note, and returns it with its id ("f1", "f2", ...) and its start (the
// store's time). until must be after the store's time (Redis TIME): else
// it returns ErrInvalid, and nothing is added. It returns ErrBadKey if the
// freezes' key holds another type, and ErrClosed after Close.
func (c *Client) AddFreeze(ctx context.Context, pattern string, until time.Time, note string) (Freeze, error) {
	st, now, rest, err := c.freeze(ctx, "add", strconv.FormatInt(until.UnixMilli(), 10), pattern, note)
	if err != nil {
		return Freeze{}, err
	}
	if st != 1 || len(rest) != 1 {
		return Freeze{}, fmt.Errorf("lock: freeze until %s: not after the store's time, %s: %w",
			until.UTC().Format(time.RFC3339), time.UnixMilli(now).UTC().Format(time.RFC3339), ErrInvalid)
	}
	return Freeze{ID: rest[0], Jobs: pattern, Until: time.UnixMilli(until.UnixMilli()), Created: time.UnixMilli(now), Note: note}, nil
}

// DeleteFreeze ends the freeze id at once. It returns ErrNoFreeze if there
// is no such freeze (or it has ended), and the errors of AddFreeze.
func (c *Client) DeleteFreeze(ctx context.Context, id string) error {
	st, _, _, err := c.freeze(ctx, "del", id)
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
	_, now, rest, err := c.freeze(ctx, "list")
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

func (c *Client) freeze(ctx context.Context, op string, args ...string) (int64, int64, []string, error) {
	if c.isClosed() {
		return 0, 0, nil, fmt.Errorf("lock: freezes: %w", ErrClosed)
	}
	key, seq := c.freezesKey()
	st, now, rest, err := c.be.freezes(ctx, key, seq, op, args...)
	if err != nil {
		if errors.Is(err, ErrBadKey) || strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return 0, 0, nil, fmt.Errorf("lock: key %q holds another type, not the freezes' hash: %w", key, ErrBadKey)
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

func (b *redisBackend) freezes(ctx context.Context, key, seq, op string, args ...string) (int64, int64, []string, error) {
	argv := make([]any, 0, 1+len(args))
	argv = append(argv, op)
	for _, a := range args {
		argv = append(argv, a)
	}
	v, err := freezeScript.Run(ctx, b.rdb, []string{key, seq}, argv...).Slice()
	if err != nil {
		return 0, 0, nil, err
	}
	if len(v) < 2 {
		return 0, 0, nil, fmt.Errorf("freeze.lua: a reply of %d values", len(v))
	}
	st, _ := v[0].(int64)
	now, _ := v[1].(int64)
	rest := make([]string, 0, len(v)-2)
	for _, x := range v[2:] {
		s, _ := x.(string)
		rest = append(rest, s)
	}
	return st, now, rest, nil
}

// memFreezes are the freezes at one key of a MemoryStore, and the counter
// of their ids.
type memFreezes struct {
	seq int64
	m   map[string]string // id -> "until\ncreated\njobs\nnote", as freeze.lua's hash
}

func (b *memoryBackend) freezes(ctx context.Context, key, _ string, op string, args ...string) (int64, int64, []string, error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, nil, err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixMilli()
	f := s.freeze[key]
	if f == nil {
		f = &memFreezes{m: make(map[string]string)}
		s.freeze[key] = f
	}
	var live []string
	for id, v := range f.m {
		if u, _ := strconv.ParseInt(strings.SplitN(v, "\n", 2)[0], 10, 64); u > now {
			live = append(live, id, v)
		} else {
			delete(f.m, id)
		}
	}
	switch op {
	case "add":
		u, _ := strconv.ParseInt(args[0], 10, 64)
		if u <= now {
			return 0, now, nil, nil
		}
		f.seq++
		id := "f" + strconv.FormatInt(f.seq, 10)
		f.m[id] = args[0] + "\n" + strconv.FormatInt(now, 10) + "\n" + args[1] + "\n" + args[2]
		return 1, now, []string{id}, nil
	case "del":
		if _, ok := f.m[args[0]]; !ok {
			return 0, now, nil, nil
		}
		delete(f.m, args[0])
		return 1, now, nil, nil
	}
	return 1, now, live, nil
}
