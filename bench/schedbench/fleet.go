package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// record is one run of a job, as its job func saw it.
type record struct {
	job     int32
	replica int16
	attempt int16
	tick    time.Time     // info.Tick
	late    time.Duration // time.Now() at the start of the job func − info.Tick
}

// journal collects the runs of every replica. The job funcs append to it
// concurrently: 1,000 appends a second under one mutex is nothing next to
// a claim's round trip.
type journal struct {
	mu      sync.Mutex
	runs    []record
	noInfo  int64 // runs whose ctx carried no RunInfo
	badInfo int64 // runs whose RunInfo named another job or replica
}

func (j *journal) add(r record) {
	j.mu.Lock()
	j.runs = append(j.runs, r)
	j.mu.Unlock()
}

func (j *journal) count(bad bool) {
	j.mu.Lock()
	if bad {
		j.badInfo++
	} else {
		j.noInfo++
	}
	j.mu.Unlock()
}

// replica is one member of the fleet: its own go-redis client, lock.Client,
// Scheduler and meter provider, as a separate process would have.
type replica struct {
	id     string
	rdb    *redis.Client
	locks  *lock.Client
	s      *scheduler.Scheduler
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
	runc   chan error // Run's result
	ran    bool       // start was called
}

// jobName is the name of job k: job-0000, job-0001, ...
func jobName(k int) string { return fmt.Sprintf("job-%04d", k) }

// newReplica builds replica i with n jobs, each "@every 1s", each recording
// its runs in j. work is how long a run lasts (0: it returns at once).
func newReplica(srv *redistest.Server, i, n, poolSize int, work time.Duration, j *journal) (*replica, error) {
	id := fmt.Sprintf("r%d", i+1)
	opts := srv.Options() // ContextTimeoutEnabled is on
	opts.PoolSize = poolSize
	r := &replica{id: id, rdb: redis.NewClient(opts), runc: make(chan error, 1)}
	r.mp, r.reader = newMeterProvider()
	var err error
	r.locks, err = lock.New(r.rdb, lock.WithClientID(id), lock.WithMeterProvider(r.mp))
	if err != nil {
		_ = r.rdb.Close()
		return nil, fmt.Errorf("lock.New: %w", err)
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
			info, ok := scheduler.RunInfo(ctx)
			if !ok {
				j.count(false)
				return nil
			}
			if info.Job != name || info.Replica != id {
				j.count(true)
			}
			j.add(record{job: int32(k), replica: int16(i), attempt: int16(info.Attempt), tick: info.Tick, late: start.Sub(info.Tick)})
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

// stopResult is how one replica's stop went.
type stopResult struct {
	shutdown time.Duration  // Shutdown's duration
	err      error          // Shutdown's error (ctx ended first)
	runErr   error          // what Run returned, if not ErrClosed
	runHung  bool           // Run had not returned 5 s after Shutdown
	metrics  replicaMetrics // whole run, read after the stop
	metErr   error
}

// stop shuts the replica down (bounded by timeout), waits for Run to return
// and closes its clients.
func (r *replica) stop(timeout time.Duration) stopResult {
	var res stopResult
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t0 := time.Now()
	res.err = r.s.Shutdown(ctx)
	res.shutdown = time.Since(t0)
	cancel()
	if !r.ran {
		r.runc <- scheduler.ErrClosed
	}
	select {
	case err := <-r.runc:
		if !errors.Is(err, scheduler.ErrClosed) {
			res.runErr = err
		}
	case <-time.After(5 * time.Second):
		res.runHung = true
	}
	res.metrics, res.metErr = collect(context.Background(), r.reader)
	r.closeClients()
	return res
}

func (r *replica) closeClients() {
	if r.locks != nil {
		_ = r.locks.Close()
	}
	_ = r.rdb.Close()
	_ = r.mp.Shutdown(context.Background())
}
