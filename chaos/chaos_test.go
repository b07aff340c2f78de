package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
	"github.com/lockcron/lockcron/internal/redistest"
)

var (
	full  = flag.Bool("chaos.full", false, "run every scenario, not only the quick ones")
	seed  = flag.Uint64("chaos.seed", 0, "seed of the fault schedules (0: from the time)")
	only  = flag.String("chaos.run", "", "run only the scenarios whose name contains one of these |-separated strings")
	table = flag.String("chaos.table", "", "also write the table of figures to this file")
)

// Env is what every scenario shares: the built programs, the oracle's
// server, and the endpoint of the suite's http jobs.
type Env struct {
	scheduler, worker, skewed string
	oracleAddr                string
	oracle                    *oracle.Oracle
	httpURL                   string
}

func build(t *testing.T, dir string) (scheduler, worker, skewed string) {
	t.Helper()
	// The go command that runs this test, else the first in PATH.
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gobin); err != nil {
		gobin = "go"
	}
	out := func(name string) string { return filepath.Join(dir, name) }
	// Built in this module (chaos/go.mod), whose replace directives take
	// the command and the library from this checkout.
	cmd := exec.Command(gobin, "build", "-o", dir+"/", "github.com/lockcron/lockcron/cmd/scheduler", "./internal/worker", "./internal/skewed")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, b)
	}
	return out("scheduler"), out("worker"), out("skewed")
}

func newEnv(t *testing.T) *Env {
	dir := t.TempDir()
	env := &Env{}
	env.scheduler, env.worker, env.skewed = build(t, dir)
	srv := redistest.Start(t)
	env.oracleAddr = srv.Addr()
	env.oracle = oracle.Open(srv.Addr())
	t.Cleanup(func() { env.oracle.Close() })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(env.serveRun)}
	var wg sync.WaitGroup
	wg.Go(func() { _ = hs.Serve(ln) })
	t.Cleanup(func() {
		_ = hs.Close()
		wg.Wait()
	})
	env.httpURL = "http://" + ln.Addr().String()
	return env
}

// serveRun is the suite's http job: the run's identity from its headers,
// held for ?hold=, recorded in the oracle like the worker's.
func (env *Env) serveRun(w http.ResponseWriter, r *http.Request) {
	hold, err := time.ParseDuration(r.URL.Query().Get("hold"))
	if err != nil {
		http.Error(w, "hold: "+err.Error(), http.StatusBadRequest)
		return
	}
	run := oracle.RunFromEnv(func(k string) string { return r.Header.Get("Lockcron-" + k) })
	status, err := env.oracle.Hold(run, hold, r.Context().Done())
	switch {
	case err != nil:
		http.Error(w, err.Error(), http.StatusInternalServerError)
	case status == oracle.StatusOK:
		w.WriteHeader(http.StatusOK)
	case status == oracle.StatusFenced:
		http.Error(w, "fenced", http.StatusConflict)
	default:
		http.Error(w, status, http.StatusServiceUnavailable)
	}
}

// TestChaos runs the fault scenarios (the quick ones unless -chaos.full)
// and prints one table of their figures. It fails if an invariant breaks in
// a scenario that is meant to survive its faults.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("fault suite: not in -short")
	}
	s := *seed
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	fmt.Printf("chaos: seed %d (rerun with -chaos.seed=%d)\n", s, s)
	t.Logf("seed %d", s)
	env := newEnv(t)
	var results []*Result
	var scs []*Scenario
	for _, sc := range scenarios() {
		if (!*full && !sc.Quick) || !selected(sc.Name) {
			continue
		}
		scs = append(scs, sc)
	}
	started := time.Now()
	for i, sc := range scs {
		rng := rand.New(rand.NewPCG(s, uint64(i)))
		var res *Result
		t.Run(sc.Name, func(t *testing.T) {
			res = runScenario(t, env, sc, rng)
			v := res.violations()
			for _, n := range res.Notes {
				t.Log(n)
			}
			if sc.NotSurvived != "" {
				if len(v) > 0 {
					t.Logf("not survived, as documented (%s): %s", sc.NotSurvived, strings.Join(v, "; "))
				}
				return
			}
			for _, x := range v {
				t.Error(x)
			}
		})
		if res != nil {
			results = append(results, res)
		}
	}
	tab := render("chaos", s, scs, results, time.Since(started))
	fmt.Print(tab)
	if *table != "" {
		if err := os.WriteFile(*table, []byte(tab), 0o644); err != nil {
			t.Error(err)
		}
	}
}

func runScenario(t *testing.T, env *Env, sc *Scenario, rng *rand.Rand) *Result {
	ctx := context.Background()
	if err := env.oracle.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, env, sc)
	for i := range sc.Replicas {
		var off time.Duration
		if i < len(sc.Offsets) {
			off = sc.Offsets[i]
		}
		c.start(off)
	}
	c.busyLoops(sc.Busy)
	w := &window{wall0: time.Now(), mono0: oracle.Mono(), period: sc.Period, lease: sc.Lease}
	warm := 2 * time.Second
	w.from = w.mono0 + int64(warm+sc.Period)
	f := &Faults{c: c, rng: rng, t: t, env: env}
	f.sleep(warm)
	base := goroutines(c)
	length := sc.Length
	if !*full && sc.QuickLength > 0 {
		length = sc.QuickLength
	}
	f.end = time.Now().Add(length)
	if sc.Faults != nil {
		sc.Faults(f)
	}
	f.sleep(time.Until(f.end))
	w.to = oracle.Mono()
	return judge(t, env, c, f, w, base)
}

// judge drains the fleet after the fault phase (w.to), runs the leak
// checks (goroutines against base, Pub/Sub channels, keys without a TTL),
// stops the fleet, and applies the checker to the oracle's whole history
// with every fault window.
func judge(t *testing.T, env *Env, c *Cluster, f *Faults, w *window, base map[string]float64) *Result {
	ctx := context.Background()
	sc := c.sc
	// Drain: queued and handed-off ticks of the fault phase run now.
	f.sleep(sc.Lease + 3*time.Second)

	res := &Result{}
	for _, r := range c.up() {
		if v, err := metric(r.addr, "lockcron_lock_lost_total"); err == nil {
			res.LocksLost += v
		}
	}
	after := goroutines(c)
	subs, _ := c.sutDo(ctx, "PUBSUB", "NUMPAT")
	if chans, err := c.sutDo(ctx, "PUBSUB", "CHANNELS"); err == nil {
		// One channel per lock name at most, shared by a Client's waiters,
		// and a few of the scheduler's own.
		list, _ := chans.([]any)
		if bound := 2*(sc.ExecJobs+sc.HTTPJobs) + 4; len(list) > bound {
			res.Leaks = append(res.Leaks, fmt.Sprintf("%d Pub/Sub channels subscribed, more than %d", len(list), bound))
		}
	}
	for id, n := range after {
		// Claims under way grow with the jobs; a leak grows with the ticks.
		if b, ok := base[id]; ok && n > max(2*b, b+100+3*float64(sc.ExecJobs+sc.HTTPJobs)) {
			res.Leaks = append(res.Leaks, fmt.Sprintf("%s: goroutines %.0f -> %.0f", id, b, n))
		}
	}
	for _, err := range c.stopGracefully() {
		res.Err = append(res.Err, err.Error())
	}
	c.stopAll()
	if n, ok := subs.(int64); ok && n > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("pattern subscriptions: %d", n))
	}
	res.Leaks = append(res.Leaks, c.keysWithoutTTL(ctx)...)

	evs, err := env.oracle.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dumpEvents(t, filepath.Join(c.dir, "events.jsonl"), evs, c.windows, c.kills)
	w.excused = c.windows
	got := check(sc.Name, evs, w, sc.jobs(), c.kills)
	got.LocksLost = res.LocksLost
	got.Leaks = append(got.Leaks, res.Leaks...)
	got.Err = res.Err
	got.Broken = append(got.Broken, f.broken...)
	if sc.Chain {
		broken, notes := checkChain(evs, w, f.recorded, c.kills)
		got.Broken = append(got.Broken, broken...)
		got.Notes = append(got.Notes, notes...)
	}
	got.Notes = append(append(got.Notes, res.Notes...), f.notes...)
	if len(got.violations()) > 0 {
		t.Logf("replica logs kept in %s", keep(t, c.dir))
	}
	return got
}

// jobs names the scenario's jobs, as its replicas' config does.
func (sc *Scenario) jobs() []string {
	var jobs []string
	for i := range sc.ExecJobs {
		jobs = append(jobs, fmt.Sprintf("exec%d", i))
	}
	for i := range sc.HTTPJobs {
		jobs = append(jobs, fmt.Sprintf("http%03d", i))
	}
	if sc.Chain {
		jobs = append(jobs, chainParent) // its child has no ticks of its own
	}
	return jobs
}

// keep copies dir (a t.TempDir, removed at the end) to a directory that
// stays, for a look at the replicas' logs after a failure.
func keep(t *testing.T, dir string) string {
	dst, err := os.MkdirTemp("", "chaos-"+strings.ReplaceAll(t.Name(), "/", "-")+"-")
	if err != nil {
		return dir
	}
	_ = os.CopyFS(dst, os.DirFS(dir))
	return dst
}

// goroutines returns go_goroutines of each replica that is up.
func goroutines(c *Cluster) map[string]float64 {
	m := map[string]float64{}
	for _, r := range c.up() {
		if r.state != "up" {
			continue
		}
		if v, err := metric(r.addr, "go_goroutines"); err == nil {
			m[r.ID] = v
		}
	}
	return m
}

// keysWithoutTTL lists the keys of the Redis under test that would live
// for ever.
func (c *Cluster) keysWithoutTTL(ctx context.Context) []string {
	var out []string
	keys, err := c.sutDo(ctx, "KEYS", "*")
	if err != nil {
		return []string{"KEYS: " + err.Error()}
	}
	list, _ := keys.([]any)
	for _, k := range list {
		ttl, err := c.sutDo(ctx, "PTTL", k)
		if err == nil && ttl == int64(-1) {
			out = append(out, fmt.Sprintf("key without TTL: %v", k))
		}
	}
	return out
}

// render prints the table of figures of what ("chaos", "soak"): a row per
// result, the scenario of the same index naming it.
func render(what string, s uint64, scs []*Scenario, rs []*Result, took time.Duration) string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "\n%s: seed %d, %s, %s, %d CPUs, %s, took %s\n\n", what, s, time.Now().UTC().Format("2006-01-02 15:04 MST"), host, runtime.NumCPU(), loadavg(), took.Round(time.Second))
	b.WriteString("| scenario | ticks | skipped (overlap) | runs | missed | twice | overlap | token↓ | interrupted → re-run (max delay) | late p50 / max | locks lost | exec outlived daemon | leaks | verdict |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range rs {
		sc := scs[i]
		verdict := "holds"
		if v := r.violations(); len(v) > 0 {
			verdict = "BROKEN"
			if sc.NotSurvived != "" {
				verdict = "not survived (documented)"
			}
		}
		gone := "–"
		if r.GroupGone != 0 {
			gone = ms(r.GroupGone)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d → %d (%s) | %s / %s | %.0f | %s | %d | %s |\n",
			sc.Name, r.Ticks, r.Skipped, r.Runs, len(r.Missed), len(r.Twice), len(r.Overlaps), len(r.Backwards),
			r.Interrupted, r.Rerun, ms(r.RerunMax), ms(r.LateP50), ms(r.LateMax), r.LocksLost, gone, len(r.Leaks), verdict)
	}
	b.WriteString("\n")
	for i, r := range rs {
		if r.RerunWorst != "" {
			fmt.Fprintf(&b, "- %s: slowest re-run: %s\n", scs[i].Name, r.RerunWorst)
		}
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s: %s\n", scs[i].Name, n)
		}
		for _, v := range r.violations() {
			fmt.Fprintf(&b, "- %s: %s\n", scs[i].Name, v)
		}
	}
	return b.String()
}

func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load ?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "load ?"
	}
	return "load " + strings.Join(f[:3], " ")
}

// dumpEvents writes the oracle's events, the fault windows and the kills
// to path, one JSON object a line, for a look after a failure.
func dumpEvents(t *testing.T, path string, evs []oracle.Event, ws []Window, ks []Kill) {
	f, err := os.Create(path)
	if err != nil {
		t.Log(err)
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, w := range ws {
		_ = enc.Encode(map[string]any{"window": w})
	}
	for _, k := range ks {
		_ = enc.Encode(map[string]any{"kill": k})
	}
	for _, ev := range evs {
		_ = enc.Encode(map[string]any{"seq": ev.Seq, "accepted": ev.Accepted, "ev": ev})
	}
}

func selected(name string) bool {
	if *only == "" {
		return true
	}
	for _, s := range strings.Split(*only, "|") {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}
