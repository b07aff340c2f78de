package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

func TestSentinelFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	c := s.Client()
	ctx := context.Background()
	old, replica := s.Primary(), s.Replica()
	if old == replica {
		t.Fatal("Primary and Replica are the same server")
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := old.Do("GET", "k"); got != "v" {
		t.Fatalf("GET k on the primary = %v, want v", got)
	}

	s.Failover()
	if p := s.Primary(); p != replica {
		t.Fatalf("after Failover the primary is %s, want the former replica %s", p.Addr(), replica.Addr())
	}
	if got := replica.Info("replication")["role"]; got != "master" {
		t.Fatalf("the new primary has role %s", got)
	}
	testkit.Eventually(t, 10*time.Second, "SET k2 through Sentinel after the failover", func() bool {
		return c.Set(ctx, "k2", "v2", 0).Err() == nil
	})
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k after failover = %q, %v; want v", got, err)
	}
	if got := replica.Do("GET", "k2"); got != "v2" {
		t.Fatalf("GET k2 on the new primary = %v, want v2", got)
	}

	// The former primary comes back empty, as a replica, and can take over
	// again.
	if r := s.Replica(); r != old {
		t.Fatalf("after Failover the replica is %s, want the former primary %s", r.Addr(), old.Addr())
	}
	old.Restart()
	s.Failover()
	if p := s.Primary(); p != old {
		t.Fatalf("after the second Failover the primary is %s, want %s", p.Addr(), old.Addr())
	}
	testkit.Eventually(t, 10*time.Second, "SET k3 through Sentinel after the failover", func() bool {
		return c.Set(ctx, "k3", "v3", 0).Err() == nil
	})
	if got, err := c.MGet(ctx, "k", "k2").Result(); err != nil || got[0] != "v" || got[1] != "v2" {
		t.Fatalf("MGET k k2 after the second failover = %v, %v; want [v v2]", got, err)
	}
}

func TestSentinelForceFailover(t *testing.T) {
	s := redistest.StartSentinel(t)
	c := s.Client()
	ctx := context.Background()
	old, replica := s.Primary(), s.Replica()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	s.ForceFailover()
	if p := s.Primary(); p != replica {
		t.Fatalf("after ForceFailover the primary is %s, want %s", p.Addr(), replica.Addr())
	}
	if r := s.Replica(); r != old {
		t.Fatalf("after ForceFailover the replica is %s, want the former primary %s", r.Addr(), old.Addr())
	}
	if got := old.Info("replication")["master_link_status"]; got != "up" {
		t.Fatalf("the former primary's master_link_status is %s", got)
	}
	testkit.Eventually(t, 10*time.Second, "SET k2 through Sentinel after the failover", func() bool {
		return c.Set(ctx, "k2", "v2", 0).Err() == nil
	})
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET k after failover = %q, %v; want v", got, err)
	}
	if got := replica.Do("GET", "k2"); got != "v2" {
		t.Fatalf("GET k2 on the new primary = %v, want v2", got)
	}
}
