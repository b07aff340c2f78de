package redistest_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

func TestClusterFailover(t *testing.T) {
	c := redistest.StartCluster(t)
	rdb := c.Client()
	ctx := context.Background()
	primaries, replicas := c.Primaries(), c.Replicas()
	if len(primaries) != 3 || len(replicas) != 3 {
		t.Fatalf("%d primaries and %d replicas, want 3 and 3", len(primaries), len(replicas))
	}
	if addrs := c.Addrs(); addrs[0] != primaries[0].Addr() || len(addrs) != 6 {
		t.Fatalf("Addrs() = %v, want the 6 nodes, primaries first", addrs)
	}

	const n = 1000
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		if err := rdb.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
	}
	total := int64(0)
	for _, p := range primaries {
		size := p.Do("DBSIZE").(int64)
		if size == 0 {
			t.Errorf("primary %s holds no keys", p.Addr())
		}
		total += size
	}
	if total != n {
		t.Errorf("the primaries hold %d keys, want %d", total, n)
	}

	victim := c.PrimaryForKey("k0")
	if got := victim.Do("GET", "k0"); got != "k0" {
		t.Fatalf("GET k0 on PrimaryForKey(k0) = %v", got)
	}
	var moved []string // keys of the victim's slots
	for i := range n {
		k := fmt.Sprintf("k%d", i)
		if c.PrimaryForKey(k) == victim {
			moved = append(moved, k)
		}
		if len(moved) == 20 {
			break
		}
	}

	i := slices.Index(primaries, victim)
	c.Failover(victim)
	if p := c.Primaries()[i]; p != replicas[i] {
		t.Fatalf("after Failover shard %d has primary %s, want the former replica %s", i, p.Addr(), replicas[i].Addr())
	}
	if got := c.PrimaryForKey("k0"); got != replicas[i] {
		t.Fatalf("after Failover PrimaryForKey(k0) = %s, want %s", got.Addr(), replicas[i].Addr())
	}
	testkit.Eventually(t, 10*time.Second, "SET k0 on the cluster after the failover", func() bool {
		return rdb.Set(ctx, "k0", "new", 0).Err() == nil
	})
	for _, k := range moved[1:] {
		got, err := rdb.Get(ctx, k).Result()
		if err != nil || got != k {
			t.Fatalf("GET %s after failover = %q, %v; want %q", k, got, err, k)
		}
		if err := rdb.Set(ctx, k, "new", 0).Err(); err != nil {
			t.Fatalf("SET %s after failover: %v", k, err)
		}
	}
	if got := replicas[i].Do("GET", "k0"); got != "new" {
		t.Fatalf("GET k0 on the new primary = %v, want new", got)
	}

	// The former primary comes back empty, rejoins as the replica of its
	// shard, and can take over again.
	if r := c.Replicas()[i]; r != victim {
		t.Fatalf("after Failover shard %d has replica %s, want the former primary %s", i, r.Addr(), victim.Addr())
	}
	victim.Restart()
	c.Failover(replicas[i])
	if p := c.PrimaryForKey("k0"); p != victim {
		t.Fatalf("after the second Failover PrimaryForKey(k0) = %s, want %s", p.Addr(), victim.Addr())
	}
	testkit.Eventually(t, 10*time.Second, "GET k0 on the cluster after the second failover", func() bool {
		return rdb.Get(ctx, "k0").Err() == nil
	})
	if got, err := rdb.Get(ctx, "k0").Result(); err != nil || got != "new" {
		t.Fatalf("GET k0 after the second failover = %q, %v; want new", got, err)
	}
}
