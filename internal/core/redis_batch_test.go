package core

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// heldLeases takes n leases of every kind on a Client of its own, with a
// lease long enough that its renewer stays out of the test, and returns
// their renewals as renewAll takes them.
func heldLeases(t *testing.T, srv *redistest.Server, n int) []renewing {
	t.Helper()
	c, err := New(srv.Client(), WithLeaseTime(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	var rs []renewing
	for i := range n {
		for _, lk := range []Locker{
			c.Mutex(fmt.Sprintf("m%d", i)),
			c.RWMutex(fmt.Sprintf("rw%d", i)).RLocker(),
			c.Semaphore(fmt.Sprintf("s%d", i), 2),
		} {
			l, err := lk.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rs = append(rs, renewing{kind: l.kind, k: l.k, owner: l.owner, lease: l.lease})
		}
	}
	return rs
}

// renewAllOK runs one batch of rs on c's backend and reports the first
// renewal that failed or found its lease gone.
func renewAllOK(c *Client, rs []renewing) error {
	batch := append([]renewing(nil), rs...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.be.renewAll(ctx, batch)
	for _, r := range batch {
		switch {
		case r.err != nil:
			return fmt.Errorf("renewal of %s: %w", r.k.name, r.err)
		case !r.ok:
			return fmt.Errorf("renewal of %s: not held", r.k.name)
		}
	}
	return nil
}

// The renewal batches of several Clients of one go-redis client, sent at
// once as that client's first requests, each on a connection that go-redis
// has to dial and greet, meet no data race inside go-redis (run with
// -race): a connection of the main pool taken for a batch by Client.Conn
// ran go-redis's handshake on options shared with every other such Conn,
// and the handshake rewrites them on Redis 7 (maintenance notifications
// refused).
func TestRenewalBatchesOfClientsAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	rs := heldLeases(t, srv, 2)
	for range 10 {
		rdb := redis.NewClient(srv.Options()) // no request yet: no connection
		var cs []*Client
		for range 4 {
			c, err := New(rdb)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, c := range cs {
			wg.Go(func() {
				<-start
				for range 2 {
					if err := renewAllOK(c, rs); err != nil {
						t.Error(err)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		for _, c := range cs {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}
		if err := rdb.Close(); err != nil {
			t.Error(err)
		}
	}
}

// A Client's renewal batches run on one connection, kept from batch to
// batch; after the server restarts, the batch that met the broken
// connection fails, and the next runs on a new one (a go-redis Conn keeps
// a broken connection's error for every later request).
func TestRenewalConnKeptAndMadeAgain(t *testing.T) {
	srv := redistest.Start(t)
	rs := heldLeases(t, srv, 1)
	c, err := New(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close() // a second Close returns nil
	conns := &c.be.(*redisBackend).conns
	kept := func() *redis.Conn {
		conns.mu.Lock()
		defer conns.mu.Unlock()
		var all []*redis.Conn
		for _, cs := range conns.kept {
			all = append(all, cs...)
		}
		if len(all) != 1 {
			t.Fatalf("%d connections kept after a batch, want 1", len(all))
		}
		return all[0]
	}
	if err := renewAllOK(c, rs); err != nil {
		t.Fatal(err)
	}
	first := kept()
	if err := renewAllOK(c, rs); err != nil {
		t.Fatal(err)
	}
	if kept() != first {
		t.Error("the second batch did not run on the first batch's connection")
	}

	srv.Restart() // empty: the leases are gone
	for i := 1; ; i++ {
		batch := append([]renewing(nil), rs...)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.be.renewAll(ctx, batch)
		cancel()
		if batch[0].err == nil {
			for _, r := range batch {
				if r.err != nil || r.ok {
					t.Fatalf("batch %d after the restart: %s renewed %v, error %v; want not held, no error", i, r.k.name, r.ok, r.err)
				}
			}
			break
		}
		if i == 2 {
			t.Fatalf("batch %d after the restart: %v", i, batch[0].err)
		}
	}

	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(conns.kept); n != 0 {
		t.Errorf("%d connections kept after Close", n)
	}
}

// Claims and finishes that go out in a batch run on connections the
// Client keeps, as renewals do: after the first batches, more batches dial
// no connection, and at most maxKept stay kept; the go-redis client's
// hooks see every call; Close closes the connections, and the connection
// of a batch that ends after Close too.
func TestBatchesRunOnKeptConns(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	seen := &evalHook{}
	rdb.AddHook(seen)
	c, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b := c.be.(*redisBackend)
	one := redis.NewScript("return 1")
	send := func() error {
		todo := make([]*batched, 5)
		for i := range todo {
			todo[i] = &batched{ctx: context.Background(), script: one, done: make(chan struct{})}
		}
		b.sendBatch(todo)
		for _, r := range todo {
			if n, err := r.cmd.Int64(); err != nil || n != 1 {
				return fmt.Errorf("a batched call returned %d, %v; want 1", n, err)
			}
		}
		return nil
	}
	kept := func() int {
		b.conns.mu.Lock()
		defer b.conns.mu.Unlock()
		n := 0
		for _, cs := range b.conns.kept {
			n += len(cs)
		}
		return n
	}
	adm := srv.Client() // one connection, dialled by the first count
	received := func() int64 {
		info, err := adm.InfoMap(context.Background(), "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(info["Stats"]["total_connections_received"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	var wg sync.WaitGroup
	for range 2 * maxKept {
		wg.Go(func() {
			if err := send(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := kept(); n < 1 || n > maxKept {
		t.Fatalf("%d connections kept after batches at once, want 1 to %d", n, maxKept)
	}
	before := received()
	for range 20 {
		if err := send(); err != nil {
			t.Fatal(err)
		}
	}
	if d := received() - before; d != 0 {
		t.Errorf("20 batches after the first dialled %d connections, want 0", d)
	}
	if n, want := seen.count(), (2*maxKept+20)*5; n != want {
		t.Errorf("the client's hook saw %d scripts run, want %d", n, want)
	}

	_, done := b.conns.pipeline(context.Background(), b.rdb) // a batch in flight at Close
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	done(nil)
	if n := kept(); n != 0 {
		t.Errorf("%d connections kept after Close", n)
	}
}

// evalHook counts the scripts a go-redis client ran (EVAL and EVALSHA),
// alone or in pipelines.
type evalHook struct {
	mu sync.Mutex
	n  int
}

func (h *evalHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *evalHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.note(cmd)
		return err
	}
}
func (h *evalHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.note(cmd)
		}
		return err
	}
}

// note counts cmd if it is a script that the server ran (not one answered
// NOSCRIPT, which goes again whole).
func (h *evalHook) note(cmd redis.Cmder) {
	if n := cmd.Name(); (n == "eval" || n == "evalsha") && cmd.Err() == nil {
		h.mu.Lock()
		h.n++
		h.mu.Unlock()
	}
}

func (h *evalHook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}
