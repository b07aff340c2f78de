package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// masterName is the name under which the sentinels of a Sentinel monitor its
// primary.
const masterName = "lockcron"

// Sentinel is a Redis Sentinel deployment: a primary, one replica, and three
// sentinels that monitor the primary under MasterName with quorum 2. They are
// child processes of the test binary on free loopback ports, with
// persistence off, tuned for fast failover: a sentinel thinks the primary
// down after 500 ms without an answer (down-after-milliseconds), and a
// failover takes about 2 s. A failover times out after 2 s
// (failover-timeout), and the sentinels start no other for twice that
// long. Its methods are safe for concurrent use.
type Sentinel struct {
	t         testing.TB
	nodes     [2]*Server // started as the primary and its replica
	sentinels [3]*Server
}

// sentinelBinary returns the program that runs a sentinel, with --sentinel:
// REDIS_SENTINEL if set, else redis-sentinel from PATH, else redis-server
// (see Binary).
func sentinelBinary() (string, error) {
	if p := os.Getenv("REDIS_SENTINEL"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("redis-sentinel"); err == nil {
		return p, nil
	}
	return Binary()
}

// StartSentinel starts a Sentinel deployment for the test and returns once
// the replica is in sync and every sentinel knows the primary, the replica
// and the other two sentinels, so that a failover can start at once. The
// processes are killed when the test ends.
func StartSentinel(t testing.TB) *Sentinel {
	t.Helper()
	s, err := LaunchSentinel()
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	for _, srv := range s.servers() {
		srv.t = t
	}
	t.Cleanup(s.Close)
	return s
}

// LaunchSentinel is StartSentinel for programs that are not tests: the caller
// must Close the deployment. Its methods panic where a test would fail.
func LaunchSentinel() (*Sentinel, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	sbin, err := sentinelBinary()
	if err != nil {
		return nil, err
	}
	s := &Sentinel{}
	if err := s.launch(bin, sbin); err != nil {
		s.Close()
		return nil, fmt.Errorf("redistest: sentinel: %w", err)
	}
	return s, nil
}

func (s *Sentinel) launch(bin, sbin string) error {
	for i := range s.nodes {
		srv, err := launch(&Server{bin: bin, args: dataArgs()}, "")
		if err != nil {
			return err
		}
		s.nodes[i] = srv
	}
	primary, replica := s.nodes[0], s.nodes[1]
	if err := replicate(replica, primary); err != nil {
		return err
	}

	host, port, _ := net.SplitHostPort(primary.Addr())
	conf := strings.Join([]string{
		"sentinel monitor " + masterName + " " + host + " " + port + " 2",
		"sentinel down-after-milliseconds " + masterName + " 500",
		"sentinel failover-timeout " + masterName + " 2000",
		"sentinel parallel-syncs " + masterName + " 1",
		"sentinel announce-ip 127.0.0.1",
		"",
	}, "\n")
	for i := range s.sentinels {
		srv, err := launch(&Server{bin: sbin, args: []string{"--sentinel"}}, conf)
		if err != nil {
			return err
		}
		s.sentinels[i] = srv
		if err := tune(srv); err != nil {
			return err
		}
	}
	return poll(failoverTimeout, s.ready(primary, replica))
}

// tune shortens the periods of a sentinel, which its config cannot set: it
// asks the instances for INFO every second instead of every 10 s, and
// says hello to the other sentinels every 500 ms instead of every 2 s. Each
// of its failovers takes 4 hello periods less.
func tune(sentinel *Server) error {
	c := sentinel.admin()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := c.Do(ctx, "SENTINEL", "DEBUG", "INFO-PERIOD", 1000, "PUBLISH-PERIOD", 500).Err()
	if err != nil {
		return fmt.Errorf("SENTINEL DEBUG on %s: %w", sentinel.Addr(), err)
	}
	return nil
}

// dataArgs are the arguments of the data nodes of a Sentinel or Cluster:
// start a full sync at once instead of after the default 5 s, and announce
// the loopback address.
func dataArgs() []string {
	return []string{
		"--repl-diskless-sync-delay", "0",
		"--replica-announce-ip", "127.0.0.1",
	}
}

// replicate makes replica a replica of primary and waits until it is in sync.
func replicate(replica, primary *Server) error {
	c := replica.admin()
	defer c.Close()
	host, port, _ := net.SplitHostPort(primary.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		return fmt.Errorf("REPLICAOF on %s: %w", replica.Addr(), err)
	}
	return poll(failoverTimeout, func(ctx context.Context) error {
		return inSync(ctx, c, primary.Addr())
	})
}

// inSync checks that the server of c replicates primary with its link up.
func inSync(ctx context.Context, c *redis.Client, primary string) error {
	repl, err := info(ctx, c, "replication")
	if err != nil {
		return err
	}
	if repl["role"] != "slave" || net.JoinHostPort(repl["master_host"], repl["master_port"]) != primary || repl["master_link_status"] != "up" {
		return fmt.Errorf("%s is not in sync with %s: role:%s master %s:%s link %s", c.Options().Addr, primary,
			repl["role"], repl["master_host"], repl["master_port"], repl["master_link_status"])
	}
	return nil
}

// caughtUp waits until replica has applied every write primary took before
// the call, so that killing primary loses none of them.
func caughtUp(primary, replica *Server) error {
	p, r := primary.admin(), replica.admin()
	defer p.Close()
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	repl, err := info(ctx, p, "replication")
	cancel()
	if err != nil {
		return err
	}
	want := repl["master_repl_offset"]
	return poll(failoverTimeout, func(ctx context.Context) error {
		if err := inSync(ctx, r, primary.Addr()); err != nil {
			return err
		}
		repl, err := info(ctx, r, "replication")
		if err != nil {
			return err
		}
		if offset(repl["slave_repl_offset"]) < offset(want) {
			return fmt.Errorf("%s at replication offset %s, want %s", replica.Addr(), repl["slave_repl_offset"], want)
		}
		return nil
	})
}

func offset(s string) int64 {
	var n int64
	_, _ = fmt.Sscan(s, &n)
	return n
}

// ready returns a check that every running sentinel sees primary up,
// replica in sync, and the other running sentinels: then a failover can
// start.
func (s *Sentinel) ready(primary, replica *Server) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var up []*Server
		for _, srv := range s.sentinels {
			if srv.running() {
				up = append(up, srv)
			}
		}
		for _, srv := range up {
			if err := sentinelSees(ctx, srv, primary.Addr(), []string{replica.Addr()}, len(up)-1); err != nil {
				return err
			}
		}
		return nil
	}
}

// sentinelSees checks that the sentinel srv has primary as its master, up
// and not failing over, with the given replicas (link up) and at least
// peers other sentinels.
func sentinelSees(ctx context.Context, srv *Server, primary string, replicas []string, peers int) error {
	c := redis.NewSentinelClient(srv.adminOptions())
	defer c.Close()
	m, err := c.Master(ctx, masterName).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: %w", srv.Addr(), err)
	}
	if addr := net.JoinHostPort(m["ip"], m["port"]); addr != primary || m["flags"] != "master" {
		return fmt.Errorf("sentinel %s: master %s flags %s, want %s flags master", srv.Addr(), addr, m["flags"], primary)
	}
	rs, err := c.Replicas(ctx, masterName).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: %w", srv.Addr(), err)
	}
	ok := make(map[string]bool)
	for _, r := range rs {
		if r["flags"] == "slave" && r["master-link-status"] == "ok" {
			ok[net.JoinHostPort(r["ip"], r["port"])] = true
		}
	}
	for _, r := range replicas {
		if !ok[r] {
			return fmt.Errorf("sentinel %s: replica %s not in sync in %v", srv.Addr(), r, rs)
		}
	}
	ss, err := c.Sentinels(ctx, masterName).Result()
	if err != nil {
		return fmt.Errorf("sentinel %s: %w", srv.Addr(), err)
	}
	n := 0
	for _, p := range ss {
		if !slices.ContainsFunc(strings.Split(p["flags"], ","), func(f string) bool {
			return f == "s_down" || f == "o_down" || f == "disconnected"
		}) {
			n++
		}
	}
	if n < peers {
		return fmt.Errorf("sentinel %s: knows %d other sentinels up, want %d", srv.Addr(), n, peers)
	}
	return nil
}

// Close kills the sentinels, then the primary and the replica, and removes
// their directories.
func (s *Sentinel) Close() {
	for _, srv := range s.servers() {
		srv.Close()
	}
}

// servers returns the processes started so far, sentinels first.
func (s *Sentinel) servers() []*Server {
	var all []*Server
	for _, srv := range slices.Concat(s.sentinels[:], s.nodes[:]) {
		if srv != nil {
			all = append(all, srv)
		}
	}
	return all
}

func (s *Sentinel) fatalf(format string, args ...any) {
	if s.t != nil {
		s.t.Helper()
		s.t.Fatalf(format, args...)
	}
	panic(fmt.Sprintf(format, args...))
}

// MasterName returns the name under which the sentinels monitor the primary,
// "lockcron".
func (s *Sentinel) MasterName() string { return masterName }

// SentinelAddrs returns the sentinels' addresses, host:port on the loopback
// interface.
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, srv := range s.sentinels {
		addrs[i] = srv.Addr()
	}
	return addrs
}

// FailoverOptions returns go-redis options for a client that finds the
// primary through the sentinels. ContextTimeoutEnabled is on, as in
// Server.Options.
func (s *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:            masterName,
		SentinelAddrs:         s.SentinelAddrs(),
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
	}
}

// Client returns a new go-redis failover client for the deployment, closed
// when the test ends. It follows the primary through failovers.
func (s *Sentinel) Client() *redis.Client {
	c := redis.NewFailoverClient(s.FailoverOptions())
	if s.t != nil {
		s.t.Cleanup(func() { _ = c.Close() })
	}
	return c
}

// Primary returns the server that the sentinels report as the primary: it
// asks the first running sentinel that answers within a second.
func (s *Sentinel) Primary() *Server {
	s.tHelper()
	var errs []error
	for _, srv := range s.sentinels {
		if !srv.running() {
			continue
		}
		c := redis.NewSentinelClient(srv.adminOptions())
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addr, err := c.GetMasterAddrByName(ctx, masterName).Result()
		cancel()
		_ = c.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if n := s.node(net.JoinHostPort(addr[0], addr[1])); n != nil {
			return n
		}
		s.fatalf("redistest: sentinel %s reports primary %v, which is none of ours", srv.Addr(), addr)
	}
	s.fatalf("redistest: no sentinel reports the primary: %v", errors.Join(errs...))
	return nil
}

// Replica returns the data node that is not the Primary. After Failover it
// is the former primary, which is no longer running: Restart brings it back
// empty, and the sentinels then make it a replica of the new primary.
func (s *Sentinel) Replica() *Server {
	s.tHelper()
	if p := s.Primary(); p == s.nodes[0] {
		return s.nodes[1]
	}
	return s.nodes[0]
}

func (s *Sentinel) node(addr string) *Server {
	for _, n := range s.nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

func (s *Sentinel) tHelper() {
	if s.t != nil {
		s.t.Helper()
	}
}

// Failover kills the primary with SIGKILL and waits until every running
// sentinel reports the replica as the new primary and it has taken that role.
// Before the kill it waits until the replica has applied every write the
// primary took before the call, and every sentinel counts it as a replica
// in sync, so that the failover can succeed and loses no acknowledged write;
// writes that race with Failover may be lost, as in a real crash. It fails
// the test if any of this takes more than 15 s.
func (s *Sentinel) Failover() {
	s.tHelper()
	old, next := s.Primary(), s.Replica()
	if err := s.failover(old, next, false); err != nil {
		s.fatalf("redistest: failover from %s to %s: %v", old.Addr(), next.Addr(), err)
	}
}

// ForceFailover is Failover without a kill: it asks the sentinels for a
// failover with SENTINEL FAILOVER, and returns once every sentinel reports
// the replica as the new primary and the former primary is its replica, in
// sync.
func (s *Sentinel) ForceFailover() {
	s.tHelper()
	old, next := s.Primary(), s.Replica()
	if err := s.failover(old, next, true); err != nil {
		s.fatalf("redistest: forced failover from %s to %s: %v", old.Addr(), next.Addr(), err)
	}
}

func (s *Sentinel) failover(old, next *Server, force bool) error {
	// A restarted former primary comes back as an empty primary, and the
	// sentinels turn it into a replica only after it has reported the wrong
	// role for 4 hello periods; do it now. They agree with the result.
	if err := replicate(next, old); err != nil {
		return err
	}
	if err := caughtUp(old, next); err != nil {
		return err
	}
	if err := poll(failoverTimeout, s.ready(old, next)); err != nil {
		return err
	}
	if !force {
		old.Kill()
		return poll(failoverTimeout, s.promoted(next))
	}
	err := poll(failoverTimeout, func(ctx context.Context) error {
		var errs []error
		for _, srv := range s.sentinels {
			if !srv.running() {
				continue
			}
			c := redis.NewSentinelClient(srv.adminOptions())
			err := c.Failover(ctx, masterName).Err()
			_ = c.Close()
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("SENTINEL FAILOVER on %s: %w", srv.Addr(), err))
		}
		return errors.Join(errs...)
	})
	if err != nil {
		return err
	}
	if err := poll(failoverTimeout, s.promoted(next)); err != nil {
		return err
	}
	// Likewise the former primary, which still has the primary role.
	return replicate(old, next)
}

// promoted returns a check that every running sentinel has next as its
// primary, with no failover in progress, and that next has the primary
// role.
func (s *Sentinel) promoted(next *Server) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		for _, srv := range s.sentinels {
			if srv.running() {
				if err := sentinelSees(ctx, srv, next.Addr(), nil, 0); err != nil {
					return err
				}
			}
		}
		c := next.admin()
		defer c.Close()
		repl, err := info(ctx, c, "replication")
		if err != nil {
			return err
		}
		if repl["role"] != "master" {
			return fmt.Errorf("%s has role %s", next.Addr(), repl["role"])
		}
		return nil
	}
}
