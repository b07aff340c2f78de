package main

import (
	"context"
	"slices"
	"testing"
)

// TestRun runs the benchmark small against a redis-server of its own: the
// scripts answer as their contracts say (run checks every reply, so an
// argument list that drifted from internal/core's fails here), and the
// lean scripts make the redis.calls they are meant to, no more.
func TestRun(t *testing.T) {
	b, err := run(context.Background(), &config{jobs: 3, rounds: 2, warm: 5, keep: 2, old: ""})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		"new: claim":                        7, // HMGET, PTTL, TIME, INCR, HSET and PEXPIRE of the lock, HSET of the ledger
		"new: finish with history":          6, // HGET, HMGET, XADD, HSET, DEL, PUBLISH
		"new: renew":                        2,
		"new: release":                      4,
		"Redisson lock (tryLockInnerAsync)": 3,
		"trivial (return 1)":                0,
	} {
		r := b.res[name]
		if r == nil || r.calls != int64(b.cfg.jobs*b.cfg.rounds) {
			t.Errorf("%s: %+v, want %d calls", name, r, b.cfg.jobs*b.cfg.rounds)
			continue
		}
		if got := float64(r.inner) / float64(r.calls); got != want {
			t.Errorf("%s: %.2f redis.calls per call (%v), want %v", name, got, r.innerBy, want)
		}
	}
	if !slices.Contains(b.order, "new: finish renewing both lifetimes, trimming by age") {
		t.Errorf("rows %v: no row for the finish that renews the lifetimes", b.order)
	}
	if r := b.res["new: finish renewing both lifetimes, trimming by age"]; r != nil && r.innerBy["xtrim"] != r.calls {
		t.Errorf("finish renewing the lifetimes: %v, want one XTRIM per call", r.innerBy)
	}
}
