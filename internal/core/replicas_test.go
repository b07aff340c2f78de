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
// the next call.
func TestReplicaReports(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	for _, tc := range []struct {
		name string
		be   backend
		now  func(context.Context) time.Time // the store's clock
	}{
		{"redis", newRedisBackend(rdb, func(string) {}, func(string) {}, nil, "me:", nil), func(ctx context.Context) time.Time {
			tm, err := rdb.Time(ctx).Result()
			if err != nil {
				t.Fatalf("TIME: %v", err)
			}
			return tm
		}},
		{"memory", &memoryBackend{s: NewMemoryStore(), wake: func(string) {}}, func(context.Context) time.Time { return time.Now() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const key = "lockcron:replicas"
			const ttl, keep = 2 * time.Second, 2 * time.Second
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
				rs, err := tc.be.replicas(ctx, key, "", "", 0, keep)
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				return rs
			}

			before := tc.now(ctx).Truncate(time.Millisecond)
			rs, err := tc.be.replicas(ctx, key, "r1", `{"v":"one two"}`, time.Hour, keep)
			after := tc.now(ctx)
			r1, ok := find(rs, "r1")
			if err != nil || !ok || r1.Report != `{"v":"one two"}` || !r1.Gone.IsZero() || r1.Stopped {
				t.Fatalf("r1's report: %+v, %v", rs, err)
			}
			if r1.Seen.Before(before) || r1.Seen.After(after) {
				t.Errorf("r1 seen at %v: not on the store's clock, between %v and %v", r1.Seen, before, after)
			}
			if _, err := tc.be.replicas(ctx, key, "r2", "two", ttl, keep); err != nil {
				t.Fatal(err)
			}
			if err := func() error { _, err := tc.be.replicas(ctx, key, "r3", "three, stopping", 0, keep); return err }(); err != nil {
				t.Fatal(err)
			}
			rs = read()
			r2, ok2 := find(rs, "r2")
			r3, ok3 := find(rs, "r3")
			if len(rs) != 3 || !ok2 || !r2.Gone.IsZero() || r2.Stopped || !ok3 || !r3.Stopped || !r3.Gone.Equal(r3.Seen) || r3.Report != "three, stopping" {
				t.Fatalf("after r2's report and r3's stop: %+v", rs)
			}
			if tc.name == "redis" {
				if pttl := rdb.PTTL(ctx, key).Val(); pttl <= 0 || pttl > time.Hour+keep {
					t.Errorf("the reports' key expires in %v, want within %v", pttl, time.Hour+keep)
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
			// Each is dropped keep after it is gone; r1 stays.
			for _, id := range []string{"r3", "r2"} {
				var gone time.Time
				testkit.Eventually(t, 10*time.Second, id+" dropped", func() bool {
					r, ok := find(read(), id)
					if ok {
						gone = r.Gone
					}
					return !ok
				})
				if now := tc.now(ctx); now.Before(gone.Add(keep)) {
					t.Errorf("%s dropped at %v, before %v (keep %v after it was gone at %v)", id, now, gone.Add(keep), keep, gone)
				}
			}
			if rs := read(); len(rs) != 1 || rs[0].ID != "r1" || !rs[0].Gone.IsZero() {
				t.Errorf("at the end: %+v, want r1 alone, live", rs)
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
	if _, err := c.ReportReplica(ctx, "", "x", time.Second); !errors.Is(err, ErrInvalid) {
		t.Errorf("empty id: %v", err)
	}
	if _, err := c.ReportReplica(ctx, "r1", "x", 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("ttl 0: %v", err)
	}
	if err := c.ReplicaStopped(ctx, "", "x"); !errors.Is(err, ErrInvalid) {
		t.Errorf("stop of an empty id: %v", err)
	}
	rdb.Set(ctx, c.replicasKey(), "not a hash", 0)
	if _, err := c.ReportReplica(ctx, "r1", "x", time.Second); !errors.Is(err, ErrBadKey) {
		t.Errorf("a string at the key: %v", err)
	}
	if _, err := c.Replicas(ctx); !errors.Is(err, ErrBadKey) {
		t.Errorf("read, a string at the key: %v", err)
	}
	if v := rdb.Get(ctx, c.replicasKey()).Val(); v != "not a hash" {
		t.Errorf("the key was touched: %q", v)
	}
}
