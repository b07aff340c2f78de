package faultproxy_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/lockcron/lockcron/internal/faultproxy"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait is how long a test waits for something that should happen soon, on a
// loaded machine.
const wait = 10 * time.Second

// start runs a redis-server and a Proxy to it, closed when the test ends.
func start(t *testing.T) (*redistest.Server, *faultproxy.Proxy) {
	t.Helper()
	srv := redistest.Start(t)
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return srv, p
}

// client returns a go-redis client of the proxy, closed when the test ends.
func client(t *testing.T, p *faultproxy.Proxy, edit func(*redis.Options)) *redis.Client {
	t.Helper()
	opts := &redis.Options{Addr: p.Addr(), DisableIdentity: true, ContextTimeoutEnabled: true}
	if edit != nil {
		edit(opts)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}

// dialRaw opens a plain TCP connection to the proxy, closed when the test ends.
func dialRaw(t *testing.T, p *faultproxy.Proxy) net.Conn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", p.Addr(), wait)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return nc
}

func TestPassThrough(t *testing.T) {
	srv, p := start(t)
	ctx := ctxFor(t)
	const clients, keys = 16, 50
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		c := client(t, p, nil)
		wg.Go(func() {
			for j := range keys {
				k, v := fmt.Sprintf("k%d.%d", i, j), fmt.Sprintf("v%d.%d", i, j)
				if err := c.Set(ctx, k, v, 0).Err(); err != nil {
					errs <- fmt.Errorf("client %d: SET %s: %w", i, k, err)
					return
				}
				got, err := c.Get(ctx, k).Result()
				if err != nil || got != v {
					errs <- fmt.Errorf("client %d: GET %s = %q, %v; want %q", i, k, got, err, v)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := srv.Do("DBSIZE"); got != int64(clients*keys) {
		t.Errorf("DBSIZE on the server = %v, want %d", got, clients*keys)
	}
	if s := p.Stats(); s.Accepted < clients || s.DroppedReplies != 0 || s.Killed != 0 {
		t.Errorf("Stats() = %+v, want at least %d accepted, nothing dropped or killed", s, clients)
	}

	// A large value crosses the proxy in many chunks, in order.
	big := strings.Repeat("0123456789abcdef", 64<<10) // 1 MiB
	c := client(t, p, nil)
	if err := c.Set(ctx, "big", big, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Get(ctx, "big").Result(); err != nil || got != big {
		t.Fatalf("GET big: %d bytes, %v; want the %d bytes set", len(got), err, len(big))
	}
}

func TestClientCloseEndsConnection(t *testing.T) {
	_, p := start(t)
	nc := dialRaw(t, p)
	r := bufio.NewReader(nc)
	if _, err := io.WriteString(nc, "PING\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(wait))
	if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING through the proxy: %q, %v", line, err)
	}
	if s := p.Stats(); s.Active != 1 {
		t.Fatalf("Stats().Active = %d with one connection open", s.Active)
	}
	_ = nc.Close()
	testkit.Eventually(t, wait, "connection gone after the client closed it", func() bool { return p.Stats().Active == 0 })
}

func TestDelay(t *testing.T) {
	_, p := start(t)
	ctx := ctxFor(t)
	c := client(t, p, nil)
	if err := c.Ping(ctx).Err(); err != nil { // dial before the delay
		t.Fatal(err)
	}

	const rtt = 100 * time.Millisecond
	p.SetDelay(rtt)
	t0 := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	one := time.Since(t0)
	t.Logf("PING with a %v round trip added: %v", rtt, one)
	if one < rtt || one > 10*rtt {
		t.Errorf("PING took %v, want between %v and %v", one, rtt, 10*rtt)
	}

	const n = 20
	t0 = time.Now()
	cmds, err := c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for range n {
			pipe.Ping(ctx)
		}
		return nil
	})
	piped := time.Since(t0)
	if err != nil || len(cmds) != n {
		t.Fatalf("pipeline of %d PINGs: %d results, %v", n, len(cmds), err)
	}
	t.Logf("pipeline of %d PINGs: %v", n, piped)
	if piped < rtt || piped > 10*rtt {
		t.Errorf("pipeline of %d PINGs took %v, want between %v and %v", n, piped, rtt, 10*rtt)
	}

	p.SetDelay(0)
	t0 = time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("PING after SetDelay(0): %v", time.Since(t0))
	if d := time.Since(t0); d >= rtt {
		t.Errorf("PING after SetDelay(0) took %v, want less than %v", d, rtt)
	}
}

// TestDelayPipelined sends PINGs as separate writes, a few milliseconds
// apart, so that the proxy reads most of them as separate chunks. Each is
// delayed from when it was read, so the whole takes about the writing time
// plus one round trip; a proxy that delayed each chunk after the one before
// would take at least half a round trip per chunk.
func TestDelayPipelined(t *testing.T) {
	_, p := start(t)
	const rtt, n, gap = 100 * time.Millisecond, 20, 5 * time.Millisecond
	p.SetDelay(rtt)
	nc := dialRaw(t, p)

	t0 := time.Now()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		for range n {
			if _, err := io.WriteString(nc, "PING\r\n"); err != nil {
				return
			}
			time.Sleep(gap) // pacing a client's commands, not synchronisation
		}
	})
	r := bufio.NewReader(nc)
	_ = nc.SetReadDeadline(time.Now().Add(wait))
	var first time.Duration
	for i := range n {
		line, err := r.ReadString('\n')
		if err != nil || line != "+PONG\r\n" {
			t.Fatalf("reply %d: %q, %v", i, line, err)
		}
		if i == 0 {
			first = time.Since(t0)
		}
	}
	total := time.Since(t0)
	t.Logf("%d PINGs written %v apart with a %v round trip: first reply after %v, last after %v", n, gap, rtt, first, total)
	if first < rtt {
		t.Errorf("first reply after %v, want at least %v", first, rtt)
	}
	if serial := n * rtt / 2; total >= serial {
		t.Errorf("%d replies took %v, want less than the %v of one delay after another", n, total, serial)
	}
}

func TestBlackhole(t *testing.T) {
	srv, p := start(t)
	ctx := ctxFor(t)
	c := client(t, p, func(o *redis.Options) {
		o.ReadTimeout = 200 * time.Millisecond
		o.MaxRetries = -1
	})
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}

	p.SetBlackhole(true)
	t0 := time.Now()
	err := c.Get(ctx, "k").Err()
	t.Logf("GET in the blackhole: %v after %v", err, time.Since(t0))
	var nerr net.Error
	if !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("GET in the blackhole: %v, want a timeout", err)
	}

	// A new connection is accepted; its command and its close are held.
	nc := dialRaw(t, p)
	if _, err := io.WriteString(nc, "PING\r\n"); err != nil {
		t.Fatal(err)
	}
	closer := dialRaw(t, p)
	if _, err := io.WriteString(closer, "SET held yes\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = closer.Close()
	testkit.Eventually(t, wait, "connections accepted in the blackhole", func() bool { return p.Stats().Accepted >= 3 })

	// Nothing comes back while it lasts.
	_ = nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	buf := make([]byte, 16)
	if n, err := nc.Read(buf); !isTimeout(err) {
		t.Fatalf("read in the blackhole: %q, %v; want a timeout", buf[:n], err)
	}
	if got := srv.Do("EXISTS", "held"); got != int64(0) {
		t.Fatalf("EXISTS held = %v during the blackhole, want 0", got)
	}

	p.SetBlackhole(false)
	_ = nc.SetReadDeadline(time.Now().Add(wait))
	if line, err := bufio.NewReader(nc).ReadString('\n'); err != nil || line != "+PONG\r\n" {
		t.Fatalf("PING written in the blackhole: %q, %v after it was lifted; want +PONG", line, err)
	}
	testkit.Eventually(t, wait, "SET written in the blackhole, then closed, applied after it", func() bool {
		return srv.Do("GET", "held") == "yes"
	})
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after the blackhole: %q, %v", got, err)
	}
	if s := p.Stats(); s.Killed != 0 || s.DroppedReplies != 0 {
		t.Errorf("Stats() = %+v, want nothing killed or dropped", s)
	}
}

func isTimeout(err error) bool {
	var nerr net.Error
	return errors.As(err, &nerr) && nerr.Timeout()
}

func TestDropReplies(t *testing.T) {
	srv, p := start(t)
	ctx := ctxFor(t)

	// Without retries, the client sees its connection die, but INCR ran.
	once := client(t, p, func(o *redis.Options) { o.MaxRetries = -1 })
	if err := once.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.SetDropReplies(1, 1)
	err := once.Incr(ctx, "k").Err()
	t.Logf("INCR with its reply dropped: %v", err)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("INCR with its reply dropped: %v, want a network error", err)
	}
	if got := srv.Do("GET", "k"); got != "1" {
		t.Fatalf("GET k on the server = %v, want 1", got)
	}
	if s := p.Stats(); s.DroppedReplies != 1 {
		t.Fatalf("Stats().DroppedReplies = %d, want 1", s.DroppedReplies)
	}

	// With retries, go-redis runs INCR again on a new connection: the
	// command runs twice. The second dial turns the drops off, so that only
	// the first reply is dropped.
	p.SetDropReplies(0, 0)
	var dials atomic.Int32
	retry := client(t, p, func(o *redis.Options) {
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) == 2 {
				p.SetDropReplies(0, 0)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	if err := retry.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.SetDropReplies(1, 1)
	n, err := retry.Incr(ctx, "k").Result()
	if err != nil {
		t.Fatalf("INCR with retries: %v", err)
	}
	if got := srv.Do("GET", "k"); n != 3 || got != "3" {
		t.Fatalf("INCR with retries returned %d, server has %v; want 3 (1 + 2 runs)", n, got)
	}
	if s := p.Stats(); s.DroppedReplies != 2 || dials.Load() != 2 {
		t.Fatalf("Stats().DroppedReplies = %d, dials = %d; want 2 and 2", s.DroppedReplies, dials.Load())
	}
}

// TestDropRepliesSeeded shows that a seed gives the same decisions for the
// same traffic.
func TestDropRepliesSeeded(t *testing.T) {
	srv := redistest.Start(t)
	outcomes := func(seed int64) string {
		p, err := faultproxy.New(srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		p.SetDropReplies(0.5, seed)
		var b strings.Builder
		for range 24 {
			nc, err := net.DialTimeout("tcp", p.Addr(), wait)
			if err != nil {
				t.Fatal(err)
			}
			_ = nc.SetDeadline(time.Now().Add(wait))
			_, _ = io.WriteString(nc, "PING\r\n")
			line, err := bufio.NewReader(nc).ReadString('\n')
			_ = nc.Close()
			switch {
			case line == "+PONG\r\n":
				b.WriteByte('.')
			case err != nil && !isTimeout(err):
				b.WriteByte('x')
			default:
				t.Fatalf("PING: %q, %v", line, err)
			}
		}
		if s := p.Stats(); s.DroppedReplies != int64(strings.Count(b.String(), "x")) {
			t.Errorf("Stats().DroppedReplies = %d, outcomes %s", s.DroppedReplies, b.String())
		}
		return b.String()
	}
	a, b, c := outcomes(7), outcomes(7), outcomes(8)
	t.Logf("seed 7: %s, again: %s; seed 8: %s (x: dropped)", a, b, c)
	if a != b {
		t.Errorf("seed 7 gave %s, then %s", a, b)
	}
	if !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Errorf("seed 7 at probability 0.5 gave %s, want some of each", a)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 both gave %s", a)
	}
}

func TestKillConns(t *testing.T) {
	srv, p := start(t)
	ctx := ctxFor(t)
	c := client(t, p, nil)
	ps := c.Subscribe(ctx, "news")
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}

	n := p.KillConns()
	if n < 1 {
		t.Fatalf("KillConns() = %d, want at least the subscription's connection", n)
	}
	if s := p.Stats(); s.Killed != int64(n) || s.Active != 0 {
		t.Fatalf("Stats() = %+v after KillConns() = %d", s, n)
	}
	if msg, err := ps.Receive(ctx); err == nil {
		t.Fatalf("Receive after KillConns: %v, want an error", msg)
	} else {
		t.Logf("Receive after KillConns: %v", err)
	}

	// go-redis resubscribes on a new connection.
	got := make(chan string, 1)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ps.Close() // ends a Receive in progress
	defer cancel()
	wg.Go(func() {
		for rctx.Err() == nil {
			if msg, err := ps.ReceiveMessage(rctx); err == nil {
				got <- msg.Payload
				return
			}
		}
	})
	deadline := time.After(wait)
	for {
		srv.Do("PUBLISH", "news", "hello")
		select {
		case m := <-got:
			if m != "hello" {
				t.Fatalf("message %q, want hello", m)
			}
			if s := p.Stats(); s.Accepted < 2 {
				t.Fatalf("Stats().Accepted = %d, want a new connection", s.Accepted)
			}
			return
		case <-deadline:
			t.Fatalf("no message through the proxy within %v of KillConns", wait)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func TestClose(t *testing.T) {
	srv := redistest.Start(t)
	before := goleak.IgnoreCurrent()
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	addr := p.Addr()
	ctx := ctxFor(t)

	// Open connections in every state: idle, blackholed before dialling,
	// with data held, and with delayed data in flight.
	c := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, MaxRetries: -1})
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	p.SetDelay(time.Hour)
	slow := dialRaw(t, p)
	_, _ = io.WriteString(slow, "PING\r\n")
	p.SetBlackhole(true)
	held := dialRaw(t, p)
	_, _ = io.WriteString(held, "PING\r\n")
	testkit.Eventually(t, wait, "connections accepted", func() bool { return p.Stats().Active == 3 })

	t0 := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close with 3 connections: %v", time.Since(t0))
	if err := p.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if s := p.Stats(); s.Active != 0 {
		t.Errorf("Stats().Active = %d after Close", s.Active)
	}
	_ = slow.SetReadDeadline(time.Now().Add(wait))
	if _, err := slow.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("read from a connection after Close: %v, want it closed", err)
	}
	_ = c.Close()
	_ = slow.Close()
	_ = held.Close()
	if nc, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = nc.Close()
		t.Errorf("dial %s after Close succeeded", addr)
	}
	if err := goleak.Find(before); err != nil {
		t.Errorf("goroutines left after Close: %v", err)
	}
}
