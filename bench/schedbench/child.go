package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// The replica process (-replica-child) talks to its parent in lines.
//
// stdin, parent → child: "start" starts the Scheduler; "metrics" asks for
// the scheduler's metrics; "sent" for the commands its go-redis client
// sent so far (no Redis command of its own, unlike the metrics' gauges);
// end of file (or SIGTERM) stops the replica
// gracefully (Shutdown), reports and exits.
//
// stdout, child → parent:
//
//	ready                                 built, waiting for "start"
//	r <job> <attempt> <tick ns> <late ns>  one run, written as the job func starts
//	n | b                                  a run without RunInfo | whose RunInfo names another job or replica
//	m <json replicaMetrics>                the answer to "metrics"
//	s <json map[string]int64>              the answer to "sent"
//	stop <json stopResult>                 the last line, after Shutdown
//
// Each line is one Write on the unbuffered stdout, so a SIGKILL loses at
// most the run whose job func had started but not yet written its line (a
// run's line is far below PIPE_BUF, so the parent never sees half of one).
// Everything else goes to stderr.

// out writes the child's lines to its stdout.
type out struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
}

func (o *out) line(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = fmt.Appendf(o.buf[:0], format, args...)
	o.buf = append(o.buf, '\n')
	// A failed write means the parent is gone; writing to a closed stdout
	// pipe ends the process with SIGPIPE anyway.
	_, _ = o.w.Write(o.buf)
}

// childMain is a replica process: it builds its replica, reports ready,
// and follows the parent's commands until its stdin closes or ctx ends.
func childMain(ctx context.Context, cfg *config) error {
	o := &out{w: os.Stdout}
	profile := ""
	if cfg.childID == 0 {
		profile = cfg.cpuProfile
	}
	stopProfile, err := benchutil.StartCPUProfile(profile)
	if err != nil {
		return err
	}
	defer stopProfile()

	// The stdin reader ends at end of file. It is the one goroutine that
	// nothing waits for: a read from a pipe cannot be interrupted, and the
	// process exits right after the stop anyway.
	cmds := make(chan string)
	go func() {
		defer close(cmds)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmds <- sc.Text()
		}
	}()
	goroutines := runtime.NumGoroutine()

	r, err := newReplica(cfg, o)
	if err != nil {
		return err
	}
	o.line("ready")
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case c, ok := <-cmds:
			if !ok {
				break loop
			}
			switch c {
			case "start":
				if !r.ran {
					r.start()
				}
			case "metrics":
				m, err := r.metrics(ctx)
				if err != nil {
					fmt.Fprintln(os.Stderr, "schedbench child:", err)
				}
				b, _ := json.Marshal(m)
				o.line("m %s", b)
			case "sent":
				var m map[string]int64
				if r.sent != nil {
					m = r.sent.counts()
				}
				b, _ := json.Marshal(m)
				o.line("s %s", b)
			}
		}
	}
	res := r.stop(cfg.shutdownTimeout)
	// Every goroutine the replica started has stopped and every client is
	// closed: what is left over the count taken before it was built is a
	// leak (or go-redis's housekeeping winding down; give it a moment).
	time.Sleep(200 * time.Millisecond)
	res.GoroutinesLeft = runtime.NumGoroutine() - goroutines
	b, err := json.Marshal(res)
	if err != nil {
		return err
	}
	o.line("stop %s", b)
	return nil
}

// hogMain is the CPU hog (-hog-child): two busy loops on GOMAXPROCS 2,
// until its stdin closes.
func hogMain() {
	runtime.GOMAXPROCS(2)
	for range 2 {
		go func() {
			for {
			}
		}()
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// replica is one member of the fleet, in its own process: its own go-redis
// client (none on the in-memory backend), lock.Client, Scheduler and meter
// provider.
type replica struct {
	id     string
	rdb    redis.UniversalClient
	locks  *lock.Client
	s      *scheduler.Scheduler
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
	sent   *sentCounter // nil on the in-memory backend
	runc   chan error   // Run's result
	ran    bool         // start was called
}

// metrics is the scheduler's metrics and the commands sent so far.
func (r *replica) metrics(ctx context.Context) (replicaMetrics, error) {
	m, err := collect(ctx, r.reader)
	if r.sent != nil {
		m.Sent = r.sent.counts()
	}
	return m, err
}

// sentCounter is a go-redis hook that counts the commands the client
// sends, by name, pipelined ones included. Pub/Sub commands do not pass
// through hooks; no script runs those, so INFO commandstats tells them
// apart. Safe for concurrent use.
type sentCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *sentCounter) add(cmds ...redis.Cmder) {
	c.mu.Lock()
	for _, cmd := range cmds {
		c.n[strings.ToLower(cmd.Name())]++
	}
	c.mu.Unlock()
}

func (c *sentCounter) counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

func (c *sentCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *sentCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.add(cmd)
		return next(ctx, cmd)
	}
}

func (c *sentCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.add(cmds...)
		return next(ctx, cmds)
	}
}

// jobName is the name of job k: job-0000, job-0001, ...
func jobName(k int) string { return fmt.Sprintf("job-%04d", k) }

// ackTimeout is the WAIT timeout of the cluster row's lock.WithReplicaAck,
// as in the fault suite.
const ackTimeout = 300 * time.Millisecond

// newReplica builds replica cfg.childID on the Redis server at
// cfg.childAddr ("": a lock.NewMemory Client; with cfg.childCluster, a
// Cluster's nodes) with cfg.jobs jobs, each "@every 1s", each writing its
// runs to o. cfg.work is how long a run lasts (0: it returns at once);
// cfg.lease is the lock client's lease (0: the default).
func newReplica(cfg *config, o *out) (*replica, error) {
	addr, i, n, poolSize, work, lease := cfg.childAddr, cfg.childID, cfg.jobs, cfg.poolSize, cfg.work, cfg.lease
	id := fmt.Sprintf("r%d", i+1)
	r := &replica{id: id, runc: make(chan error, 1)}
	r.mp, r.reader = newMeterProvider()
	opts := []lock.Option{lock.WithClientID(id), lock.WithMeterProvider(r.mp)}
	if lease > 0 {
		opts = append(opts, lock.WithLeaseTime(lease))
	}
	if cfg.childAck {
		opts = append(opts, lock.WithReplicaAck(1, ackTimeout))
	}
	var err error
	switch {
	case addr == "":
		r.locks, err = lock.NewMemory(opts...)
	default:
		if cfg.childCluster {
			// As the command's config builds a Cluster client: the slot
			// map is reloaded every second, so that a promotion is learnt
			// without waiting for a MOVED.
			r.rdb = redis.NewClusterClient(&redis.ClusterOptions{
				Addrs: strings.Split(addr, ","), ContextTimeoutEnabled: true, DisableIdentity: true, PoolSize: poolSize,
				ClusterStateReloadInterval: time.Second,
			})
		} else {
			// As redistest.Server.Options: ContextTimeoutEnabled, no CLIENT SETINFO.
			r.rdb = redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DisableIdentity: true, PoolSize: poolSize})
		}
		r.sent = &sentCounter{n: map[string]int64{}}
		if cc, ok := r.rdb.(*redis.ClusterClient); ok {
			// On each node's client: what the library sends over one
			// node's connection (WAIT after a script) passes no hook of
			// the cluster client, and each redirect or retry is a send.
			cc.OnNewNode(func(n *redis.Client) { n.AddHook(r.sent) })
		} else {
			r.rdb.AddHook(r.sent)
		}
		r.locks, err = lock.New(r.rdb, opts...)
	}
	if err != nil {
		r.closeClients()
		return nil, fmt.Errorf("lock client: %w", err)
	}
	r.s, err = scheduler.New(r.locks, scheduler.WithReplicaID(id), scheduler.WithMeterProvider(r.mp))
	if err != nil {
		r.closeClients()
		return nil, fmt.Errorf("scheduler.New: %w", err)
	}
	for k := range n {
		name := jobName(k)
		run := func(ctx context.Context) error {
			start := time.Now()
			info, ok := jobs.InfoFrom(ctx)
			if !ok {
				o.line("n")
				return nil
			}
			if info.Job != name || info.Replica != id {
				o.line("b")
			}
			o.line("r %d %d %d %d", k, info.Attempt, info.Tick.UnixNano(), int64(start.Sub(info.Tick)))
			if work > 0 {
				t := time.NewTimer(work)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			}
			return nil
		}
		if err := r.s.Add(scheduler.Job{Name: name, Schedule: "@every 1s", Run: jobs.Func(run)}); err != nil {
			r.closeClients()
			return nil, fmt.Errorf("add %s: %w", name, err)
		}
	}
	return r, nil
}

// start runs the Scheduler in a goroutine; stop waits for it to return.
func (r *replica) start() {
	r.ran = true
	go func() { r.runc <- r.s.Run(context.Background()) }()
}

// stopResult is how one replica's stop went, as its process reports it.
type stopResult struct {
	Shutdown       time.Duration  // Shutdown's duration
	Err            string         // Shutdown's error (ctx ended first)
	RunErr         string         // what Run returned, if not ErrClosed
	RunHung        bool           // Run had not returned 5 s after Shutdown
	Metrics        replicaMetrics // whole run, read after the stop
	MetErr         string
	GoroutinesLeft int // more than before the replica was built, after its stop

	killed  bool  // by the kill row: none of the above
	exitErr error // the process's exit, if not 0
}

// stop shuts the replica down (bounded by timeout), waits for Run to return
// and closes its clients.
func (r *replica) stop(timeout time.Duration) stopResult {
	var res stopResult
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t0 := time.Now()
	if err := r.s.Shutdown(ctx); err != nil {
		res.Err = err.Error()
	}
	res.Shutdown = time.Since(t0)
	cancel()
	if !r.ran {
		r.runc <- scheduler.ErrClosed
	}
	select {
	case err := <-r.runc:
		if !errors.Is(err, scheduler.ErrClosed) {
			res.RunErr = fmt.Sprint(err)
		}
	case <-time.After(5 * time.Second):
		res.RunHung = true
	}
	var err error
	if res.Metrics, err = r.metrics(context.Background()); err != nil {
		res.MetErr = err.Error()
	}
	r.closeClients()
	return res
}

func (r *replica) closeClients() {
	if r.locks != nil {
		_ = r.locks.Close()
	}
	if r.rdb != nil {
		_ = r.rdb.Close()
	}
	_ = r.mp.Shutdown(context.Background())
}
