package redistest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	clusterSlots  = 16384 // hash slots of a Redis Cluster
	clusterShards = 3
)

// Cluster is a Redis Cluster of three primaries, each with one replica. The
// nodes are child processes of the test binary on free loopback ports, and
// they think a node down after 1 s without an answer (cluster-node-timeout),
// so that a failover takes about 2 s. Shard i serves the i-th third of the
// hash slots. Its methods are safe for concurrent use.
type Cluster struct {
	t      testing.TB
	shards [clusterShards][2]*Server // started as the primary of shard i and its replica
	ids    map[*Server]string

	mu      sync.Mutex
	clients []*redis.ClusterClient // made by Client: told of each failover
}

// StartCluster starts a Cluster for the test, and returns once every node
// reports cluster_state:ok and knows all six nodes in their roles, and every
// replica is in sync. The processes are killed when the test ends.
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	c, err := LaunchCluster()
	if err != nil {
		t.Fatal(err)
	}
	c.t = t
	for _, srv := range c.nodes() {
		srv.t = t
	}
	t.Cleanup(c.Close)
	return c
}

// LaunchCluster is StartCluster for programs that are not tests: the caller
// must Close the cluster. Its methods panic where a test would fail.
func LaunchCluster() (*Cluster, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	c := &Cluster{ids: make(map[*Server]string)}
	if err := c.launch(bin); err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: cluster: %w", err)
	}
	return c, nil
}

func (c *Cluster) launch(bin string) error {
	args := append(dataArgs(),
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "1000",
		"--cluster-announce-ip", "127.0.0.1",
	)
	for i := range c.shards {
		for j := range c.shards[i] {
			srv, err := launch(&Server{bin: bin, cluster: true, args: args}, "")
			if err != nil {
				return err
			}
			c.shards[i][j] = srv
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// As redis-cli --cluster create does: give the nodes distinct config
	// epochs, slots to the primaries, and have them all meet the first.
	first := c.shards[0][0]
	for n, srv := range c.nodes() {
		a := srv.admin()
		id, err := a.ClusterMyID(ctx).Result()
		if err == nil {
			c.ids[srv] = id
			err = a.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", n+1).Err()
		}
		if i, role := c.shard(srv); err == nil && role == 0 {
			lo, hi := slotRange(i)
			err = a.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
		}
		if err == nil && srv != first {
			// The bus port is not port+10000: name it.
			srv.mu.Lock()
			port, busPort := srv.port, srv.busPort
			srv.mu.Unlock()
			b := first.admin()
			err = b.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", port, busPort).Err()
			_ = b.Close()
		}
		_ = a.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", srv.Addr(), err)
		}
	}
	// A node can only replicate a primary it knows.
	err := poll(failoverTimeout, func(ctx context.Context) error {
		for _, srv := range c.nodes() {
			nodes, err := clusterNodes(ctx, srv)
			if err != nil {
				return err
			}
			if len(nodes) != len(c.ids) {
				return fmt.Errorf("%s knows %d nodes, want %d", srv.Addr(), len(nodes), len(c.ids))
			}
			for _, n := range nodes {
				if n.has("handshake") || n.has("noaddr") || n.link != "connected" {
					return fmt.Errorf("%s sees %s flags %s link %s", srv.Addr(), n.addr, strings.Join(n.flags, ","), n.link)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	ctx, cancel = context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, shard := range c.shards {
		a := shard[1].admin()
		err := a.ClusterReplicate(ctx, c.ids[shard[0]]).Err()
		_ = a.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER REPLICATE on %s: %w", shard[1].Addr(), err)
		}
	}
	return poll(failoverTimeout, c.ok(c.nodes()))
}

// slotRange returns the first and last slot of shard i.
func slotRange(i int) (lo, hi int) {
	return i * clusterSlots / clusterShards, (i+1)*clusterSlots/clusterShards - 1
}

// Close kills every node and removes their directories.
func (c *Cluster) Close() {
	for _, srv := range c.nodes() {
		srv.Close()
	}
}

// nodes returns the nodes started so far, in the order they were started:
// shard by shard, primary first.
func (c *Cluster) nodes() []*Server {
	var all []*Server
	for _, shard := range c.shards {
		for _, srv := range shard {
			if srv != nil {
				all = append(all, srv)
			}
		}
	}
	return all
}

// shard returns the shard of srv, and 0 if it was started as its primary
// or 1 if as its replica.
func (c *Cluster) shard(srv *Server) (i, role int) {
	for i, shard := range c.shards {
		for role, s := range shard {
			if s == srv {
				return i, role
			}
		}
	}
	return -1, -1
}

func (c *Cluster) fatalf(format string, args ...any) {
	if c.t != nil {
		c.t.Helper()
		c.t.Fatalf(format, args...)
	}
	panic(fmt.Sprintf(format, args...))
}

func (c *Cluster) tHelper() {
	if c.t != nil {
		c.t.Helper()
	}
}

// Addrs returns the addresses of every node, host:port on the loopback
// interface: those of Primaries first, then those of Replicas.
func (c *Cluster) Addrs() []string {
	c.tHelper()
	primaries, replicas := c.roles()
	var addrs []string
	for _, srv := range append(primaries, replicas...) {
		addrs = append(addrs, srv.Addr())
	}
	return addrs
}

// ClusterOptions returns go-redis options for a client of the cluster, seeded
// with Addrs. ContextTimeoutEnabled is on, as in Server.Options.
//
// go-redis learns the slot map again only every minute or on a MOVED reply,
// so a client keeps sending a dead primary's slots to it for up to a minute
// after its replica has taken over. The clients that Client makes are told
// to reload the map after each Failover; one made from these options is not.
// (go-redis v9.18 added ClusterStateReloadInterval for this; the library
// module requires an older go-redis.)
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	c.tHelper()
	return &redis.ClusterOptions{
		Addrs:                 c.Addrs(),
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
	}
}

// Client returns a new go-redis cluster client, closed when the test ends,
// that reloads the slot map after each Failover.
func (c *Cluster) Client() *redis.ClusterClient {
	c.tHelper()
	rdb := redis.NewClusterClient(c.ClusterOptions())
	c.mu.Lock()
	c.clients = append(c.clients, rdb)
	c.mu.Unlock()
	if c.t != nil {
		c.t.Cleanup(func() { _ = rdb.Close() })
	}
	return rdb
}

// reload has the clients that Client made learn the slot map again.
func (c *Cluster) reload() {
	c.mu.Lock()
	clients := slices.Clone(c.clients)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	for _, rdb := range clients {
		rdb.ReloadState(ctx)
	}
}

// Primaries returns the three nodes that serve the hash slots, as the
// cluster reports them: Primaries()[i] serves the i-th third of the slots.
// A primary that has been killed stays in the list until its replica has
// taken over.
func (c *Cluster) Primaries() []*Server {
	c.tHelper()
	primaries, _ := c.roles()
	return primaries
}

// Replicas returns the nodes that are not Primaries: Replicas()[i] is the
// other node of shard i. After Failover(p), p is the replica of its shard,
// though it is no longer running; Restart brings it back empty, and it then
// rejoins the cluster as a replica of its former replica.
func (c *Cluster) Replicas() []*Server {
	c.tHelper()
	_, replicas := c.roles()
	return replicas
}

// PrimaryForKey returns the primary that serves key's hash slot.
func (c *Cluster) PrimaryForKey(key string) *Server {
	c.tHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv, nodes, err := c.view(ctx)
	if err != nil {
		c.fatalf("redistest: %v", err)
	}
	a := srv.admin()
	defer a.Close()
	slot, err := a.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		c.fatalf("redistest: CLUSTER KEYSLOT on %s: %v", srv.Addr(), err)
	}
	for _, n := range nodes {
		if n.serves(int(slot)) {
			if p := c.node(n.addr); p != nil {
				return p
			}
		}
	}
	c.fatalf("redistest: %s knows no node with slot %d", srv.Addr(), slot)
	return nil
}

// roles asks a running node which node of each shard serves its slots.
func (c *Cluster) roles() (primaries, replicas []*Server) {
	c.tHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv, nodes, err := c.view(ctx)
	if err != nil {
		c.fatalf("redistest: %v", err)
	}
	for i, shard := range c.shards {
		lo, _ := slotRange(i)
		p := slices.IndexFunc(nodes, func(n clusterNode) bool { return n.serves(lo) })
		if p < 0 {
			c.fatalf("redistest: %s knows no node with slot %d", srv.Addr(), lo)
		}
		switch nodes[p].addr {
		case shard[0].Addr():
			primaries, replicas = append(primaries, shard[0]), append(replicas, shard[1])
		case shard[1].Addr():
			primaries, replicas = append(primaries, shard[1]), append(replicas, shard[0])
		default:
			c.fatalf("redistest: %s says %s serves slot %d, not a node of shard %d", srv.Addr(), nodes[p].addr, lo, i)
		}
	}
	return primaries, replicas
}

// view returns CLUSTER NODES from the first running node that answers
// within a second.
func (c *Cluster) view(ctx context.Context) (*Server, []clusterNode, error) {
	var errs []error
	for _, srv := range c.nodes() {
		if !srv.running() {
			continue
		}
		nctx, cancel := context.WithTimeout(ctx, time.Second)
		nodes, err := clusterNodes(nctx, srv)
		cancel()
		if err == nil {
			return srv, nodes, nil
		}
		errs = append(errs, err)
	}
	return nil, nil, fmt.Errorf("no node of the cluster answers: %w", errors.Join(errs...))
}

func (c *Cluster) node(addr string) *Server {
	for _, srv := range c.nodes() {
		if srv.Addr() == addr {
			return srv
		}
	}
	return nil
}

// Failover kills primary with SIGKILL, and waits until its replica has taken
// over its slots and every running node reports cluster_state:ok and sees
// the new roles. Before the kill it waits until the replica is in sync and
// has applied every write primary took before the call, so that no
// acknowledged write is lost; writes that race with Failover may be lost,
// as in a real crash. It fails the test if any of this takes more than 15 s.
func (c *Cluster) Failover(primary *Server) {
	c.tHelper()
	primaries, replicas := c.roles()
	i := slices.Index(primaries, primary)
	if i < 0 {
		c.fatalf("redistest: failover: %s is not a primary", primary.Addr())
	}
	next := replicas[i]
	if err := c.failover(primary, next); err != nil {
		c.fatalf("redistest: failover from %s to %s: %v", primary.Addr(), next.Addr(), err)
	}
	c.reload()
}

func (c *Cluster) failover(old, next *Server) error {
	if err := caughtUp(old, next); err != nil {
		return err
	}
	old.Kill()
	var up []*Server
	for _, srv := range c.nodes() {
		if srv.running() {
			up = append(up, srv)
		}
	}
	return poll(failoverTimeout, c.ok(up))
}

// ok returns a check that each of nodes reports cluster_state:ok, knows all
// six nodes, and sees in each shard a running primary that serves the
// shard's slots with the other node, if running, as its replica; and that
// each replica among nodes is in sync.
func (c *Cluster) ok(nodes []*Server) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for _, srv := range nodes {
			a := srv.admin()
			err := c.nodeOK(ctx, srv, a)
			_ = a.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
}

func (c *Cluster) nodeOK(ctx context.Context, srv *Server, a *redis.Client) error {
	info, err := a.ClusterInfo(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLUSTER INFO on %s: %w", srv.Addr(), err)
	}
	if !strings.Contains(info, "cluster_state:ok") {
		return fmt.Errorf("%s: cluster_state is not ok", srv.Addr())
	}
	nodes, err := clusterNodes(ctx, srv)
	if err != nil {
		return err
	}
	if len(nodes) != len(c.ids) {
		return fmt.Errorf("%s knows %d nodes, want %d", srv.Addr(), len(nodes), len(c.ids))
	}
	byAddr := make(map[string]clusterNode)
	for _, n := range nodes {
		byAddr[n.addr] = n
	}
	for i, shard := range c.shards {
		lo, hi := slotRange(i)
		// The primary serves all the shard's slots and nothing else.
		j := slices.IndexFunc(shard[:], func(s *Server) bool {
			n := byAddr[s.Addr()]
			return n.has("master") && slices.Equal(n.slots, [][2]int{{lo, hi}})
		})
		if j < 0 || !shard[j].running() {
			return fmt.Errorf("%s sees no running primary for slots %d-%d", srv.Addr(), lo, hi)
		}
		p, r := shard[j], shard[1-j]
		if n := byAddr[p.Addr()]; n.failing() {
			return fmt.Errorf("%s sees primary %s flags %s", srv.Addr(), p.Addr(), strings.Join(n.flags, ","))
		}
		if !r.running() {
			continue
		}
		if n := byAddr[r.Addr()]; !n.has("slave") || n.master != c.ids[p] || n.failing() {
			return fmt.Errorf("%s sees %s flags %s, want a replica of %s", srv.Addr(), r.Addr(), strings.Join(n.flags, ","), p.Addr())
		}
		if r == srv {
			if err := inSync(ctx, a, p.Addr()); err != nil {
				return err
			}
		}
	}
	return nil
}

// clusterNode is a line of CLUSTER NODES.
type clusterNode struct {
	id     string
	addr   string // host:port
	flags  []string
	master string // the primary's id, if a replica
	link   string
	slots  [][2]int
}

func (n clusterNode) has(flag string) bool { return slices.Contains(n.flags, flag) }

func (n clusterNode) failing() bool { return n.has("fail") || n.has("fail?") }

func (n clusterNode) serves(slot int) bool {
	return n.has("master") && slices.ContainsFunc(n.slots, func(r [2]int) bool { return r[0] <= slot && slot <= r[1] })
}

// clusterNodes runs CLUSTER NODES on srv and parses its lines, which read
// <id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv>
// <config-epoch> <link-state> <slot>...
func clusterNodes(ctx context.Context, srv *Server) ([]clusterNode, error) {
	a := srv.admin()
	defer a.Close()
	text, err := a.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER NODES on %s: %w", srv.Addr(), err)
	}
	var nodes []clusterNode
	for line := range strings.Lines(text) {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := clusterNode{id: f[0], addr: addr, flags: strings.Split(f[2], ","), master: f[3], link: f[7]}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") { // a slot being imported or migrated
				continue
			}
			lo, hi, ok := strings.Cut(s, "-")
			if !ok {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err := errors.Join(err1, err2); err != nil {
				return nil, fmt.Errorf("CLUSTER NODES on %s: slots %q: %w", srv.Addr(), s, err)
			}
			n.slots = append(n.slots, [2]int{l, h})
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}
