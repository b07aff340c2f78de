package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
	"github.com/lockcron/lockcron/internal/redistest"
)

// Scenario is one fault schedule and the fleet it runs against.
type Scenario struct {
	Name  string
	Quick bool // in `make test` too

	Replicas int
	Offsets  []time.Duration // clock offset of the first replicas (skewed binary)
	Lease    time.Duration
	Timeout  time.Duration // redis.timeout
	Ack      bool          // lock.replica_ack with one replica
	Sentinel bool          // a primary, a replica and three sentinels
	Proxy    bool          // replicas reach Redis through the fault proxy
	// RedisArgs are extra redis-server arguments of the server under test.
	RedisArgs []string

	Period   time.Duration // every job's schedule: every Period (whole seconds)
	ExecJobs int           // exec jobs running the worker for Hold
	Hold     time.Duration
	HTTPJobs int // http jobs answered by the suite after HTTPHold
	HTTPHold time.Duration
	Busy     int // processes spinning on a core each, beside the replicas

	Length      time.Duration // the fault phase
	QuickLength time.Duration // the fault phase when not -chaos.full, if set
	Faults      func(f *Faults)

	// NotSurvived says what breaks, for a scenario that is known not to
	// keep every invariant: its violations are reported, not failed.
	NotSurvived string

	// Chain adds the exec jobs chainparent, on the schedule, and
	// chainchild, after it (chain_test.go), and checks the chain.
	Chain bool
}

// Faults is what a scenario's fault schedule works with.
type Faults struct {
	c      *Cluster
	rng    *rand.Rand
	t      *testing.T
	env    *Env
	end    time.Time
	seen   int // events of the oracle read so far
	open   map[string]oracle.Event
	notes  []string
	broken []string
	// recorded are the ticks of chainParent whose finish the chain
	// scenario saw in its ledger's chain record (chainRecorded).
	recorded []string
}

func (f *Faults) more() bool { return time.Now().Before(f.end) }

// sleep waits d: the fault schedule's own pace, not a synchronisation.
func (f *Faults) sleep(d time.Duration) {
	if d > 0 {
		time.Sleep(d)
	}
}

// between returns a random duration in [lo, hi).
func (f *Faults) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(f.rng.Int64N(int64(hi-lo)))
}

func (f *Faults) note(format string, args ...any) {
	f.notes = append(f.notes, fmt.Sprintf(format, args...))
}

// miss records a figure of the scenario that missed its bound.
func (f *Faults) miss(format string, args ...any) {
	f.broken = append(f.broken, fmt.Sprintf(format, args...))
}

// running waits until a run of a job whose name starts with prefix has
// been going for at least age (and less than maxAge) on a replica that is
// up, and returns it; false at the end of the fault phase.
func (f *Faults) running(prefix string, age, maxAge time.Duration) (oracle.Event, bool) {
	if f.open == nil {
		f.open = map[string]oracle.Event{}
	}
	for f.more() {
		evs, err := f.env.oracle.EventsFrom(context.Background(), f.seen)
		if err != nil {
			f.t.Fatal(err)
		}
		f.seen += len(evs)
		for _, ev := range evs {
			switch ev.Kind {
			case oracle.Start:
				f.open[ev.ID] = ev
			case oracle.End:
				delete(f.open, ev.ID)
			}
		}
		now := oracle.Mono()
		var pick []oracle.Event
		for id, ev := range f.open {
			a := time.Duration(now - ev.Mono)
			if a > 30*time.Second {
				delete(f.open, id)
				continue
			}
			if strings.HasPrefix(ev.Job, prefix) && a >= age && a < maxAge && f.c.byID(ev.Replica) != nil {
				pick = append(pick, ev)
			}
		}
		if len(pick) > 0 {
			return pick[f.rng.IntN(len(pick))], true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return oracle.Event{}, false
}

const (
	lease   = 2 * time.Second
	timeout = 900 * time.Millisecond
)

func base(name string) *Scenario {
	return &Scenario{
		Name: name, Replicas: 5, Lease: lease, Timeout: timeout,
		Period: time.Second, ExecJobs: 2, Hold: 400 * time.Millisecond,
		HTTPJobs: 1, HTTPHold: 200 * time.Millisecond,
		Length: 20 * time.Second,
	}
}

func scenarios() []*Scenario {
	var out []*Scenario
	add := func(sc *Scenario) { out = append(out, sc) }

	sc := base("no faults")
	sc.Quick = true
	sc.Length, sc.QuickLength = 10*time.Second, 8*time.Second
	add(sc)

	sc = base("SIGKILL of the replica running a job")
	sc.Quick, sc.Hold = true, 800*time.Millisecond
	sc.Length, sc.QuickLength = 25*time.Second, 12*time.Second
	sc.Faults = func(f *Faults) {
		for f.more() {
			ev, ok := f.running("exec", 150*time.Millisecond, 600*time.Millisecond)
			if !ok {
				return
			}
			r := f.c.byID(ev.Replica)
			k := f.c.kill(r, ev.Job, ev.Tick)
			f.c.fault(Window{What: "SIGKILL " + r.ID, From: k.At, To: k.At, ReplicaOff: r.ID})
			f.sleep(f.between(500*time.Millisecond, 1500*time.Millisecond))
			f.c.start(0) // the autoscaler's replacement
			f.sleep(f.between(time.Second, 3*time.Second))
		}
	}
	add(sc)

	sc = base("SIGTERM of the replica running a job")
	sc.Quick, sc.Hold = true, 800*time.Millisecond
	sc.Length, sc.QuickLength = 25*time.Second, 12*time.Second
	sc.Faults = func(f *Faults) {
		for f.more() {
			ev, ok := f.running("exec", 150*time.Millisecond, 600*time.Millisecond)
			if !ok {
				return
			}
			r := f.c.byID(ev.Replica)
			at := oracle.Mono()
			if err := f.c.term(r); err != nil {
				f.t.Error(err)
			}
			f.c.fault(Window{What: "SIGTERM " + r.ID, From: at, To: oracle.Mono(), ReplicaOff: r.ID})
			f.c.start(0)
			f.sleep(f.between(time.Second, 3*time.Second))
		}
	}
	add(sc)

	sc = base("dropped replies (5%, go-redis retries)")
	sc.Quick, sc.Proxy = true, true
	sc.QuickLength = 10 * time.Second
	sc.Faults = func(f *Faults) {
		// Runs recorded lost_lock before (in the soak, by an earlier fault)
		// are not this fault's.
		before := f.c.sum("lockcron_job_runs_total", `lockcron_outcome="lost_lock"`)
		dropped := f.c.proxy.Stats().DroppedReplies
		f.c.proxy.SetDropReplies(0.05, f.rng.Int64())
		f.sleep(time.Until(f.end))
		f.c.proxy.SetDropReplies(0, 0)
		lost := f.c.sum("lockcron_job_runs_total", `lockcron_outcome="lost_lock"`) - before
		f.note("replies dropped: %d; runs recorded lost_lock: %.0f", f.c.proxy.Stats().DroppedReplies-dropped, lost)
		if lost > 0 {
			f.miss("%.0f runs recorded lost_lock although no lock was lost", lost)
		}
	}
	add(sc)

	// A paused host pauses its exec jobs too: a job resumed after its
	// lease is refused by the fence, and its tick has been run again.
	sc = base("SIGSTOP of a replica (paused host) 0.5×, 1×, 3× lease")
	sc.HTTPJobs = 0
	sc.Length = 24 * time.Second
	sc.Faults = pauseHosts(0.5, 1, 3)
	add(sc)

	// An http job's work is done elsewhere, and goes on while the host that
	// called it is paused: if it completes during a pause longer than the
	// lease, its replica cannot record it, and the tick runs again.
	sc = base("SIGSTOP of a replica 3× lease, http job")
	sc.ExecJobs, sc.HTTPJobs, sc.HTTPHold = 1, 1, 400*time.Millisecond
	sc.Length = 16 * time.Second
	sc.Faults = pauseHosts(3, 3)
	sc.NotSurvived = "a run that completes elsewhere while its replica is paused past the lease is not recorded, and its tick runs again (at least once)"
	add(sc)

	sc = base("clock skew ±0.8 s")
	sc.Offsets = []time.Duration{0, 800 * time.Millisecond, -800 * time.Millisecond, 400 * time.Millisecond, -400 * time.Millisecond}
	sc.Length = 15 * time.Second
	add(sc)

	// The promise holds for skew up to the period: a 6s period here.
	sc = base("clock skew ±5 s (6 s period)")
	sc.Offsets = []time.Duration{0, 5 * time.Second, -5 * time.Second, 2500 * time.Millisecond, -2500 * time.Millisecond}
	sc.Period = 6 * time.Second
	sc.Length = 24 * time.Second
	add(sc)

	sc = base("Redis paused 0.5× lease, repeated")
	sc.Length = 15 * time.Second
	sc.Faults = pauseRedis(0.5)
	add(sc)

	// Nothing can be recorded while Redis is paused: a run that ends
	// during a pause past the lease is run again once its lock expires.
	sc = base("Redis paused 2× lease, repeated")
	sc.Length = 15 * time.Second
	sc.Faults = pauseRedis(2)
	sc.NotSurvived = "a run that ends while Redis is paused past the lease is not recorded, and its tick runs again (at least once)"
	add(sc)

	sc = base("Redis killed and restarted empty, repeated")
	sc.NotSurvived = "an empty restart without persistence loses the ledger and the locks"
	sc.Faults = func(f *Faults) {
		for f.more() {
			f.sleep(f.between(3*time.Second, 5*time.Second))
			at := oracle.Mono()
			f.c.redis.Restart()
			f.c.fault(Window{What: "Redis restarted empty", From: at, To: oracle.Mono(), RedisDown: true})
		}
	}
	add(sc)

	sc = base("Redis killed and restarted with appendfsync always, repeated")
	sc.RedisArgs = []string{"--appendonly", "yes", "--appendfsync", "always"}
	sc.Faults = func(f *Faults) {
		for f.more() {
			f.sleep(f.between(3*time.Second, 5*time.Second))
			at := oracle.Mono()
			f.c.redis.Restart()
			f.c.fault(Window{What: "Redis restarted from its AOF", From: at, To: oracle.Mono(), RedisDown: true})
		}
	}
	add(sc)

	sc = base("Pub/Sub connections killed just before an unlock")
	sc.Faults = func(f *Faults) {
		n := 0
		for f.more() {
			if _, ok := f.running("exec", f.c.sc.Hold-120*time.Millisecond, f.c.sc.Hold-40*time.Millisecond); !ok {
				break
			}
			if _, err := f.c.sutDo(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub"); err == nil {
				n++
			}
			f.sleep(f.between(500*time.Millisecond, 1500*time.Millisecond))
		}
		f.note("Pub/Sub kills: %d", n)
	}
	add(sc)

	sc = base("blackholed link for 2× lease")
	sc.Proxy = true
	sc.NotSurvived = "a run that ends while its replica is cut off from Redis for longer than the lease is not recorded, and its tick runs again (at least once)"
	sc.Faults = func(f *Faults) {
		for f.more() {
			f.sleep(f.between(3*time.Second, 5*time.Second))
			at := oracle.Mono()
			f.c.proxy.SetBlackhole(true)
			f.sleep(2 * lease)
			f.c.proxy.SetBlackhole(false)
			f.c.fault(Window{What: "blackhole", From: at, To: oracle.Mono(), RedisDown: true})
		}
	}
	add(sc)

	sc = base("added round trip 0.2×–0.5× lease")
	sc.Proxy = true
	sc.Period = 2 * time.Second
	sc.Hold = 300 * time.Millisecond
	sc.Length = 32 * time.Second
	sc.Faults = func(f *Faults) {
		var prev time.Duration
		for _, x := range []float64{0.2, 0.3, 0.4, 0.5} {
			rtt := time.Duration(x * float64(lease))
			before := f.c.lost()
			at := oracle.Mono()
			f.c.proxy.SetDelay(rtt)
			f.sleep(8 * time.Second)
			if rtt >= timeout {
				// No command can complete within redis.timeout: as good as
				// unreachable.
				// Claims take a few round trips of the phase before: a
				// tick due that long before it was still being claimed;
				// a finish sent less than one round trip before it met it.
				f.c.fault(Window{What: fmt.Sprintf("round trip %v", rtt), From: at, To: oracle.Mono(), RedisDown: true, Lead: time.Second + 4*prev, InFlight: prev})
			}
			prev = rtt
			f.note("round trip %.1f× lease (%v, redis.timeout %v): locks lost %.0f", x, rtt, timeout, f.c.lost()-before)
			if x < 0.4 && f.c.lost() > before {
				f.miss("false lock loss at a round trip of %.1f× the lease", x)
			}
		}
		f.c.proxy.SetDelay(0)
	}
	add(sc)

	sc = base("Sentinel failover with replica_ack")
	sc.Sentinel, sc.Ack = true, true
	sc.Timeout = 600 * time.Millisecond
	sc.Faults = sentinelFailover
	add(sc)

	sc = base("Sentinel failover to a lagging replica, without replica_ack")
	sc.Sentinel = true
	sc.Faults = laggingFailover
	sc.NotSurvived = "a failover without replica acknowledgement can lose a lock the replica had not received"
	add(sc)

	sc = base("CPU starvation: 200 jobs every second, 2 busy loops")
	sc.ExecJobs, sc.HTTPJobs, sc.HTTPHold = 0, 200, 0
	sc.Busy = 2
	sc.Length = 20 * time.Second
	add(sc)

	add(chainScenario())
	return out
}

// pauseRedis pauses the Redis under test for x × the lease, every few
// seconds. A pause past the lease expires every lock: its window is
// excused. A shorter one is ridden out: its ticks must run.
func pauseRedis(x float64) func(f *Faults) {
	return func(f *Faults) {
		for f.more() {
			f.sleep(f.between(2*time.Second, 4*time.Second))
			at := oracle.Mono()
			f.c.redis.Pause()
			f.sleep(time.Duration(x * float64(lease)))
			f.c.redis.Resume()
			f.c.fault(Window{What: fmt.Sprintf("Redis paused %.1f× lease", x), From: at, To: oracle.Mono(), RedisDown: x >= 1})
		}
	}
}

// pauseHosts pauses, for each of xs × the lease in turn, the host of a
// replica running a job (of the http jobs if the scenario has no exec job
// running the worker... the exec ones otherwise).
func pauseHosts(xs ...float64) func(f *Faults) {
	return func(f *Faults) {
		prefix := "exec"
		if f.c.sc.HTTPJobs > 0 {
			prefix = "http"
		}
		for _, x := range xs {
			if !pauseHost(f, x, prefix, "") {
				return
			}
			f.sleep(f.between(2*time.Second, 4*time.Second))
		}
	}
}

// pauseHost pauses for x × the lease the host of a replica running a job
// whose name starts with prefix, and none whose name starts with spare (if
// not ""), then resumes it; false if there was none before the end of the
// fault phase.
func pauseHost(f *Faults, x float64, prefix, spare string) bool {
	for {
		ev, ok := f.running(prefix, 50*time.Millisecond, 300*time.Millisecond)
		if !ok {
			return false
		}
		if spare != "" && f.runningOn(ev.Replica, spare) {
			f.sleep(10 * time.Millisecond) // the pace of running's own polling
			continue
		}
		r := f.c.byID(ev.Replica)
		at := oracle.Mono()
		pids := f.c.pauseHost(r)
		f.sleep(time.Duration(x * float64(lease)))
		f.c.resumeHost(r, pids)
		f.c.fault(Window{What: fmt.Sprintf("SIGSTOP %s %.1f× lease", r.ID, x), From: at, To: oracle.Mono(), ReplicaOff: r.ID})
		return true
	}
}

// runningOn reports whether replica has a run open, as running last saw
// the oracle's events, of a job whose name starts with prefix.
func (f *Faults) runningOn(replica, prefix string) bool {
	for _, ev := range f.open {
		if ev.Replica == replica && strings.HasPrefix(ev.Job, prefix) {
			return true
		}
	}
	return false
}

// sentinelFailover kills the primary once the replica has every write,
// and waits for the sentinels to promote the replica. laggingFailover
// fails over to a replica that lags: the replica is paused for half a
// lease (replication stops, the primary takes writes alone), then the
// primary is killed and the replica resumed, and the sentinels promote it
// without those writes. Either way the former primary then comes back as
// the new one's replica, as an operator or an orchestrator would bring it
// back; until a write is acknowledged again, a lock that needs a replica's
// acknowledgement cannot be taken, and the window lasts until then.
func sentinelFailover(f *Faults) { failover(f, false) }

func laggingFailover(f *Faults) { failover(f, true) }

func failover(f *Faults, lagging bool) {
	f.sleep(f.between(3*time.Second, 6*time.Second))
	at := oracle.Mono()
	primary, replica := f.c.sent.Primary(), f.c.sent.Replica()
	if lagging {
		replica.Pause()
		f.sleep(lease / 2)
		primary.Kill()
		replica.Resume()
		deadline := time.Now().Add(30 * time.Second)
		// The sentinels name the new primary before it has taken the
		// promotion; the old one comes back only after it has, or it may
		// be taken for the primary still and the promotion undone.
		for f.c.sent.Primary() != replica || replica.Info("replication")["role"] != "master" {
			if time.Now().After(deadline) {
				f.t.Fatalf("sentinels did not promote %s within 30s", replica.Addr())
			}
			time.Sleep(50 * time.Millisecond)
		}
	} else {
		f.c.sent.Failover()
	}
	took := time.Duration(oracle.Mono() - at)
	primary.Restart()
	host, port, _ := net.SplitHostPort(replica.Addr())
	primary.Do("REPLICAOF", host, port)
	// The sentinels may fail over once more while the former primary
	// comes back (it was a primary, with an older epoch): the writes are
	// acknowledged again on whichever node they name then.
	if err := acked(f.c.sent.Primary, 30*time.Second); err != nil {
		f.t.Fatal(err)
	}
	f.c.fault(Window{What: "Sentinel failover", From: at, To: oracle.Mono(), RedisDown: true})
	what := "replica in sync"
	if lagging {
		what = "replica lagging by half a lease"
	}
	f.note("%s; failover took %v, writes acknowledged by a replica again after %v", what, took.Round(time.Millisecond), time.Duration(oracle.Mono()-at).Round(time.Millisecond))
}

// acked waits until writes on the primary are acknowledged by a replica,
// three times in a row; primaryNow names the primary at each try.
func acked(primaryNow func() *redistest.Server, within time.Duration) error {
	deadline := time.Now().Add(within)
	ok := 0
	var (
		primary *redistest.Server
		c       *redis.Client
	)
	for ok < 3 {
		if p := primaryNow(); p != primary {
			primary, c, ok = p, p.Client(), 0 // closed when the test ends
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Do(ctx, "SET", "chaos:probe", "1", "PX", "1000").Err()
		if err == nil {
			var acks int64
			if acks, err = c.Do(ctx, "WAIT", 1, 200).Int64(); err == nil && acks < 1 {
				err = fmt.Errorf("%d replicas acknowledged", acks)
			}
		}
		cancel()
		if err == nil {
			ok++
			continue
		}
		ok = 0
		if time.Now().After(deadline) {
			return fmt.Errorf("writes on %s not acknowledged by a replica after %v: %v", primary.Addr(), within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// lost sums lockcron_lock_lost_total over the replicas that are up.
func (c *Cluster) lost() float64 { return c.sum("lockcron_lock_lost_total") }

// sum adds a metric up over the replicas that are up.
func (c *Cluster) sum(name string, labels ...string) float64 {
	var n float64
	for _, r := range c.up() {
		if r.state != "up" {
			continue
		}
		if v, err := metric(r.addr, name, labels...); err == nil {
			n += v
		}
	}
	return n
}
