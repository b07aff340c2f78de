package core

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// The replicas' reports on both backends: a report is live for its ttl on
// the store's clock (Redis TIME on Redis), gone after it (or at once when
// the replica says it stopped), kept that way for keep, then dropped by
// the next call, a read or a report. A process's first report is its
// start; a live report of a process already stopped is ignored, one of a
// new process with the same id is not.
func TestReplicaReports(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	mem := NewMemoryStore()
	const key, drop = "lockcron:replicas:{replicas}", "lockcron:replicas:{replicas}:drop"
	for _, tc := range []struct {
		name string
		be   backend
		now  func(context.Context) time.Time // the store's clock
		kept func(context.Context) int       // how many reports the store keeps, read without dropping
	}{
		{"redis", newRedisBackend(rdb, func(string) {}, func(string) {}, nil, "me:", nil), func(ctx context.Context) time.Time {
			tm, err := rdb.Time(ctx).Result()
			if err != nil {
				t.Fatalf("TIME: %v", err)
			}
			return tm
		}, func(ctx context.Context) int {
			n, m := rdb.HLen(ctx, key).Val(), rdb.ZCard(ctx, drop).Val()
			if n != m {
				t.Errorf("%d reports, %d drop times", n, m)
			}
			return int(n)
		}},
		{"memory", &memoryBackend{s: mem, wake: func(string) {}}, func(context.Context) time.Time { return time.Now() }, func(context.Context) int {
			mem.mu.Lock()
			defer mem.mu.Unlock()
			return len(mem.reps[key])
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// keep differs from ttl, so that a drop keep after the gone time
			// is not one ttl after it.
			const ttl, keep = time.Second, 3 * time.Second
			find := func(rs []ReplicaReport, id string) (ReplicaReport, bool) {
				for _, r := range rs {
					if r.ID == id {
						return r, true
					}
				}
				return ReplicaReport{}, false
			}
			read := func() []ReplicaReport {
				t.Helper()
				rs, err := tc.be.replicas(ctx, key, drop)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				return rs
			}
			report := func(id, nonce, report string, ttl time.Duration) {
				t.Helper()
				if err := tc.be.reportReplica(ctx, key, drop, id, nonce, report, ttl, keep); err != nil {
					t.Fatalf("report of %s: %v", id, err)
				}
			}

			before := tc.now(ctx).Truncate(time.Millisecond)
			report("r1", "p1", `{"v":"one two"}`, time.Hour)
			after := tc.now(ctx)
			r1, ok := find(read(), "r1")
			if !ok || r1.Report != `{"v":"one two"}` || !r1.Gone.IsZero() || r1.Stopped || !r1.Started.Equal(r1.Seen) {
				t.Fatalf("r1's report: %+v", r1)
			}
			if r1.Seen.Before(before) || r1.Seen.After(after) {
				t.Errorf("r1 seen at %v: not on the store's clock, between %v and %v", r1.Seen, before, after)
			}
			report("r2", "p1", "two", ttl)
			report("r3", "p1", "three, stopping", 0)
			report("r3", "p1", "three, late", time.Hour) // sent before its stop, run after it: ignored
			report("r4", "p1", "four, stopping", 0)
			report("r4", "p2", "four again", time.Hour) // a new process with r4's id
			rs := read()
			r2, ok2 := find(rs, "r2")
			r3, ok3 := find(rs, "r3")
			r4, ok4 := find(rs, "r4")
			if len(rs) != 4 || !ok2 || !r2.Gone.IsZero() || r2.Stopped || !ok3 || !r3.Stopped || !r3.Gone.Equal(r3.Seen) || r3.Report != "three, stopping" {
				t.Fatalf("after r2's report and r3's stop: %+v", rs)
			}
			if !ok4 || r4.Stopped || !r4.Gone.IsZero() || r4.Report != "four again" || !r4.Started.Equal(r4.Seen) {
				t.Errorf("r4 reported by a new process after the old one stopped: %+v; want live, started at its report", r4)
			}
			report("r1", "p1", "one, later", time.Hour)
			if r, _ := find(read(), "r1"); r.Report != "one, later" || !r.Started.Equal(r1.Started) {
				t.Errorf("r1's second report: %+v; want started at its first, %v", r, r1.Started)
			}
			if tc.name == "redis" {
				for _, k := range []string{key, drop} {
					if pttl := rdb.PTTL(ctx, k).Val(); pttl <= 0 || pttl > time.Hour+keep {
						t.Errorf("%s expires in %v, want within %v", k, pttl, time.Hour+keep)
					}
				}
			}

			// r2 misses its next reports: gone ttl after its last one.
			testkit.Eventually(t, 10*time.Second, "r2 gone", func() bool {
				r, ok := find(read(), "r2")
				if !ok {
					t.Fatalf("r2 dropped before it was seen gone")
				}
				r2 = r
				return !r.Gone.IsZero()
			})
			if !r2.Gone.Equal(r2.Seen.Add(ttl)) || r2.Stopped {
				t.Errorf("r2 gone: %+v, want gone at %v, not stopped", r2, r2.Seen.Add(ttl))
			}
			// r3 is listed until keep after it stopped, then dropped by a read.
			testkit.Eventually(t, 10*time.Second, "r3 dropped", func() bool {
				before := tc.now(ctx).Truncate(time.Millisecond)
				if _, ok := find(read(), "r3"); ok {
					if !before.Before(r3.Gone.Add(keep)) {
						t.Fatalf("r3 still listed at %v, keep %v after it was gone at %v", before, keep, r3.Gone)
					}
					return false
				}
				if now := tc.now(ctx); now.Before(r3.Gone.Add(keep)) {
					t.Errorf("r3 dropped at %v, before %v (keep %v after it was gone at %v)", now, r3.Gone.Add(keep), keep, r3.Gone)
				}
				return true
			})
			// r2 is dropped keep after it was gone by a report of another
			// replica, without a read.
			testkit.Eventually(t, 10*time.Second, "r2 due", func() bool { return !tc.now(ctx).Before(r2.Gone.Add(keep)) })
			if n := tc.kept(ctx); n != 3 {
				t.Fatalf("%d reports kept before r1's report, want r1, r2 and r4", n)
			}
			report("r1", "p1", "one", time.Hour)
			if n := tc.kept(ctx); n != 2 {
				t.Errorf("%d reports kept after r1's report, want r1 and r4: r2 not dropped", n)
			}
			if rs := read(); len(rs) != 2 || rs[0].ID == "r2" || rs[1].ID == "r2" {
				t.Errorf("at the end: %+v, want r1 and r4", rs)
			}
		})
	}
}

// Bad calls of the Client's reports are refused with ErrInvalid, a key of
// another type with ErrBadKey, untouched.
func TestReplicaReportErrors(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ReportReplica(ctx, "", "x", time.Second); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty id: %v", err)
	}
	if err := c.ReportReplica(ctx, "r1", "x", 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("ttl 0: %v", err)
	}
	if err := c.ReplicaStopped(ctx, "", "x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("stop of an empty id: %v", err)
	}
	key, drop := c.replicasKey()
	for _, k := range []string{key, drop} {
		rdb.Del(ctx, key, drop)
		rdb.Set(ctx, k, "not a hash", 0)
		if err := c.ReportReplica(ctx, "r1", "x", time.Second); !errors.Is(err, ErrBadKey) {
			t.Errorf("a string at %s: %v", k, err)
		}
		if _, err := c.Replicas(ctx); !errors.Is(err, ErrBadKey) {
			t.Errorf("read, a string at %s: %v", k, err)
		}
		if n := rdb.Exists(ctx, key, drop).Val(); n != 1 {
			t.Errorf("a string at %s: %d keys now", k, n)
		}
		if v := rdb.Get(ctx, k).Val(); v != "not a hash" {
			t.Errorf("%s was touched: %q", k, v)
		}
	}
}
