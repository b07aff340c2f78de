package main

import (
	"context"
	"net"
	"strconv"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/lock"
)

// The embedded default's cost per job-tick: one Ledger.Claim of a new
// tick and its Finish with a history entry, through the public API, as
// the scheduler does per run. BenchmarkJobTickMemory is the in-memory
// backend (lock.NewMemory), whose Go code re-implements each Lua script;
// BenchmarkJobTickMiniredis runs the very same Lua scripts in-process
// instead, in miniredis (gopher-lua behind RESP), served on a net.Pipe
// through go-redis's Dialer, so that no port is opened: what the
// alternative to the Go twins would cost (internal/core's package doc).
//
//	go test -run '^$' -bench JobTick -benchtime 2s -count 3 .

func BenchmarkJobTickMemory(b *testing.B) {
	locks, err := lock.NewMemory()
	if err != nil {
		b.Fatal(err)
	}
	defer locks.Close()
	jobTicks(b, locks)
}

func BenchmarkJobTickMiniredis(b *testing.B) {
	m := miniredis.NewMiniRedis()
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{
		Dialer:   func(context.Context, string, string) (net.Conn, error) { return m.Dial() },
		Protocol: 2, // miniredis answers HELLO 3, but RESP2 is what the Redis runs use
	})
	defer rdb.Close()
	locks, err := lock.New(rdb)
	if err != nil {
		b.Fatal(err)
	}
	defer locks.Close()
	jobTicks(b, locks)
}

func jobTicks(b *testing.B, locks *lock.Client) {
	g, err := fleet.New(locks).Ledger("job", "job")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var tick int64
	b.ReportAllocs()
	for b.Loop() {
		tick++
		cl, err := g.Claim(ctx, tick, false)
		if err != nil {
			b.Fatal(err)
		}
		err = cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1,
			Entry: map[string]string{"tick": strconv.FormatInt(tick, 10), "outcome": "ran"}})
		if err != nil {
			b.Fatal(err)
		}
	}
}
