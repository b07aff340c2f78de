package scheduler_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// replyLoser drops the reply of the next command written whose bytes hold
// all of its marks: the command reaches Redis and runs, the client reads
// EOF instead of its reply, and go-redis sends it again on a new
// connection (its retry after a lost reply).
type replyLoser struct {
	mu    sync.Mutex
	marks [][]byte // armed: the marks of the command whose reply is lost
	lost  int      // replies lost so far
}

func (l *replyLoser) arm(marks ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marks = nil
	for _, m := range marks {
		l.marks = append(l.marks, []byte(m))
	}
}

func (l *replyLoser) lostReplies() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// client returns a go-redis client of srv, with retries, whose
// connections lose replies as armed.
func (l *replyLoser) client(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	opt := srv.Options()
	opt.MaxRetries = 3
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &losingConn{Conn: c, l: l}, nil
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

type losingConn struct {
	net.Conn
	l    *replyLoser
	lose bool // the reply to the last write is to be lost
}

func (c *losingConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	if len(c.l.marks) > 0 {
		all := true
		for _, m := range c.l.marks {
			all = all && bytes.Contains(p, m)
		}
		if all {
			c.l.marks, c.lose = nil, true
			c.l.lost++
		}
	}
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *losingConn) Read(p []byte) (int, error) {
	if c.lose {
		c.lose = false
		_, _ = c.Conn.Read(p) // the reply: the command has run
		_ = c.Conn.Close()
		return 0, io.EOF
	}
	return c.Conn.Read(p)
}

// A freeze whose reply is lost, and which go-redis therefore sends again,
// is made once, and Freeze answers its id; an unfreeze whose reply is lost
// answers success, not "no such freeze" (DESIGN.md: no script may run
// twice because of a client retry).
func TestFreezeLostReplyMadeOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var l replyLoser
	c, err := lock.New(l.client(t, srv), lock.WithClientID("r1"))
	if err != nil {
		t.Fatal(err)
	}
	r := newReplica(t, c, "r1")
	r.add(t, scheduler.Job{Name: "report", Schedule: "@every 1h", Run: newJournal().fn(nil)})
	ctx := testkit.Context(t)
	if _, err := r.s.Freezes(ctx); err != nil { // loads the script: the EVALSHA below runs it
		t.Fatal(err)
	}
	l.arm("freezes:{freezes}", "\r\nadd\r\n")
	f, err := r.s.Freeze(ctx, "", time.Now().Add(time.Hour), "release")
	if err != nil {
		t.Fatalf("Freeze with its reply lost: %v", err)
	}
	if l.lostReplies() != 1 {
		t.Fatalf("%d replies lost, want 1: the test did not lose the add's", l.lostReplies())
	}
	fs, err := r.s.Freezes(ctx)
	if err != nil || len(fs) != 1 || fs[0].ID != f.ID || !fs[0].Created.Equal(f.Created) {
		t.Fatalf("Freezes after a retried add = %+v, %v; want the one freeze %+v", fs, err, f)
	}
	l.arm("freezes:{freezes}", "\r\ndel\r\n")
	if err := r.s.Unfreeze(ctx, f.ID); err != nil {
		t.Errorf("Unfreeze with its reply lost: %v, want success", err)
	}
	if l.lostReplies() != 2 {
		t.Fatalf("%d replies lost, want 2: the test did not lose the del's", l.lostReplies())
	}
	if fs, err := r.s.Freezes(ctx); err != nil || len(fs) != 0 {
		t.Errorf("Freezes after the unfreeze = %+v, %v; want none", fs, err)
	}
	if err := r.s.Unfreeze(ctx, f.ID); !errors.Is(err, scheduler.ErrUnknownFreeze) {
		t.Errorf("a second Unfreeze = %v, want ErrUnknownFreeze", err)
	}
}

// slowFreezes is a go-redis hook that holds each read of the freezes (the
// freeze script's "list") for delay before sending it.
type slowFreezes struct{ delay time.Duration }

func (h slowFreezes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h slowFreezes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h slowFreezes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		var freezes, list bool
		for _, a := range cmd.Args() {
			s, _ := a.(string)
			freezes = freezes || strings.HasSuffix(s, ":freezes:{freezes}")
			list = list || s == "list"
		}
		if freezes && list {
			select {
			case <-time.After(h.delay):
			case <-ctx.Done():
			}
		}
		return next(ctx, cmd)
	}
}

// A replica that starts during a freeze, while every other replica is
// down, runs none of the frozen ticks, though its freezes are read late:
// not the catch-up's (MisfireRunOnce), whose missed ticks the freeze
// holds, so none is missed either, nor its first ticks. Their exclusions
// are recorded. (The catch-up fired before the first read of the freezes:
// one restart in five ran a frozen tick.)
func TestStartDuringFreezeRunsNoFrozenTick(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "report"
	ctx := testkit.Context(t)
	admin := newRedisReplica(t, srv, "admin", nil)
	admin.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Run: newJournal().fn(nil)})
	f, err := admin.s.Freeze(ctx, "", time.Now().Add(time.Hour), "release")
	if err != nil {
		t.Fatal(err)
	}
	// The fleet's last tick was the one before the freeze; then every
	// replica was down for two ticks, both in the freeze.
	seedLedger(t, srv, job, job, f.Created.Truncate(time.Second))
	time.Sleep(time.Until(f.Created.Truncate(time.Second).Add(2500 * time.Millisecond))) // the clock, not a sync

	rdb := srv.Client()
	rdb.AddHook(slowFreezes{delay: 1500 * time.Millisecond})
	c, err := lock.New(rdb, lock.WithClientID("r1"))
	if err != nil {
		t.Fatal(err)
	}
	m, j := newMeter(), newJournal()
	r := newReplica(t, c, "r1", m.option())
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Misfire: scheduler.MisfireRunOnce, Run: j.fn(nil)})
	start := time.Now()
	r.start()
	testkit.Eventually(t, 30*time.Second, "two ticks after the start recorded excluded", func() bool {
		n := 0
		for ms := range excludedRuns(t, r.s, job) {
			if time.UnixMilli(ms).After(start) {
				n++
			}
		}
		return n >= 2
	})
	r.stop(t)
	for _, x := range j.all() {
		t.Errorf("tick %v ran during the freeze (from %v)", x.info.Tick, f.Created)
	}
	if n := m.runs(t, job, scheduler.OutcomeMissed); n != 0 {
		t.Errorf("runs{outcome=missed} = %d, want 0: the ticks the fleet was down for were frozen", n)
	}
}

// The catch-up counts no tick the job's calendar excludes as missed, and
// MisfireRunOnce runs the latest tick that would run, not an excluded one.
func TestCatchUpSkipsExcludedTicks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "misfire-calendar"
	seed, start := fakeStart, fakeStart.Add(5500*time.Millisecond)
	seedLedger(t, srv, job, job, seed)
	excluded := calendar{"late", func(tk time.Time) bool { return tk.After(seed.Add(3500*time.Millisecond)) && tk.Before(start) }}
	m, clk, j := newMeter(), testclock.NewFake(start), newJournal()
	r := newRedisReplica(t, srv, "r1", nil, m.option(), scheduler.WithClock(clk))
	r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Misfire: scheduler.MisfireRunOnce, Exclude: []scheduler.Calendar{excluded}, Run: j.fn(nil)})
	r.start()
	latest := seed.Add(3 * time.Second) // seed+4s and seed+5s are excluded
	if x := j.awaitStart(t, 10*time.Second); !x.info.Tick.Equal(latest) {
		t.Fatalf("catch-up ran tick %s; want %s, the latest that would run", fmtT(x.info.Tick), fmtT(latest))
	}
	testkit.Eventually(t, 10*time.Second, "the run finished", func() bool {
		st := statusOf(t, r.s, job)
		return !st.Running && st.LastOutcome == scheduler.OutcomeRan
	})
	r.stop(t)
	if n := m.runs(t, job, scheduler.OutcomeMissed); n != 2 {
		t.Errorf("runs{outcome=missed} = %d, want 2: %s and %s, not the excluded ones", n, fmtT(seed.Add(time.Second)), fmtT(seed.Add(2*time.Second)))
	}
	noStart(t, j)
}
