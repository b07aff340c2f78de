package chaos

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
	"github.com/lockcron/lockcron/internal/testkit"
)

var soakFor = flag.Duration("chaos.soak", 0, "run TestSoak, the suite's faults mixed on one fleet, for this long (make soak; 0: not at all)")

// soakFault is a kind of fault the soak draws: Run injects it until the
// fault phase it is given (Length from its start) ends.
type soakFault struct {
	Name   string
	Length time.Duration
	Run    func(f *Faults)
}

// soakFaults are the suite's faults that the system is meant to survive and
// that one world can take one after another: a standalone Redis with
// appendfsync always behind the fault proxy, and the base fleet (five
// replicas, two exec jobs and an http job every second, a 2s lease). Most
// are the scenarios' own schedules, run for Length. Left out: the
// scenarios that are not survived (a paused host whose http job completes,
// Redis paused 2× the lease, restarted empty, a blackholed link, a failover
// without replica_ack), the ones that need another world (the Sentinel
// failovers; clock skew ±5 s and the added round trips, which need a
// longer period; CPU starvation, 200 jobs), and clock skew as the suite
// runs it, from the start: here a replica is replaced by a skewed one.
func soakFaults() []soakFault {
	byName := map[string]*Scenario{}
	for _, sc := range scenarios() {
		byName[sc.Name] = sc
	}
	// The scenario's schedule; nil Run if there is no such scenario, or it
	// is not survived (TestSoakFaults).
	of := func(name string, length time.Duration) soakFault {
		k := soakFault{Name: name, Length: length}
		if sc := byName[name]; sc != nil && sc.NotSurvived == "" && !sc.Sentinel {
			k.Run = sc.Faults
		}
		return k
	}
	return []soakFault{
		of("SIGKILL of the replica running a job", 10*time.Second),
		of("SIGTERM of the replica running a job", 10*time.Second),
		of("dropped replies (5%, go-redis retries)", 15*time.Second),
		// As the suite's scenario, on a replica running an exec job and no
		// http job: one whose http job completes while it is paused past
		// the lease is the scenario that is not survived.
		{Name: "SIGSTOP of a replica (paused host) 0.5×, 1× or 3× lease", Length: 10 * time.Second, Run: func(f *Faults) {
			pauseHost(f, []float64{0.5, 1, 3}[f.rng.IntN(3)], "exec", "http")
		}},
		of("Redis paused 0.5× lease, repeated", 10*time.Second),
		of("Redis killed and restarted with appendfsync always, repeated", 10*time.Second),
		of("Pub/Sub connections killed just before an unlock", 10*time.Second),
		{Name: "clock skew ±0.4 s or ±0.8 s (a replica replaced by a skewed one)", Length: 15 * time.Second, Run: skewReplica},
	}
}

// skewReplica replaces a replica by one whose clock is off by ±0.4s or
// ±0.8s until the end of the fault phase, then that one by one on the
// machine's clock.
func skewReplica(f *Faults) {
	rs := slices.DeleteFunc(f.c.up(), func(r *Replica) bool { return r.state != "up" })
	if len(rs) == 0 {
		return
	}
	off := []time.Duration{-800 * time.Millisecond, -400 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}[f.rng.IntN(4)]
	r := f.replace(rs[f.rng.IntN(len(rs))], off)
	f.note("%s on a clock off by %v", r.ID, off)
	f.sleep(time.Until(f.end))
	f.replace(r, 0)
}

// replace stops r with SIGTERM and starts a replica with clock offset off
// in its place.
func (f *Faults) replace(r *Replica, off time.Duration) *Replica {
	at := oracle.Mono()
	if err := f.c.term(r); err != nil {
		f.t.Error(err)
	}
	f.c.fault(Window{What: "SIGTERM " + r.ID, From: at, To: oracle.Mono(), ReplicaOff: r.ID})
	return f.c.start(off)
}

// keepSize starts replicas until n are running. A replica that exited by
// itself (none should) is a figure missed.
func (f *Faults) keepSize(n int) {
	f.c.mu.Lock()
	var gone []*Replica
	for _, r := range f.c.replicas {
		if r.state == "dead" {
			continue
		}
		select {
		case <-r.done:
			r.state = "dead"
			gone = append(gone, r)
		default:
		}
	}
	f.c.mu.Unlock()
	for _, r := range gone {
		f.miss("replica %s exited by itself: %v", r.ID, r.err)
	}
	for range n - len(f.c.up()) {
		f.c.start(0)
	}
}

// span is one fault of the soak, from its start to the next one's (its
// quiet gap included).
type span struct {
	kind     string
	from, to int64 // oracle.Mono
	notes    []string
	broken   []string
	lost     float64 // locks lost, over the replicas up at its start and its end
}

// TestSoak keeps one world for -chaos.soak (make soak): faults drawn at
// random from soakFaults, one after another, each followed by a quiet gap;
// replicas that a fault kills are started again. The checker then judges the
// whole history with every fault window, and the resources sampled every
// soakEvery must be flat (flatBounds). It prints the suite's table, a row
// for the soak and a row per kind of fault, and the resources' curves.
func TestSoak(t *testing.T) {
	if *soakFor <= 0 {
		t.Skip("the soak runs with -chaos.soak=DURATION (make soak)")
	}
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	fmt.Printf("soak: seed %d, %v (rerun with make soak SEED=%d)\n", s, *soakFor, s)
	t.Logf("seed %d", s)
	kinds := soakFaults()
	for _, k := range kinds {
		if k.Run == nil {
			t.Fatalf("soak: no survived scenario named %q", k.Name)
		}
	}
	env := newEnv(t)
	sc := base("soak")
	sc.Proxy = true
	sc.RedisArgs = []string{"--appendonly", "yes", "--appendfsync", "always"}
	c := newCluster(t, env, sc)
	for range sc.Replicas {
		c.start(0)
	}
	w := &window{wall0: time.Now(), mono0: oracle.Mono(), period: sc.Period, lease: sc.Lease}
	warm := 2 * time.Second
	w.from = w.mono0 + int64(warm+sc.Period)
	f := &Faults{c: c, rng: rand.New(rand.NewPCG(s, 1)), t: t, env: env}
	draw := rand.New(rand.NewPCG(s, 0))
	f.sleep(warm)
	base := goroutines(c)

	started := time.Now()
	end := started.Add(*soakFor)
	smp := &sampler{c: c, since: started, curves: map[string]*curve{}}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { smp.run(stop) })
	var once sync.Once
	halt := func() {
		once.Do(func() { close(stop) })
		wg.Wait()
	}
	t.Cleanup(halt) // if a fault fails the test on the way
	var spans []*span
	for time.Until(end) > 0 {
		k := kinds[draw.IntN(len(kinds))]
		sp := &span{kind: k.Name, from: oracle.Mono()}
		notes, broken, lost := len(f.notes), len(f.broken), c.lostBy()
		f.end = time.Now().Add(min(k.Length, time.Until(end)))
		k.Run(f)
		f.keepSize(sc.Replicas)
		f.sleep(min(f.between(5*time.Second, 15*time.Second), time.Until(end)))
		for id, n := range c.lostBy() {
			if b, ok := lost[id]; ok {
				sp.lost += n - b
			}
		}
		sp.to = oracle.Mono()
		sp.notes, sp.broken = f.notes[notes:], f.broken[broken:]
		spans = append(spans, sp)
	}
	halt()
	took := time.Since(started)
	w.to = oracle.Mono()
	// The faults' notes go with their rows; what they missed counts for the
	// soak as well.
	f.notes = nil
	whole := judge(t, env, c, f, w, base)

	evs, err := env.oracle.Events(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	scs := []*Scenario{{Name: fmt.Sprintf("soak: %d faults, one after another, on one fleet", len(spans))}}
	results := []*Result{whole}
	for _, k := range kinds {
		r, n := byKind(k.Name, spans, evs, w, sc, c.kills)
		if n == 0 {
			continue
		}
		scs = append(scs, &Scenario{Name: fmt.Sprintf("%s (×%d)", k.Name, n)})
		results = append(results, r)
	}
	tab := render("soak", s, scs, results, took) + smp.render()
	fmt.Print(tab)
	if *table != "" {
		if err := os.WriteFile(*table, []byte(tab), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, v := range whole.violations() {
		t.Error(v)
	}
	bad := smp.notFlat()
	for _, v := range bad {
		t.Errorf("not flat: %s", v)
	}
	if len(bad) > 0 && len(whole.violations()) == 0 {
		t.Logf("replica logs kept in %s", keep(t, c.dir))
	}
}

// lostBy returns lockcron_lock_lost_total of each replica that is up.
func (c *Cluster) lostBy() map[string]float64 {
	m := map[string]float64{}
	for _, r := range c.up() {
		if r.state != "up" {
			continue
		}
		if v, err := metric(r.addr, "lockcron_lock_lost_total"); err == nil {
			m[r.ID] = v
		}
	}
	return m
}

// byKind applies the checker to the spans of one kind of fault: the ticks
// due in each span, with the runs that started from 20s before it to the
// drain after it, and the kills among those runs. It is a view of the soak's history:
// a tick at a span's edge can show in two rows; the soak's row, over the
// whole history, is the verdict. It returns the spans' results added up and
// how many spans there were.
func byKind(kind string, spans []*span, evs []oracle.Event, w *window, sc *Scenario, allKills []Kill) (*Result, int) {
	sum := &Result{Scenario: kind}
	var late []time.Duration
	n := 0
	for _, sp := range spans {
		if sp.kind != kind {
			continue
		}
		n++
		lo, hi := sp.from-int64(20*time.Second), sp.to+int64(sc.Lease+3*time.Second)
		starts := map[string]int64{}
		var in []oracle.Event
		for _, ev := range evs {
			if _, ok := starts[ev.ID]; !ok {
				starts[ev.ID] = ev.Mono
			}
			if m := starts[ev.ID]; m >= lo && m <= hi {
				in = append(in, ev)
			}
		}
		// The kills around it too: a run that completed as its replica was
		// SIGKILLed just before the span began is run again in it.
		var kills []Kill
		for _, k := range allKills {
			if k.At >= lo && k.At <= hi {
				kills = append(kills, k)
			}
			if k.At >= sp.from && k.At <= sp.to {
				sum.GroupGone = max(sum.GroupGone, k.Gone)
			}
		}
		sw := *w
		sw.from, sw.to = max(sp.from, w.from), min(sp.to, w.to)
		r := check(kind, in, &sw, sc.jobs(), kills)
		for _, x := range runs(in) {
			tick, err := time.Parse(time.RFC3339, x.Tick)
			if err != nil || x.Trigger != "" || !x.effective() {
				continue
			}
			if m := sw.mono(tick); m >= sw.from && m <= sw.to {
				late = append(late, time.Duration(x.start-m))
			}
		}
		sum.Ticks += r.Ticks
		sum.Runs += r.Runs
		sum.Starts += r.Starts
		sum.Skipped += r.Skipped
		sum.Interrupted += r.Interrupted
		sum.Rerun += r.Rerun
		sum.Missed = append(sum.Missed, r.Missed...)
		sum.Twice = append(sum.Twice, r.Twice...)
		sum.Overlaps = append(sum.Overlaps, r.Overlaps...)
		sum.Backwards = append(sum.Backwards, r.Backwards...)
		sum.NotRerun = append(sum.NotRerun, r.NotRerun...)
		sum.Notes = append(append(sum.Notes, r.Notes...), sp.notes...)
		sum.Broken = append(append(sum.Broken, r.Broken...), sp.broken...)
		sum.Leaks = append(sum.Leaks, r.Leaks...)
		sum.LocksLost += sp.lost
		if r.RerunMax > sum.RerunMax {
			sum.RerunMax, sum.RerunWorst = r.RerunMax, r.RerunWorst
		}
	}
	if len(late) > 0 {
		slices.Sort(late)
		sum.LateP50, sum.LateMax = late[len(late)/2], late[len(late)-1]
	}
	return sum, n
}

// soakEvery is how often the soak samples the resources; soakWarm is how
// long after a replica's start (or the soak's) its curves begin.
const (
	soakEvery = 10 * time.Second
	soakWarm  = 30 * time.Second
)

// flatBound is how much a curve may grow and still be flat: the median of
// its last quarter of samples is at most Ratio × the median of its first
// quarter + Plus. A curve of fewer than minFlatSamples samples is too short
// to be judged.
type flatBound struct {
	Ratio, Plus float64
}

const minFlatSamples = 8

// flatBounds are the bounds of each resource: a replica's goroutines
// (go_goroutines), open sockets (/proc/PID/fd) and RSS (VmRSS, MiB); the
// Redis under test's connected clients, Pub/Sub channels and patterns, and
// keys (DBSIZE).
var flatBounds = map[string]flatBound{
	"goroutines":       {1.1, 10},
	"sockets":          {1.25, 4},
	"RSS MiB":          {1.15, 4},
	"clients":          {1.1, 8},
	"Pub/Sub channels": {1, 2},
	"keys":             {1.1, 10},
}

// flat judges vals against b: the medians of the first and last quarters,
// whether it was judged (enough samples), and whether it is flat.
func flat(vals []float64, b flatBound) (first, last float64, judged, ok bool) {
	if len(vals) < minFlatSamples {
		return 0, 0, false, true
	}
	q := len(vals) / 4
	first, last = median(vals[:q]), median(vals[len(vals)-q:])
	return first, last, true, last <= b.Ratio*first+b.Plus
}

func median(vals []float64) float64 {
	s := slices.Clone(vals)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// curve is one resource of one replica, or of the Redis under test, over
// the soak.
type curve struct {
	owner, what string // "r3", "goroutines"
	vals        []float64
}

// sampler samples the resources every soakEvery until stopped; its curves
// are read once run has returned.
type sampler struct {
	c      *Cluster
	since  time.Time
	curves map[string]*curve
	order  []string
}

// scrape is the sampler's client of the replicas' /metrics: a paused
// replica does not hold it up for longer than this.
var scrape = &http.Client{Timeout: 3 * time.Second}

func (s *sampler) run(stop <-chan struct{}) {
	tk := time.NewTicker(soakEvery)
	defer tk.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tk.C:
			s.sample()
		}
	}
}

func (s *sampler) add(owner, what string, v float64) {
	k := owner + " " + what
	cv := s.curves[k]
	if cv == nil {
		cv = &curve{owner: owner, what: what}
		s.curves[k] = cv
		s.order = append(s.order, k)
	}
	cv.vals = append(cv.vals, v)
}

func (s *sampler) sample() {
	type target struct {
		id, addr string
		pid      int
	}
	var ts []target
	s.c.mu.Lock()
	for _, r := range s.c.replicas {
		if r.state == "up" && r.addr != "" && time.Since(r.started) >= soakWarm {
			ts = append(ts, target{r.ID, r.addr, r.cmd.Process.Pid})
		}
	}
	s.c.mu.Unlock()
	for _, r := range ts {
		g, err1 := scrapeMetric(r.addr, "go_goroutines")
		socks, err2 := sockets(r.pid)
		rss, err3 := rssMiB(r.pid)
		if err1 != nil || err2 != nil || err3 != nil {
			continue // stopped, killed or paused since
		}
		s.add(r.id, "goroutines", g)
		s.add(r.id, "sockets", float64(socks))
		s.add(r.id, "RSS MiB", rss)
	}
	if time.Since(s.since) < soakWarm {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err1 := s.c.sutDo(ctx, "INFO", "clients")
	chans, err2 := s.c.sutDo(ctx, "PUBSUB", "CHANNELS")
	pats, err3 := s.c.sutDo(ctx, "PUBSUB", "NUMPAT")
	keys, err4 := s.c.sutDo(ctx, "DBSIZE")
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil {
		return // paused or restarting
	}
	clients, ok := infoField(fmt.Sprint(info), "connected_clients")
	if !ok {
		return
	}
	list, _ := chans.([]any)
	np, _ := pats.(int64)
	nk, _ := keys.(int64)
	s.add("Redis", "clients", clients)
	s.add("Redis", "Pub/Sub channels", float64(len(list))+float64(np))
	s.add("Redis", "keys", float64(nk))
}

func scrapeMetric(addr, name string) (float64, error) {
	resp, err := scrape.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	v, ok := testkit.Metric(string(b), name)
	if !ok {
		return 0, errNoMetric
	}
	return v, nil
}

// sockets counts the sockets process pid has open.
func sockets(pid int) (int, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	fds, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, fd := range fds {
		if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n, nil
}

// rssMiB reads VmRSS of process pid.
func rssMiB(pid int) (float64, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("process %d: no VmRSS (exited)", pid)
}

// infoField reads a numeric field of an INFO reply.
func infoField(info, name string) (float64, bool) {
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), name+":"); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// notFlat lists the curves that are not flat.
func (s *sampler) notFlat() []string {
	var out []string
	for _, k := range s.order {
		cv := s.curves[k]
		b := flatBounds[cv.what]
		if first, last, judged, ok := flat(cv.vals, b); judged && !ok {
			out = append(out, fmt.Sprintf("%s: median %.1f over the first quarter, %.1f over the last, over %.2f× + %.0f", k, first, last, b.Ratio, b.Plus))
		}
	}
	return out
}

// render prints the curves: a row for each one long enough to judge, and a
// line for the replicas' curves that are not.
func (s *sampler) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nResources, a sample every %v from %v after a replica's start (and the soak's); flat: the median of the last quarter of a curve's samples at most ratio × its first quarter's + plus; curves of fewer than %d samples are not judged.\n\n", soakEvery, soakWarm, minFlatSamples)
	b.WriteString("| curve | samples | first | last | max | median, first quarter → last | bound | flat |\n|---|---|---|---|---|---|---|---|\n")
	short := map[string]float64{}
	nshort, replicas := 0, map[string]bool{}
	for _, k := range s.order {
		cv := s.curves[k]
		bd := flatBounds[cv.what]
		first, last, judged, ok := flat(cv.vals, bd)
		if !judged {
			nshort++
			replicas[cv.owner] = true
			short[cv.what] = max(short[cv.what], slices.Max(cv.vals))
			continue
		}
		verdict := "yes"
		if !ok {
			verdict = "NO"
		}
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s → %s | ×%.2f + %s | %s |\n", k, len(cv.vals),
			num(cv.vals[0]), num(cv.vals[len(cv.vals)-1]), num(slices.Max(cv.vals)), num(first), num(last), bd.Ratio, num(bd.Plus), verdict)
	}
	if nshort > 0 {
		fmt.Fprintf(&b, "\n%d curves of %d replicas too short to judge (replaced within %v of their start); their largest samples: goroutines %s, sockets %s, RSS %s MiB.\n",
			nshort, len(replicas), soakWarm+minFlatSamples*soakEvery, num(short["goroutines"]), num(short["sockets"]), num(short["RSS MiB"]))
	}
	return b.String()
}

func num(v float64) string {
	if v == float64(int64(v)) {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}
