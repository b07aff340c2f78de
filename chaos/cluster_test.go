package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
	"github.com/lockcron/lockcron/internal/faultproxy"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/redis/go-redis/v9"
)

// Cluster is one scenario's world: the Redis under test (a server, or a
// primary, a replica and three sentinels), an optional fault proxy in front
// of it, and the scheduler replicas, each a process of its own.
type Cluster struct {
	t     *testing.T
	env   *Env
	sc    *Scenario
	dir   string
	redis *redistest.Server   // the standalone server, nil with Sentinel
	sent  *redistest.Sentinel // nil without Sentinel
	proxy *faultproxy.Proxy   // nil unless sc.Proxy

	mu       sync.Mutex
	sut      *redis.Client // for sutDo
	replicas []*Replica
	next     int      // replicas started so far, for ids
	windows  []Window // faults, as they happened
	kills    []Kill   // SIGKILLs of replicas running a job
	busy     []*exec.Cmd
}

// Window is a span of monotonic time during which a fault was on.
type Window struct {
	What      string
	From, To  int64 // oracle.Mono
	RedisDown bool  // no replica could reach Redis: ticks in it are excused
	// Lead is how long before From a tick is excused as well, when
	// RedisDown: a tick whose claim was under way (1s if zero).
	Lead time.Duration
	// InFlight, when RedisDown, is the round trip before From: a run that
	// ended less than that before From had its finish on the way when
	// the window began, and its reply met the window (0: none).
	InFlight   time.Duration
	ReplicaOff string
}

// Kill is a SIGKILL of a replica that was running a job.
type Kill struct {
	Replica string
	At      int64 // oracle.Mono
	Job     string
	Tick    string
	Pids    []int         // the replica's descendants at the kill
	Gone    time.Duration // until every one of them was gone; -1 if never
}

func newCluster(t *testing.T, env *Env, sc *Scenario) *Cluster {
	c := &Cluster{t: t, env: env, sc: sc, dir: t.TempDir()}
	if sc.Sentinel {
		c.sent = redistest.StartSentinel(t)
	} else {
		c.redis = redistest.Start(t, sc.RedisArgs...)
	}
	if sc.Proxy {
		p, err := faultproxy.New(c.redis.Addr())
		if err != nil {
			t.Fatal(err)
		}
		c.proxy = p
		t.Cleanup(func() { _ = p.Close() })
	}
	t.Cleanup(c.stopAll)
	return c
}

// sutDo runs a command on the Redis under test, for inspection, on a
// client made once (closed when the test ends).
func (c *Cluster) sutDo(ctx context.Context, args ...any) (any, error) {
	c.mu.Lock()
	if c.sut == nil {
		if c.sent != nil {
			c.sut = c.sent.Client()
		} else {
			c.sut = c.redis.Client()
		}
	}
	cl := c.sut
	c.mu.Unlock()
	return cl.Do(ctx, args...).Result()
}

// redisConfig is the replicas' redis block.
func (c *Cluster) redisConfig() string {
	sc := c.sc
	var b strings.Builder
	b.WriteString("redis {\n")
	switch {
	case c.sent != nil:
		fmt.Fprintf(&b, "  addrs = [%s]\n  master_name = %q\n", quoteList(c.sent.SentinelAddrs()), c.sent.MasterName())
	case c.proxy != nil:
		fmt.Fprintf(&b, "  url = \"redis://%s/0\"\n", c.proxy.Addr())
	default:
		fmt.Fprintf(&b, "  url = \"redis://%s/0\"\n", c.redis.Addr())
	}
	fmt.Fprintf(&b, "  timeout = %q\n  connect_timeout = \"60s\"\n}\n", sc.Timeout.String())
	return b.String()
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// config returns the HCL config of replica id.
func (c *Cluster) config(id string) string {
	sc := c.sc
	var b strings.Builder
	fmt.Fprintf(&b, "replica_id = %q\nshutdown_timeout = \"10s\"\n", id)
	b.WriteString(c.redisConfig())
	fmt.Fprintf(&b, "lock {\n  lease = %q\n", sc.Lease.String())
	if sc.Ack {
		b.WriteString("  replica_ack {\n    replicas = 1\n    timeout = \"300ms\"\n  }\n")
	}
	b.WriteString("}\n")
	b.WriteString("admin {\n  listen = \"127.0.0.1:0\"\n}\nlog {\n  level = \"debug\"\n  json = true\n}\n")
	sched := fmt.Sprintf("*/%d * * * * *", int(sc.Period/time.Second))
	for i := range sc.ExecJobs {
		fmt.Fprintf(&b, `job "exec%d" {
  schedule = %q
  overlap = "queue"
  on_shutdown = "handoff"
  retries = 0
  exec {
    command = [%q]
    env = { CHAOS_ORACLE = %q, CHAOS_HOLD = %q }
    grace = "1s"
  }
}
`, i, sched, c.env.worker, c.env.oracleAddr, sc.Hold.String())
	}
	for i := range sc.HTTPJobs {
		fmt.Fprintf(&b, `job "http%03d" {
  schedule = %q
  overlap = "queue"
  on_shutdown = "handoff"
  retries = 0
  http {
    url = "%s/run?hold=%s"
    method = "POST"
  }
}
`, i, sched, c.env.httpURL, sc.HTTPHold.String())
	}
	if sc.Chain {
		b.WriteString(c.chainConfig(sched))
	}
	return b.String()
}

// Replica is one scheduler process.
type Replica struct {
	ID    string
	cmd   *exec.Cmd
	done  chan struct{} // closed when the process has exited and its output is read
	admin chan string   // the admin listener's address, once logged
	addr  string        // set under Cluster.mu once the replica is ready
	state string        // "up", "stopped" (SIGSTOP), "dead"
	err   error

	started time.Time // when it was started
}

// start starts a new replica with clock offset off (0: the scheduler
// binary itself) and waits until it is ready.
func (c *Cluster) start(off time.Duration) *Replica {
	c.t.Helper()
	c.mu.Lock()
	c.next++
	id := fmt.Sprintf("r%d", c.next)
	c.mu.Unlock()
	path := filepath.Join(c.dir, id+".hcl")
	if err := os.WriteFile(path, []byte(c.config(id)), 0o600); err != nil {
		c.t.Fatal(err)
	}
	bin := c.env.scheduler
	env := append(os.Environ(), "REDIS_URL=", "LOCKCRON_REDIS__URL=")
	if off != 0 {
		bin = c.env.skewed
		env = append(env, "CHAOS_CLOCK_OFFSET="+off.String())
	}
	logf, err := os.Create(filepath.Join(c.dir, id+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	r := &Replica{ID: id, done: make(chan struct{}), admin: make(chan string, 1), state: "up", started: time.Now()}
	r.cmd = exec.Command(bin, "run", "-config", path)
	r.cmd.Env = env
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := r.cmd.StderrPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	r.cmd.Stdout = logf
	if err := r.cmd.Start(); err != nil {
		c.t.Fatalf("replica %s: %v", id, err)
	}
	go func() {
		defer close(r.done)
		scanLog(io.TeeReader(out, logf), r.admin)
		r.err = r.cmd.Wait()
		logf.Close()
	}()
	c.mu.Lock()
	c.replicas = append(c.replicas, r)
	c.mu.Unlock()
	var addr string
	select {
	case addr = <-r.admin:
	case <-r.done:
		c.t.Fatalf("replica %s exited at start: %v; log %s", id, r.err, logf.Name())
	case <-time.After(30 * time.Second):
		c.t.Fatalf("replica %s: no admin address after 30s; log %s", id, logf.Name())
	}
	if err := pollReady(addr, 30*time.Second); err != nil {
		c.t.Fatalf("replica %s: %v; log %s", id, err, logf.Name())
	}
	c.mu.Lock()
	r.addr = addr
	c.mu.Unlock()
	return r
}

// scanLog reads a replica's JSON log and sends the admin listener's address.
func scanLog(r io.Reader, admin chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), "admin listening") {
			continue
		}
		var m struct {
			Addr string `json:"addr"`
		}
		if json.Unmarshal(line, &m) == nil && m.Addr != "" {
			select {
			case admin <- m.Addr:
			default:
			}
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

func pollReady(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// up returns the replicas that are running (not dead; stopped ones too).
func (c *Cluster) up() []*Replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	var rs []*Replica
	for _, r := range c.replicas {
		if r.state != "dead" {
			rs = append(rs, r)
		}
	}
	return rs
}

func (c *Cluster) byID(id string) *Replica {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.replicas {
		if r.ID == id && r.state == "up" {
			return r
		}
	}
	return nil
}

// kill SIGKILLs r, waits for it, and measures how long its descendants
// (exec jobs and their supervisors) outlive it.
func (c *Cluster) kill(r *Replica, job, tick string) Kill {
	pids := testkit.Descendants(r.cmd.Process.Pid)
	k := Kill{Replica: r.ID, At: oracle.Mono(), Job: job, Tick: tick, Pids: pids}
	start := time.Now()
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
	c.mu.Lock()
	r.state = "dead"
	c.mu.Unlock()
	k.Gone = -1
	for time.Since(start) < 10*time.Second {
		if testkit.AllGone(pids) {
			k.Gone = time.Since(start)
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if k.Gone < 0 {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	c.mu.Lock()
	c.kills = append(c.kills, k)
	c.mu.Unlock()
	return k
}

// term stops r with SIGTERM and waits for it to exit.
func (c *Cluster) term(r *Replica) error {
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	return c.waitExit(r)
}

// waitExit waits for r, sent SIGTERM, to exit.
func (c *Cluster) waitExit(r *Replica) error {
	select {
	case <-r.done:
	case <-time.After(20 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
		return fmt.Errorf("replica %s did not exit within 20s of SIGTERM", r.ID)
	}
	c.mu.Lock()
	r.state = "dead"
	c.mu.Unlock()
	if r.err != nil {
		return fmt.Errorf("replica %s: %v", r.ID, r.err)
	}
	return nil
}

// pauseHost stops r and everything it started with SIGSTOP, as a host that
// froze; resumeHost continues them.
func (c *Cluster) pauseHost(r *Replica) []int {
	pids := append([]int{r.cmd.Process.Pid}, testkit.Descendants(r.cmd.Process.Pid)...)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGSTOP)
	}
	c.mu.Lock()
	r.state = "stopped"
	c.mu.Unlock()
	return pids
}

func (c *Cluster) resumeHost(r *Replica, pids []int) {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGCONT)
	}
	c.mu.Lock()
	r.state = "up"
	c.mu.Unlock()
}

// fault records a window.
func (c *Cluster) fault(w Window) {
	c.mu.Lock()
	c.windows = append(c.windows, w)
	c.mu.Unlock()
}

// busyLoops starts n processes that spin on a core each, until stopAll.
func (c *Cluster) busyLoops(n int) {
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			c.t.Fatal(err)
		}
		c.mu.Lock()
		c.busy = append(c.busy, cmd)
		c.mu.Unlock()
	}
}

// stopGracefully SIGTERMs every running replica at once and waits for them.
func (c *Cluster) stopGracefully() []error {
	var errs []error
	rs := c.up()
	for _, r := range rs {
		if r.state == "stopped" {
			_ = syscall.Kill(r.cmd.Process.Pid, syscall.SIGCONT)
		}
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, r := range rs {
		if err := c.waitExit(r); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// stopAll kills whatever is left: replicas, their jobs, busy loops.
func (c *Cluster) stopAll() {
	c.mu.Lock()
	rs := append([]*Replica(nil), c.replicas...)
	busy := c.busy
	c.busy = nil
	c.mu.Unlock()
	for _, r := range rs {
		select {
		case <-r.done:
			continue
		default:
		}
		pids := testkit.Descendants(r.cmd.Process.Pid)
		_ = syscall.Kill(r.cmd.Process.Pid, syscall.SIGCONT)
		_ = r.cmd.Process.Kill()
		<-r.done
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	for _, b := range busy {
		_ = syscall.Kill(-b.Process.Pid, syscall.SIGKILL)
		_ = b.Wait()
	}
}

// metric scrapes the /metrics of the replica at addr and returns the sum
// of every series of name whose labels include every one of labels
// (testkit.Metric).
func metric(addr, name string, labels ...string) (float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	v, ok := testkit.Metric(string(b), name, labels...)
	if !ok {
		return 0, errNoMetric
	}
	return v, nil
}

var errNoMetric = errors.New("no such metric")
