package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
	"github.com/lockcron/lockcron/internal/redistest"
)

// record is one run of a job, as its job func saw it.
type record struct {
	job     int32
	replica int16
	attempt int16
	tick    time.Time     // info.Tick
	late    time.Duration // time.Now() at the start of the job func − info.Tick
}

// journal collects the runs that the replica processes report. Each
// process's reader appends to it: about 1,000 appends a second in all.
type journal struct {
	mu      sync.Mutex
	runs    []record
	noInfo  int64 // runs whose ctx carried no RunInfo
	badInfo int64 // runs whose RunInfo named another job or replica
	bad     int64 // lines that did not parse
}

func (j *journal) add(r record) {
	j.mu.Lock()
	j.runs = append(j.runs, r)
	j.mu.Unlock()
}

func (j *journal) count(p *int64) {
	j.mu.Lock()
	*p++
	j.mu.Unlock()
}

// proc is one child process: a replica or the hog. Its owner (runRow)
// calls finish on every path, which stops the process if need be and waits
// for it and for its stdout reader.
type proc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser

	ready    chan struct{}         // closed at the "ready" line
	answers  chan replicaMetrics   // "m" lines
	sents    chan map[string]int64 // "s" lines
	stopped  chan stopResult       // the "stop" line
	readDone chan struct{}         // the stdout reader has returned

	mu        sync.Mutex
	lastCPU   time.Duration // the last CPU time read
	killedAt  time.Time     // zero: not killed
	finished  bool
	finishErr error
}

// startProc re-executes this program with args as the child name. The
// lines of a replica's stdout go to j as replica index i; j nil: the
// child writes nothing (the hog).
func startProc(name string, args []string, j *journal, i int) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &proc{
		name: name, cmd: cmd, stdin: stdin,
		ready: make(chan struct{}), answers: make(chan replicaMetrics, 4), sents: make(chan map[string]int64, 4),
		stopped: make(chan stopResult, 1), readDone: make(chan struct{}),
	}
	go p.read(stdout, j, int16(i)) // finish waits for readDone
	return p, nil
}

// read parses the child's stdout until it closes.
func (p *proc) read(stdout io.Reader, j *journal, replica int16) {
	defer close(p.readDone)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	ready := false
	for sc.Scan() {
		line := sc.Bytes()
		kind, rest, _ := bytes.Cut(line, []byte(" "))
		ok := true
		switch string(kind) {
		case "r":
			var v [4]int64
			f := bytes.Fields(rest)
			ok = len(f) == 4
			for k := 0; ok && k < 4; k++ {
				var err error
				v[k], err = strconv.ParseInt(string(f[k]), 10, 64)
				ok = err == nil
			}
			if ok {
				j.add(record{job: int32(v[0]), replica: replica, attempt: int16(v[1]), tick: time.Unix(0, v[2]), late: time.Duration(v[3])})
			}
		case "n":
			j.count(&j.noInfo)
		case "b":
			j.count(&j.badInfo)
		case "ready":
			if !ready {
				ready = true
				close(p.ready)
			}
		case "m":
			var m replicaMetrics
			if ok = json.Unmarshal(rest, &m) == nil; ok {
				p.answers <- m
			}
		case "s":
			var m map[string]int64
			if ok = json.Unmarshal(rest, &m) == nil; ok {
				p.sents <- m
			}
		case "stop":
			var s stopResult
			if ok = json.Unmarshal(rest, &s) == nil; ok {
				p.stopped <- s
			}
		default:
			ok = false
		}
		if !ok && j != nil {
			j.count(&j.bad)
		}
	}
	// A read error (other than the end) leaves the rest unread: the child
	// then blocks on its stdout until finish kills it.
}

// send writes one command line to the child's stdin.
func (p *proc) send(cmd string) error {
	if _, err := io.WriteString(p.stdin, cmd+"\n"); err != nil {
		return fmt.Errorf("%s: %s: %w", p.name, cmd, err)
	}
	return nil
}

// waitReady waits for the child's "ready", its exit, ctx or timeout.
func (p *proc) waitReady(ctx context.Context, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.readDone:
		return fmt.Errorf("%s: exited before it was ready", p.name)
	case <-t.C:
		return fmt.Errorf("%s: not ready after %v", p.name, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// metrics waits for the answer to a "metrics" command.
func (p *proc) metrics(ctx context.Context) (replicaMetrics, error) {
	select {
	case m := <-p.answers:
		return m, nil
	case <-p.readDone:
		return replicaMetrics{}, fmt.Errorf("%s: exited before it sent its metrics", p.name)
	case <-ctx.Done():
		return replicaMetrics{}, fmt.Errorf("%s: metrics: %w", p.name, ctx.Err())
	}
}

// sentSoFar sums the commands that the live replicas' go-redis clients
// have sent so far, by name.
func sentSoFar(ctx context.Context, fleet []*proc) (map[string]int64, error) {
	sum := map[string]int64{}
	for _, p := range fleet {
		if err := p.send("sent"); err != nil {
			return nil, err
		}
	}
	for _, p := range fleet {
		select {
		case m := <-p.sents:
			for k, v := range m {
				sum[k] += v
			}
		case <-p.readDone:
			return nil, fmt.Errorf("%s: exited before it sent its counts", p.name)
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: sent: %w", p.name, ctx.Err())
		}
	}
	return sum, nil
}

// cpu is the child's CPU time so far; after its kill, as read just before
// it; if it cannot be read, the last value read.
func (p *proc) cpu() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killedAt.IsZero() {
		if d, ok := benchutil.PidCPU(p.cmd.Process.Pid); ok {
			p.lastCPU = d
		}
	}
	return p.lastCPU
}

// kill sends SIGKILL to the child, having read its CPU time.
func (p *proc) kill() error {
	p.cpu()
	p.mu.Lock()
	p.killedAt = time.Now()
	p.mu.Unlock()
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("%s: kill: %w", p.name, err)
	}
	return nil
}

func (p *proc) killed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.killedAt.IsZero()
}

// finish closes the child's stdin (a replica then stops gracefully and
// exits), waits up to grace for it to close its stdout, kills it if it has
// not, and waits for it. It returns Wait's error; later calls return the
// same at once.
func (p *proc) finish(grace time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished {
		return p.finishErr
	}
	p.finished = true
	_ = p.stdin.Close()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.readDone:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.readDone
	}
	p.finishErr = p.cmd.Wait()
	return p.finishErr
}

// spec is one row of the benchmark.
type spec struct {
	row      string
	replicas int
	memory   bool // lock.NewMemory, no Redis
	kill     bool // SIGKILL the last replica in the middle of the window
	hog      bool // beside the CPU hog
	cluster  bool // on a Redis Cluster, one of whose primaries is SIGKILLed in the middle of the window
	ack      bool // the replicas' locks wait for a replica's acknowledgement (lock.WithReplicaAck)
}

func rowSpec(cfg *config, row string) spec {
	switch row {
	case "floor":
		return spec{row: row, replicas: 1, memory: true}
	case "kill":
		return spec{row: row, replicas: cfg.replicas, kill: true}
	case "hog":
		return spec{row: row, replicas: cfg.replicas, hog: true}
	case "single":
		return spec{row: row, replicas: 1}
	case "cluster":
		return spec{row: row, replicas: cfg.replicas, cluster: true, ack: true}
	case "cluster-noack":
		return spec{row: row, replicas: cfg.replicas, cluster: true}
	default:
		return spec{row: row, replicas: cfg.replicas}
	}
}

// title names the row's configuration.
func (s spec) title() string {
	n := fmt.Sprintf("%d processes", s.replicas)
	if s.replicas == 1 {
		n = "1 process"
	}
	switch {
	case s.memory:
		return n + ", in-memory"
	case s.kill:
		return fmt.Sprintf("%s, r%d killed", n, s.replicas)
	case s.hog:
		return n + " + CPU hog"
	case s.cluster && s.ack:
		return n + ", Cluster, primary killed, replica_ack"
	case s.cluster:
		return n + ", Cluster, primary killed, no replica_ack"
	}
	return n
}

// runRow runs one row on a fresh redis-server (none on the in-memory
// backend) and returns what it measured. Every child it starts is finished
// on every path.
func runRow(ctx context.Context, cfg *config, sp spec) (*result, error) {
	res := &result{spec: sp, jobs: cfg.jobs, work: cfg.work, version: "-", killed: -1}
	var ctl *redis.Client
	var ctls []*redis.Client // INFO of each server (each primary of a Cluster)
	var cl *redistest.Cluster
	addr := ""
	switch {
	case sp.cluster:
		var err error
		if cl, err = redistest.LaunchCluster(); err != nil {
			return nil, err
		}
		benchutil.AddCleanup(cl.Close)
		defer cl.Close()
		addr = strings.Join(cl.Addrs(), ",")
		for _, p := range cl.Primaries() {
			c := redis.NewClient(p.Options())
			defer c.Close()
			ctls = append(ctls, c)
			res.primaries = append(res.primaries, p.Addr())
		}
		if res.version, err = benchutil.ServerVersion(ctx, ctls[0]); err != nil {
			return nil, err
		}
	case !sp.memory:
		srv, err := benchutil.Launch()
		if err != nil {
			return nil, err
		}
		defer srv.Close()
		ctl, addr = srv.Ctl, srv.Addr() // INFO only, never measured
		ctls = []*redis.Client{ctl}
		if res.version, err = benchutil.ServerVersion(ctx, ctl); err != nil {
			return nil, err
		}
	}

	var procs []*proc
	defer func() {
		for _, p := range procs {
			_ = p.finish(0) // no-op for those already finished
		}
	}()
	if sp.hog {
		h, err := startProc("hog", []string{"-hog-child"}, nil, 0)
		if err != nil {
			return nil, err
		}
		procs = append(procs, h)
	}
	j := &journal{}
	var fleet []*proc
	for i := range sp.replicas {
		args := []string{"-replica-child", "-child-id", strconv.Itoa(i), "-child-addr", addr,
			"-jobs", strconv.Itoa(cfg.jobs), "-pool", strconv.Itoa(cfg.poolSize),
			"-work", cfg.work.String(), "-shutdown-timeout", cfg.shutdownTimeout.String(), "-lease", cfg.lease.String()}
		if sp.cluster {
			args = append(args, "-child-cluster", fmt.Sprintf("-child-ack=%t", sp.ack))
		}
		if cfg.cpuProfile != "" && i == 0 {
			args = append(args, "-cpuprofile", cfg.cpuProfile+"."+sp.row)
		}
		p, err := startProc(fmt.Sprintf("r%d", i+1), args, j, i)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
		fleet = append(fleet, p)
	}
	for _, p := range fleet {
		if err := p.waitReady(ctx, time.Minute); err != nil {
			return nil, err
		}
	}

	res.loadStart = benchutil.Loadavg()
	res.start = time.Now()
	for _, p := range fleet {
		if err := p.send("start"); err != nil {
			return nil, err
		}
	}
	// The window's ticks are the whole seconds from the first one at least
	// -warmup after the start up to, not including, the last whole second
	// at least -cooldown before the stop. The counters are read half a
	// second before the window's first tick and half a second before the
	// tick after its last, between two bursts of claims: each snapshot
	// pair holds the work of exactly the window's ticks, give or take the
	// runs that spill over the half second (as many at each end).
	end := res.start.Add(cfg.duration)
	res.first = ceilSecond(res.start.Add(cfg.warmup))
	res.last = end.Add(-cfg.cooldown).Truncate(time.Second)
	var killAt time.Time
	ticks := int(res.last.Sub(res.first) / time.Second)
	if sp.kill || sp.cluster {
		killAt = res.first.Add(time.Duration(ticks/2)*time.Second + cfg.killOffset)
	}
	if sp.kill {
		res.killed = len(fleet) - 1
	}
	var before, after snapshot
	err := sleepUntil(ctx, res.first.Add(-500*time.Millisecond))
	if err == nil {
		before, err = takeSnapshot(ctx, ctls, fleet, false)
	}
	if err == nil && sp.cluster {
		// The counters are read up to the failover: the killed primary's
		// die with it, and its replica's count what it replicated.
		res.countTicks = ticks / 2
		res.last = res.first.Add(time.Duration(res.countTicks) * time.Second)
		if err = sleepUntil(ctx, res.last.Add(-500*time.Millisecond)); err == nil {
			after, err = takeSnapshot(ctx, ctls, fleet, true)
		}
		if err == nil {
			err = sleepUntil(ctx, killAt)
		}
		if err == nil {
			err = failover(ctx, cl, fleet, res)
		}
		res.last = end.Add(-cfg.cooldown).Truncate(time.Second)
	}
	if err == nil && sp.kill {
		if err = sleepUntil(ctx, killAt); err == nil {
			err = fleet[res.killed].kill()
			res.killAt = time.Now()
		}
		// The claims the killed replica had on the wire land after its
		// death, and take their locks for a lease all the same: read the
		// locks once they have (a round trip on loopback is well under
		// this).
		if err == nil {
			err = sleepUntil(ctx, res.killAt.Add(killSettle))
		}
		if err == nil {
			res.heldUntil, err = heldLocks(ctx, ctl, fmt.Sprintf("r%d:", res.killed+1), cfg.jobs)
		}
	}
	if err == nil && !sp.cluster {
		err = sleepUntil(ctx, res.last.Add(-500*time.Millisecond))
		if err == nil {
			after, err = takeSnapshot(ctx, ctls, fleet, true)
		}
	}
	if err == nil {
		err = sleepUntil(ctx, end)
	}
	if err != nil {
		return nil, err
	}
	res.loadEnd = benchutil.Loadavg()
	res.stops = stopFleet(fleet, cfg.shutdownTimeout)
	for _, p := range procs {
		_ = p.finish(0) // the hog
	}
	res.analyze(j, before, after)
	return res, nil
}

// failover SIGKILLs the Cluster's first primary, waits until its replica
// has taken its slots over (every node reports cluster_state:ok), and
// restarts the killed node, which rejoins as the new primary's replica
// (its nodes.conf survives; its data does not): without a replica, a lock
// that waits for one's acknowledgement could not be taken on that shard.
//
// It also counts the scripts (EVALSHA, EVAL) that the replicas sent from
// the kill to the promotion: claims and finishes, most of them refused
// or lost while the shard was down.
func failover(ctx context.Context, cl *redistest.Cluster, fleet []*proc, res *result) (err error) {
	defer func() {
		// redistest.Cluster panics where a test would fail.
		if p := recover(); p != nil {
			err = fmt.Errorf("failover: %v", p)
		}
	}()
	old := cl.Primaries()[0]
	res.failedPrimary = old.Addr()
	s0, err := sentSoFar(ctx, fleet)
	if err != nil {
		return err
	}
	res.killAt = time.Now()
	cl.Failover(old)
	res.promotedAt = time.Now()
	s1, err := sentSoFar(ctx, fleet)
	if err != nil {
		return err
	}
	res.failoverScripts = s1["evalsha"] + s1["eval"] - s0["evalsha"] - s0["eval"]
	old.Restart()
	res.rejoinedAt = time.Now()
	return nil
}

// stopFleet stops every live replica at once, as a fleet rolled at the same
// moment would be (each gets end of file on its stdin and shuts down),
// collects their reports and waits for the processes.
func stopFleet(fleet []*proc, timeout time.Duration) []stopResult {
	for _, p := range fleet {
		if !p.killed() {
			_ = p.stdin.Close()
		}
	}
	res := make([]stopResult, len(fleet))
	deadline := time.Now().Add(timeout + 10*time.Second)
	for i, p := range fleet {
		if p.killed() {
			res[i].killed = true
			continue
		}
		select {
		case s := <-p.stopped:
			res[i] = s
		case <-p.readDone:
			select {
			case s := <-p.stopped:
				res[i] = s
			default:
				res[i].Err = "the process exited without reporting its stop"
			}
		case <-time.After(time.Until(deadline)):
			res[i].Err = "no stop report within the Shutdown timeout + 10s"
		}
	}
	for i, p := range fleet {
		if err := p.finish(5 * time.Second); err != nil && !p.killed() {
			res[i].exitErr = err
		}
	}
	return res
}

// heldLocks reads, just after a replica's kill, the job locks its owner ids
// (prefix) still hold, and until when: those jobs cannot run until the
// lease expires, whoever claims them. It returns job index → expiry.
func heldLocks(ctx context.Context, ctl *redis.Client, prefix string, jobs int) (map[int32]time.Time, error) {
	now := time.Now()
	held := make(map[int32]time.Time)
	pipe := ctl.Pipeline()
	owners := make([]*redis.MapStringStringCmd, jobs)
	ttls := make([]*redis.DurationCmd, jobs)
	for k := range jobs {
		key := "lockcron:{" + jobName(k) + "}"
		owners[k] = pipe.HGetAll(ctx, key)
		ttls[k] = pipe.PTTL(ctx, key)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("reading the killed replica's locks: %w", err)
	}
	for k := range jobs {
		for owner := range owners[k].Val() {
			if strings.HasPrefix(owner, prefix) && ttls[k].Val() > 0 {
				held[int32(k)] = now.Add(ttls[k].Val())
			}
		}
	}
	return held, nil
}
