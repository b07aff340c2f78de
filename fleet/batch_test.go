package fleet_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// pipeHook counts the round trips a go-redis client makes: single
// commands and pipelines.
type pipeHook struct{ trips, cmds atomic.Int64 }

func (h *pipeHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *pipeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(1)
		return next(ctx, cmd)
	}
}
func (h *pipeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.trips.Add(1)
		h.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// sendHook tells when a command that names key is sent.
type sendHook struct {
	key  string
	sent chan struct{}
}

func (h *sendHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *sendHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		for _, a := range cmd.Args() {
			if a == h.key {
				select {
				case h.sent <- struct{}{}:
				default:
				}
			}
		}
		return next(ctx, cmd)
	}
}
func (h *sendHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// Claims and finishes of many ledgers at once, on one Client, each take
// and record their tick once; those that fall due while others are on
// their way share round trips.
func TestClaimsShareRoundTrips(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	h := &pipeHook{}
	rdb.AddHook(h)
	c := locktest.Made(t, func(o ...lock.Option) (*lock.Client, error) { return lock.New(rdb, o...) }, nil)
	ctx := testkit.Context(t)
	const n = 200
	claimAll(t, ctx, c, n)
	t.Logf("%d claims and %d finishes: %d commands in %d round trips", n, n, h.cmds.Load(), h.trips.Load())
	if trips := h.trips.Load(); trips >= 2*n {
		t.Errorf("%d claims and %d finishes took %d round trips: none shared", n, n, trips)
	}
}

// claimAll claims and finishes tick 1000 of n ledgers of c at once, each
// on its own goroutine, and checks that each recorded it done once. It
// returns the ledgers.
func claimAll(t *testing.T, ctx context.Context, c *lock.Client, n int) []*fleet.Ledger {
	t.Helper()
	ledgers := make([]*fleet.Ledger, n)
	for i := range ledgers {
		g, err := fleet.New(c).Ledger("job-"+strconv.Itoa(i), "job")
		if err != nil {
			t.Fatal(err)
		}
		ledgers[i] = g
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, g := range ledgers {
		wg.Go(func() {
			cl, err := g.Claim(ctx, 1000, false, lock.WithWait(0))
			if err != nil {
				errs <- err
				return
			}
			if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: cl.Try, Seen: 1000}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, g := range ledgers {
		st, err := g.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.Done != 1000 || st.Tries != 1 || st.Outcome != "ran" {
			t.Errorf("ledger %d: %+v, want tick 1000 done once", i, st)
		}
	}
	return ledgers
}

// A claim queued behind a batch on its way leaves the queue when its ctx
// ends: it returns the ctx's error and is never sent.
func TestQueuedClaimLeavesWithItsCtx(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	onWay := &sendHook{key: "lockcron:{first}", sent: make(chan struct{}, 10)}
	rdb.AddHook(onWay)
	c := locktest.Made(t, func(o ...lock.Option) (*lock.Client, error) { return lock.New(rdb, o...) }, nil)
	ctx := testkit.Context(t)
	first, err := fleet.New(c).Ledger("first", "job")
	if err != nil {
		t.Fatal(err)
	}
	queued, err := fleet.New(c).Ledger("queued", "job")
	if err != nil {
		t.Fatal(err)
	}
	// Warm the connection and the script cache, then stall the server so
	// that the next claim stays on its way.
	claimFinish(t, ctx, first, 1, true)
	for len(onWay.sent) > 0 {
		<-onWay.sent
	}
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	firstDone := make(chan error, 1)
	go func() {
		cl, err := first.Claim(ctx, 2, false, lock.WithWait(0))
		if err == nil {
			err = cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: 2})
		}
		firstDone <- err
	}()
	// The first claim is on its way, and cannot come back while the
	// server is stopped.
	select {
	case <-onWay.sent:
	case <-time.After(5 * time.Second):
		t.Fatal("the first claim was not sent within 5s")
	}
	qctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = queued.Claim(qctx, 2, false, lock.WithWait(0))
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("queued claim: %v, want the ctx's deadline", err)
	}
	srv.Resume()
	resumed = true
	if err := <-firstDone; err != nil {
		t.Fatalf("the claim on its way: %v", err)
	}
	if n, _ := srv.Do("EXISTS", "lockcron:{queued}:ledger:job", "lockcron:{queued}").(int64); n != 0 {
		t.Fatalf("the queued claim reached the server: %d of its keys exist", n)
	}
}

// With WithReplicaAck on a Cluster, claims and finishes of many ledgers at
// once, on all three primaries, each take and record their tick once, and
// each finish is on the primary's replica when Finish returns.
func TestAckedClaimsOnCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t)
	c := locktest.Made(t, func(o ...lock.Option) (*lock.Client, error) { return lock.New(cl.Client(), o...) },
		[]lock.Option{lock.WithReplicaAck(1, 5*time.Second)})
	ctx := testkit.Context(t)
	const n = 200
	ledgers := claimAll(t, ctx, c, n)
	// A replica answers reads on a connection that sent READONLY.
	replicas := make([]*redis.Client, len(cl.Replicas()))
	for i, r := range cl.Replicas() {
		o := r.Options()
		o.OnConnect = func(ctx context.Context, cn *redis.Conn) error { return cn.ReadOnly(ctx).Err() }
		replicas[i] = redis.NewClient(o)
		defer replicas[i].Close()
	}
	shards := map[int]int{}
	for i, g := range ledgers {
		key := g.Key()
		shard := slices.Index(cl.Primaries(), cl.PrimaryForKey(key))
		shards[shard]++
		if got, err := replicas[shard].HGet(ctx, key, "done").Result(); got != "1000" {
			t.Errorf("ledger %d: the replica has done %q (%v) right after Finish, want 1000", i, got, err)
		}
	}
	if len(shards) != 3 {
		t.Fatalf("ledgers on %d primaries, want all 3: %v", len(shards), shards)
	}
}

// Batched claims that no replica acknowledges fail closed, each: ErrNoAck,
// and nothing is left held.
func TestAckedClaimsFailClosed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv, lock.WithReplicaAck(1, 50*time.Millisecond))
	ctx := testkit.Context(t)
	const n = 20
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		g, err := fleet.New(c).Ledger("noack-"+strconv.Itoa(i), "job")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			_, errs[i] = g.Claim(ctx, 1000, false, lock.WithWait(0))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, lock.ErrNoAck) {
			t.Errorf("claim %d without replicas: %v, want ErrNoAck", i, err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		var held int64
		for i := range n {
			held += srv.Do("EXISTS", "lockcron:{noack-"+strconv.Itoa(i)+"}").(int64)
		}
		if held == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d unacknowledged claims were not undone after 5s", held)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// scriptHook counts the scripts a go-redis client sends (EVALSHA, EVAL),
// alone or in pipelines, retries included.
type scriptHook struct{ n atomic.Int64 }

func (h *scriptHook) count(cmds ...redis.Cmder) {
	for _, c := range cmds {
		if name := c.Name(); name == "evalsha" || name == "eval" {
			h.n.Add(1)
		}
	}
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}
func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.count(cmds...)
		return next(ctx, cmds)
	}
}

// While the store is down, a Client's claims do not each retry on their
// own: one at a time probes it, with a growing pause, and the others wait
// for its answer. When the store is back, they all take their ticks soon.
func TestClaimsHeldBackWhileStoreDown(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	h := &scriptHook{}
	rdb.AddHook(h)
	c := locktest.Made(t, func(o ...lock.Option) (*lock.Client, error) { return lock.New(rdb, o...) }, nil)
	ctx := testkit.Context(t)
	const n = 50
	ledgers := make([]*fleet.Ledger, n)
	for i := range ledgers {
		g, err := fleet.New(c).Ledger("down-"+strconv.Itoa(i), "job")
		if err != nil {
			t.Fatal(err)
		}
		ledgers[i] = g
	}
	claimFinish(t, ctx, ledgers[0], 1, true)
	srv.Kill()
	before := h.n.Load()
	const wait = 1500 * time.Millisecond
	var wg sync.WaitGroup
	for _, g := range ledgers {
		wg.Go(func() {
			if _, err := g.Claim(ctx, 2, false, lock.WithWait(wait)); !errors.Is(err, lock.ErrLocked) {
				t.Errorf("claim while the store is down: %v, want ErrLocked after the wait", err)
			}
		})
	}
	wg.Wait()
	sent := h.n.Load() - before
	// On its own, each claim would try again after 25ms, 50ms, ... up to
	// every 250ms: about 140 tries in all, some 285 scripts counted here
	// (go-redis's hook sees two per try). Held back, the first try of each
	// meets the store down, then one probe goes at a time: about 55 tries.
	if sent > 3*n {
		t.Fatalf("%d claims sent %d scripts in %v while the store was down, want at most %d", n, sent, wait, 3*n)
	}
	t.Logf("%d claims sent %d scripts in %v while the store was down", n, sent, wait)

	srv.Restart() // empty
	start := time.Now()
	for _, g := range ledgers {
		wg.Go(func() {
			cl, err := g.Claim(ctx, 3, false, lock.WithWait(10*time.Second))
			if err != nil {
				t.Errorf("claim after the restart: %v", err)
				return
			}
			if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: cl.Try, Seen: 3}); err != nil {
				t.Errorf("finish after the restart: %v", err)
			}
		})
	}
	wg.Wait()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the claims took %v after the store came back, want well under 5s", d)
	}
	t.Logf("after the restart, the claims and finishes took %v", time.Since(start))
}
