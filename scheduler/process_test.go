package scheduler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// The test binary runs as a replica process when replicaEnv is set: a
// Scheduler with one job, stopped by SIGTERM or SIGINT, that reports what
// it does as JSON lines on stdout.
const replicaEnv = "LOCKCRON_TEST_REPLICA"

// replicaConfig is what a replica process is told, as JSON in replicaEnv.
type replicaConfig struct {
	ID       string        `json:"id"`
	Addr     string        `json:"addr"`
	Job      string        `json:"job"`
	Schedule string        `json:"schedule"`
	Policy   string        `json:"policy"`
	Lease    time.Duration `json:"lease"`
	Work     time.Duration `json:"work"`
	Grace    time.Duration `json:"grace"`
}

// event is one line of a replica's report.
type event struct {
	Ev      string    `json:"ev"` // ready, start, return, exit
	Replica string    `json:"replica"`
	Tick    time.Time `json:"tick"`
	Token   int64     `json:"token"`
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"` // wall clock: every process runs on this machine
	Err     string    `json:"err,omitempty"`
}

func replicaMain() int {
	var cfg replicaConfig
	if err := json.Unmarshal([]byte(os.Getenv(replicaEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "replica config:", err)
		return 2
	}
	var outMu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	emit := func(e event) {
		e.Replica, e.At = cfg.ID, time.Now()
		outMu.Lock()
		_ = enc.Encode(e)
		outMu.Unlock()
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	log := hclog.New(&hclog.LoggerOptions{Name: cfg.ID, Output: os.Stderr, Level: hclog.Info})
	c, err := lock.New(rdb, lock.WithClientID(cfg.ID), lock.WithLeaseTime(cfg.Lease), lock.WithLogger(log))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer c.Close()
	s, err := scheduler.New(c, scheduler.WithLogger(log), scheduler.WithShutdownTimeout(cfg.Grace))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	err = s.Add(scheduler.Job{
		Name: cfg.Job, Schedule: cfg.Schedule, OnShutdown: scheduler.ShutdownPolicy(cfg.Policy),
		Run: jobs.Func(func(ctx context.Context) error {
			info, _ := jobs.InfoFrom(ctx)
			emit(event{Ev: "start", Tick: info.Tick, Token: info.Token, Attempt: info.Attempt})
			t := time.NewTimer(cfg.Work)
			defer t.Stop()
			var err error
			select {
			case <-t.C:
			case <-ctx.Done():
				err = context.Cause(ctx)
			}
			e := event{Ev: "return", Tick: info.Tick, Token: info.Token, Attempt: info.Attempt}
			if err != nil {
				e.Err = err.Error()
			}
			emit(e)
			return err
		}),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second signal kills the process
	}()
	emit(event{Ev: "ready"})
	err = s.Run(ctx)
	emit(event{Ev: "exit"})
	if !errors.Is(err, scheduler.ErrClosed) {
		fmt.Fprintln(os.Stderr, "run:", err)
		return 1
	}
	return 0
}

// proc is a replica process started by a test.
type proc struct {
	id     string
	cmd    *exec.Cmd
	events chan event
	exited chan struct{}
}

func startReplica(t *testing.T, cfg replicaConfig) *proc {
	t.Helper()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), replicaEnv+"="+string(b))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{id: cfg.ID, cmd: cmd, events: make(chan event, 100), exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e event
			if err := json.Unmarshal(sc.Bytes(), &e); err == nil {
				p.events <- e
			}
		}
		_ = cmd.Wait()
		close(p.events)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("replica %s stderr:\n%s", cfg.ID, cmd.Stderr.(*lockedWriter).String())
		}
	})
	return p
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// newLockedWriter returns an empty lockedWriter: a log's output, for
// tests to read while replicas write it.
func newLockedWriter() *lockedWriter { return &lockedWriter{w: &strings.Builder{}} }

// count is how many times s occurs in what was written.
func (l *lockedWriter) count(s string) int { return strings.Count(l.String(), s) }

// eventLog is the events of several replicas, merged in the order they
// arrive. Two processes' lines may arrive in either order (the survivor's
// "start" before the victim's "return"), so a wait for one kind keeps the
// events of other kinds that it passes for the waits after it.
type eventLog struct {
	ch   <-chan event
	kept []event
}

// next returns the first event of kind ev, kept or still to come.
func (l *eventLog) next(t *testing.T, ev string, within time.Duration) event {
	t.Helper()
	for i, e := range l.kept {
		if e.Ev == ev {
			l.kept = slices.Delete(l.kept, i, i+1)
			return e
		}
	}
	deadline := time.After(within)
	for {
		select {
		case e, ok := <-l.ch:
			if !ok {
				t.Fatalf("replicas exited before a %q event", ev)
			}
			if e.Ev == ev {
				return e
			}
			l.kept = append(l.kept, e)
		case <-deadline:
			t.Fatalf("no %q event within %v", ev, within)
		}
	}
}

// seen reports an event of kind ev kept or arrived by now, without waiting.
func (l *eventLog) seen(ev string) (event, bool) {
drain:
	for {
		select {
		case e, ok := <-l.ch:
			if !ok {
				break drain
			}
			l.kept = append(l.kept, e)
		default:
			break drain
		}
	}
	for _, e := range l.kept {
		if e.Ev == ev {
			return e, true
		}
	}
	return event{}, false
}

// fanIn merges the events of procs, until they all exit.
func fanIn(procs ...*proc) *eventLog {
	out := make(chan event, 100)
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range p.events {
				out <- e
			}
		}()
	}
	go func() {
		wg.Wait()
		close(out)
	}()
	return &eventLog{ch: out}
}

// next returns the next event of kind ev, skipping others.
func next(t *testing.T, events <-chan event, ev string, within time.Duration) event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case e, ok := <-events:
			if !ok {
				t.Fatalf("replicas exited before a %q event", ev)
			}
			if e.Ev == ev {
				return e
			}
		case <-deadline:
			t.Fatalf("no %q event within %v", ev, within)
		}
	}
}

// oneTickSoon is a schedule with one tick a day, at least lead from now,
// and that tick.
func oneTickSoon(lead time.Duration) (string, time.Time) {
	tick := time.Now().UTC().Add(lead).Truncate(time.Second).Add(time.Second)
	return fmt.Sprintf("CRON_TZ=UTC %d %d %d * * *", tick.Second(), tick.Minute(), tick.Hour()), tick
}

func startReplicas(t *testing.T, n int, cfg replicaConfig) []*proc {
	t.Helper()
	procs := make([]*proc, n)
	for i := range procs {
		c := cfg
		c.ID = fmt.Sprintf("r%d", i+1)
		procs[i] = startReplica(t, c)
	}
	for _, p := range procs {
		next(t, p.events, "ready", 20*time.Second)
	}
	return procs
}

func byID(procs []*proc, id string) *proc {
	for _, p := range procs {
		if p.id == id {
			return p
		}
	}
	return nil
}

func TestProcessSIGKILLHandoff(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	spec, tick := oneTickSoon(3 * time.Second)
	const lease = time.Second
	procs := startReplicas(t, 2, replicaConfig{Addr: srv.Addr(), Job: "report", Schedule: spec,
		Policy: "handoff", Lease: lease, Work: 5 * time.Second, Grace: 3 * time.Second})
	events := fanIn(procs...)
	first := events.next(t, "start", time.Until(tick)+10*time.Second)
	if !first.Tick.Equal(tick) || first.Attempt != 1 {
		t.Fatalf("first run: tick %s attempt %d; want %s, 1", first.Tick, first.Attempt, tick)
	}
	victim := byID(procs, first.Replica)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	again := events.next(t, "start", lease+3*time.Second)
	if again.Replica == first.Replica || !again.Tick.Equal(tick) || again.Attempt != 2 || again.Token <= first.Token {
		t.Fatalf("re-run after SIGKILL: %+v; want another replica, tick %s, attempt 2, token above %d", again, tick, first.Token)
	}
	// One lease, plus a margin for the waiter's TTL timer and the claim.
	t.Logf("killed → survivor started: %v (lease %v)", again.At.Sub(killed), lease)
	if d := again.At.Sub(killed); d > lease+time.Second {
		t.Fatalf("the survivor took over %v after the kill, more than one lease (%v) plus 1s", d, lease)
	}
}

func TestProcessSIGKILLAbandon(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	spec, tick := oneTickSoon(3 * time.Second)
	const lease = time.Second
	procs := startReplicas(t, 2, replicaConfig{Addr: srv.Addr(), Job: "report", Schedule: spec,
		Policy: "abandon", Lease: lease, Work: 5 * time.Second, Grace: 3 * time.Second})
	events := fanIn(procs...)
	first := events.next(t, "start", time.Until(tick)+10*time.Second)
	victim := byID(procs, first.Replica)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The survivor counts the tick as interrupted and does not run it.
	c, err := lock.New(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := fleet.New(c).Ledger("report", "report")
	if err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Context(t)
	var st fleet.LedgerState
	testkit.Eventually(t, lease+3*time.Second, "the tick recorded as interrupted", func() bool {
		st, err = g.State(ctx)
		return err == nil && st.Outcome == string(scheduler.OutcomeInterrupted)
	})
	if st.Done != tick.UnixMilli() {
		t.Fatalf("ledger done = %d, want the tick %d", st.Done, tick.UnixMilli())
	}
	if e, ok := events.seen("start"); ok {
		t.Fatalf("the abandoned tick ran again: %+v", e)
	}
}

func TestProcessSIGTERMHandoff(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	spec, tick := oneTickSoon(3 * time.Second)
	const grace = 3 * time.Second
	procs := startReplicas(t, 2, replicaConfig{Addr: srv.Addr(), Job: "report", Schedule: spec,
		Policy: "handoff", Lease: 30 * time.Second, Work: 5 * time.Second, Grace: grace})
	// Unlock messages tell when the lock is freed.
	ps := srv.Client().Subscribe(testkit.Context(t), "lockcron:{report}:channel")
	defer ps.Close()
	if _, err := ps.Receive(testkit.Context(t)); err != nil {
		t.Fatal(err)
	}
	events := fanIn(procs...)
	first := events.next(t, "start", time.Until(tick)+10*time.Second)
	victim := byID(procs, first.Replica)
	if err := victim.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	ret := events.next(t, "return", grace)
	if ret.Replica != first.Replica || !strings.Contains(ret.Err, scheduler.ErrClosed.Error()) {
		t.Fatalf("the stopped run returned %+v; want its ctx cancelled with ErrClosed", ret)
	}
	msg, err := ps.ReceiveMessage(testkit.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	if !strings.HasPrefix(msg.Payload, first.Replica+":") {
		t.Fatalf("unlock message %q, want one from %s", msg.Payload, first.Replica)
	}
	// Released by the stop, not expired: well within the 30s lease, with
	// room for a loaded machine (unloaded: about 15-25ms, and 40-70ms to
	// the survivor's start; the fault suite reports these figures).
	if d := freed.Sub(ret.At); d > 3*time.Second {
		t.Fatalf("lock freed %v after the job returned, want within 3s (a tenth of the lease)", d)
	}
	again := events.next(t, "start", 5*time.Second)
	t.Logf("job returned → lock freed: %v; lock freed → survivor started: %v", freed.Sub(ret.At), again.At.Sub(freed))
	if again.Replica == first.Replica || !again.Tick.Equal(tick) || again.Attempt != 2 {
		t.Fatalf("after SIGTERM: %+v; want the survivor on tick %s, attempt 2", again, tick)
	}
	if d := again.At.Sub(freed); d > 3*time.Second {
		t.Fatalf("the survivor started the tick %v after the lock was freed, want within 3s (a tenth of the lease)", d)
	}
	select {
	case <-victim.exited:
	case <-time.After(grace + time.Second - time.Since(signalled)):
		t.Fatalf("the stopped replica did not exit within its grace period %v", grace)
	}
	if code := victim.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the stopped replica exited with %d", code)
	}
}
