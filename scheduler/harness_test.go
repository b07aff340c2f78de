package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/execjob"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

func TestMain(m *testing.M) {
	// The exec jobs of the tests start this binary again as their supervisor.
	if code, ok := execjob.Supervise(); ok {
		os.Exit(code)
	}
	if os.Getenv(replicaEnv) != "" {
		os.Exit(replicaMain())
	}
	goleak.VerifyTestMain(m)
}

// replica is one scheduler with its own lock.Client, as a replica of a
// service would have.
type replica struct {
	id    string
	locks *lock.Client
	s     *scheduler.Scheduler
	runc  chan error // Run's result
}

// newRedisReplica makes a replica on srv; it is stopped when the test ends.
func newRedisReplica(t *testing.T, srv *redistest.Server, id string, lopts []lock.Option, opts ...scheduler.Option) *replica {
	t.Helper()
	c, err := lock.New(srv.Client(), append([]lock.Option{lock.WithClientID(id)}, lopts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return newReplica(t, c, id, opts...)
}

func newReplica(t *testing.T, c *lock.Client, id string, opts ...scheduler.Option) *replica {
	t.Helper()
	// Quiet unless the test gives a logger: the default writes warnings to
	// stderr.
	s, err := scheduler.New(c, append([]scheduler.Option{scheduler.WithReplicaID(id), scheduler.WithLogger(hclog.NewNullLogger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{id: id, locks: c, s: s}
	t.Cleanup(func() {
		r.stop(t)
		_ = c.Close()
	})
	return r
}

func (r *replica) add(t *testing.T, jobs ...scheduler.Job) {
	t.Helper()
	for _, j := range jobs {
		if err := r.s.Add(j); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *replica) start() {
	r.runc = make(chan error, 1)
	go func() { r.runc <- r.s.Run(context.Background()) }()
}

// stop shuts the replica down and waits for Run to return.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.s.Shutdown(ctx); err != nil {
		t.Errorf("replica %s: Shutdown: %v", r.id, err)
	}
	if r.runc == nil {
		return
	}
	select {
	case err := <-r.runc:
		if !errors.Is(err, scheduler.ErrClosed) {
			t.Errorf("replica %s: Run = %v, want ErrClosed", r.id, err)
		}
	case <-ctx.Done():
		t.Errorf("replica %s: Run did not return after Shutdown", r.id)
	}
	r.runc = nil
}

// execution is one call of a job func.
type execution struct {
	info       jobs.Info
	start, end time.Time
	err        error
}

// journal records executions of job funcs, from every replica.
type journal struct {
	mu   sync.Mutex
	runs []execution
	ch   chan execution // each start, if not nil (buffered)
}

func newJournal() *journal { return &journal{ch: make(chan execution, 10000)} }

// fn returns a job func that records its runs and then does work.
func (j *journal) fn(work func(ctx context.Context) error) jobs.Func {
	return func(ctx context.Context) error {
		info, ok := jobs.InfoFrom(ctx)
		if !ok {
			return errors.New("no run info in the run's ctx")
		}
		x := execution{info: info, start: time.Now()}
		select {
		case j.ch <- x:
		default:
		}
		var err error
		if work != nil {
			err = work(ctx)
		}
		x.end, x.err = time.Now(), err
		j.mu.Lock()
		j.runs = append(j.runs, x)
		j.mu.Unlock()
		return err
	}
}

func (j *journal) all() []execution {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]execution(nil), j.runs...)
}

// byJob returns the finished executions of each job, in tick order.
func (j *journal) byJob() map[string][]execution {
	out := make(map[string][]execution)
	for _, x := range j.all() {
		out[x.info.Job] = append(out[x.info.Job], x)
	}
	for _, xs := range out {
		sort.Slice(xs, func(a, b int) bool { return xs[a].info.Tick.Before(xs[b].info.Tick) })
	}
	return out
}

// awaitStart waits for the next execution to start.
func (j *journal) awaitStart(t *testing.T, within time.Duration) execution {
	t.Helper()
	select {
	case x := <-j.ch:
		return x
	case <-time.After(within):
		t.Fatalf("no run started within %v", within)
		return execution{}
	}
}

// checkOncePerTick checks that each job ran each of its ticks at most once,
// that tokens grow with ticks, and, if every is not 0, that no tick between
// the first and the last was left out.
func checkOncePerTick(t *testing.T, byJob map[string][]execution, every time.Duration) {
	t.Helper()
	for job, xs := range byJob {
		for i := 1; i < len(xs); i++ {
			prev, cur := xs[i-1].info, xs[i].info
			if cur.Tick.Equal(prev.Tick) {
				t.Errorf("job %s: tick %s ran twice: on %s (token %d) and on %s (token %d)",
					job, cur.Tick.Format(time.RFC3339Nano), prev.Replica, prev.Token, cur.Replica, cur.Token)
				continue
			}
			if cur.Token <= prev.Token {
				t.Errorf("job %s: token %d of tick %s is not above %d of tick %s", job, cur.Token, cur.Tick, prev.Token, prev.Tick)
			}
			if every > 0 && cur.Tick.Sub(prev.Tick) != every {
				t.Errorf("job %s: ticks %s and %s ran, nothing between", job, prev.Tick.Format(time.RFC3339), cur.Tick.Format(time.RFC3339))
			}
		}
	}
}

func jobName(i int) string { return fmt.Sprintf("job-%d", i) }

// step moves clk to the time of its earliest timer once at least waiters
// timers wait (each trigger loop waits for its next tick on one): that
// tick fires. It returns the tick.
func step(t *testing.T, clk *testclock.Fake, waiters int) time.Time {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		n, changed := clk.Waiting()
		if n >= waiters {
			at, _ := clk.Next()
			clk.Set(at)
			return at
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%d timers wait on the fake clock (now %s), want %d", n, fmtT(clk.Now()), waiters)
			return time.Time{}
		}
	}
}

// settle waits until waiters timers wait on clk (every trigger loop has
// fired its tick and waits for the next one) and none of the replicas
// handles a tick of job (of any job if job is ""): a tick stepped to next
// is fired everywhere, not skipped as busy.
func settle(t *testing.T, clk *testclock.Fake, waiters int, job string, fleet ...*replica) {
	t.Helper()
	testkit.Eventually(t, 10*time.Second, fmt.Sprintf("%d loops wait for their next tick, none handles a tick of %s", waiters, job), func() bool {
		if n, _ := clk.Waiting(); n < waiters {
			return false
		}
		for _, r := range fleet {
			for _, st := range r.s.Status() {
				if (job == "" || st.Job == job) && st.Running {
					return false
				}
			}
		}
		return true
	})
}

// stepUntil steps clk one tick at a time, each once the fleet has settled
// (settle), until cond holds; it fails the test after 100 ticks.
func stepUntil(t *testing.T, clk *testclock.Fake, waiters int, job string, fleet []*replica, what string, cond func() bool) {
	t.Helper()
	for range 100 {
		settle(t, clk, waiters, job, fleet...)
		if cond() {
			return
		}
		step(t, clk, waiters)
	}
	t.Fatalf("%s: not within 100 ticks", what)
}
