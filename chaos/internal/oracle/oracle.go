// Package oracle is the fault suite's record of what ran: a history of
// runs and a fenced resource, both on a redis-server of their own that no
// fault touches. The worker (the suite's exec job) and the suite's http job
// handler write to it; the checker reads it. It trusts nothing the system
// under test says about itself beyond what a job is given: its job, tick,
// fencing token, replica, attempt and trigger.
//
// Every write goes through one Lua script, so the server orders them: each
// gets a sequence number, and is accepted by the fence only if its token is
// at least the highest token the fence has accepted for the job.
package oracle

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"golang.org/x/sys/unix"
)

// Kinds of events.
const (
	Start = "start" // the run began
	Beat  = "beat"  // the run is still going (a write to the resource)
	End   = "end"   // the run ended; Event.Status says how
)

// Statuses of an End event.
const (
	StatusOK         = "ok"         // ran its course, every write accepted
	StatusFenced     = "fenced"     // a write of it was refused by the fence
	StatusTerminated = "terminated" // stopped early: SIGTERM, or its request cancelled
)

// Run is what a run knows of itself.
type Run struct {
	ID      string `json:"id"` // unique per run, chosen by the run
	Job     string `json:"job"`
	Tick    string `json:"tick"`    // LOCKCRON_TICK
	Trigger string `json:"trigger"` // LOCKCRON_TRIGGER, empty for scheduled runs
	Replica string `json:"replica"`
	Token   int64  `json:"token"`
	Attempt int    `json:"attempt"`
	PID     int    `json:"pid,omitempty"` // the worker's process id; 0 for http runs
}

// Event is one write of a run, as the oracle stored it.
type Event struct {
	Run
	Kind     string `json:"kind"`
	Status   string `json:"status,omitempty"`
	Mono     int64  `json:"mono"` // CLOCK_MONOTONIC, ns, when the write was sent
	Seq      int64  `json:"-"`    // the server's order of writes
	Accepted bool   `json:"-"`    // whether the fence took the write
}

// Mono returns CLOCK_MONOTONIC in nanoseconds: one clock for every process
// on the machine, unlike Go's per-process monotonic readings.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(fmt.Sprintf("oracle: clock_gettime: %v", err))
	}
	return ts.Nano()
}

// write fences and records one event. KEYS: the job's fence, the sequence,
// the event list. ARGV: token, the event's JSON. The reply is {seq, accepted}.
var write = redis.NewScript(`
local last = redis.call('GET', KEYS[1])
local seq = redis.call('INCR', KEYS[2])
local ok = 0
if not last or tonumber(ARGV[1]) >= tonumber(last) then
  redis.call('SET', KEYS[1], ARGV[1])
  ok = 1
end
redis.call('RPUSH', KEYS[3], seq .. '|' .. ok .. '|' .. ARGV[2])
return {seq, ok}
`)

const (
	seqKey    = "oracle:seq"
	eventsKey = "oracle:events"
)

func fenceKey(job string) string { return "oracle:fence:" + job }

// Oracle is a client of the oracle's server.
type Oracle struct{ rdb *redis.Client }

// Open returns a client of the oracle at addr (host:port).
func Open(addr string) *Oracle {
	return &Oracle{rdb: redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})}
}

// Close closes the client.
func (o *Oracle) Close() error { return o.rdb.Close() }

// Write records an event of run and reports whether the fence accepted it.
// It is not retried: a write whose reply was lost would count twice.
func (o *Oracle) Write(ctx context.Context, run Run, kind, status string) (bool, error) {
	ev := Event{Run: run, Kind: kind, Status: status, Mono: Mono()}
	b, err := json.Marshal(ev)
	if err != nil {
		return false, err
	}
	res, err := write.Run(ctx, o.rdb, []string{fenceKey(run.Job), seqKey, eventsKey}, run.Token, b).Int64Slice()
	if err != nil {
		return false, fmt.Errorf("oracle: write %s of %s: %w", kind, run.ID, err)
	}
	return res[1] == 1, nil
}

// Events returns every event recorded, in the server's order.
func (o *Oracle) Events(ctx context.Context) ([]Event, error) {
	return o.EventsFrom(ctx, 0)
}

func parse(raw []string) ([]Event, error) {
	evs := make([]Event, 0, len(raw))
	for _, r := range raw {
		seq, rest, ok1 := strings.Cut(r, "|")
		acc, js, ok2 := strings.Cut(rest, "|")
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("oracle: malformed event %q", r)
		}
		var ev Event
		if err := json.Unmarshal([]byte(js), &ev); err != nil {
			return nil, fmt.Errorf("oracle: event %q: %w", r, err)
		}
		n, err := strconv.ParseInt(seq, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("oracle: event %q: %w", r, err)
		}
		ev.Seq, ev.Accepted = n, acc == "1"
		evs = append(evs, ev)
	}
	return evs, nil
}

// Reset forgets every event and fence, for the next scenario.
func (o *Oracle) Reset(ctx context.Context) error {
	return o.rdb.FlushAll(ctx).Err()
}

// EventsFrom returns the events recorded after the first n, in order.
func (o *Oracle) EventsFrom(ctx context.Context, n int) ([]Event, error) {
	raw, err := o.rdb.LRange(ctx, eventsKey, int64(n), -1).Result()
	if err != nil {
		return nil, fmt.Errorf("oracle: read events: %w", err)
	}
	return parse(raw)
}
