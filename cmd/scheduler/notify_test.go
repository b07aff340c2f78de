package main_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/scheduler"
)

// hookSink is a webhook endpoint that keeps every body it gets.
type hookSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
}

func newHookSink(t *testing.T) *hookSink {
	h := &hookSink{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies = append(h.bodies, b)
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookSink) all() [][]byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bodies)
}

// Two replicas, a job that fails every other tick, two webhooks (JSON and
// Slack): each failed run in the history is notified exactly once to
// each, by whichever replica recorded it, and no run that succeeded is.
func TestNotifyOncePerFailedRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ops, chat := newHookSink(t), newHookSink(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("flaky", "@every 1s", "1s", `if [ $(( $(date +%s) % 2 )) -eq 0 ]; then echo "disk full" >&2; exit 1; fi`)+
		execJob("fine", "@every 1s", "1s", `true`)+`
notify "ops" {
  url = "`+ops.srv.URL+`/ops"
}
notify "chat" {
  url    = "`+chat.srv.URL+`/services/T0/B0/x"
  format = "slack"
  jobs   = ["flaky"]
}
`)
	ps := startFleet(t, dir, cfg, 2)
	testkit.Eventually(t, 45*time.Second, "6 webhooks", func() bool { return len(ops.all()) >= 6 })

	// Each replica serves the same fleet-wide history: r2's page of runs
	// before r1's newest is r1's page after it.
	page := func(p *proc, query string) []scheduler.Run {
		st, b, _ := httpDo(t, "GET", "http://"+p.admin+"/api/jobs/flaky/runs"+query, "")
		var runs []scheduler.Run
		if err := json.Unmarshal(b, &runs); st != 200 || err != nil {
			t.Fatalf("%s: runs%s: %d %v %s", p.name, query, st, err, b)
		}
		return runs
	}
	r1 := page(ps[0], "?limit=6")
	r2 := page(ps[1], "?limit=5&before="+r1[0].ID)
	if len(r1) != 6 || !slices.EqualFunc(r1[1:], r2, func(a, b scheduler.Run) bool {
		return a.ID == b.ID && a.Tick.Equal(b.Tick) && a.Replica == b.Replica && a.Outcome == b.Outcome && a.Token == b.Token
	}) {
		t.Errorf("r1's history %v and r2's %v differ", r1, r2)
	}

	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		if code := p.awaitExit(t, 30*time.Second); code != 0 {
			t.Errorf("%s exited %d", p.name, code)
		}
	}

	r := mustCLI(t, 0, dir, "history", "flaky", "-json", "-limit", "1000", "-config", cfg)
	var runs []scheduler.Run
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatal(err)
	}
	// A run is its tick (each one runs once, at attempt 1): the run a
	// webhook tells of has no history id, which Redis gives it as it is
	// appended.
	key := func(r scheduler.Run) string { return r.Tick.UTC().Format(time.RFC3339Nano) + " on " + r.Replica }
	var failed []string
	replicas := map[string]bool{}
	for _, run := range runs {
		if run.Outcome == scheduler.OutcomeFailed {
			failed = append(failed, key(run))
			replicas[run.Replica] = true
		}
	}
	var got []string
	for _, b := range ops.all() {
		var n daemon.NotificationJSON
		if err := json.Unmarshal(b, &n); err != nil {
			t.Fatalf("webhook body %s: %v", b, err)
		}
		if n.Notify != "ops" || n.Job != "flaky" || n.Outcome != scheduler.OutcomeFailed || !strings.Contains(n.Error, "disk full") {
			t.Errorf("webhook: %s", b)
		}
		got = append(got, key(n.Run))
	}
	slices.Sort(failed)
	slices.Sort(got)
	if !slices.Equal(got, failed) {
		t.Errorf("webhooks for runs %v, want one for each failed run in the history %v", got, failed)
	}
	t.Logf("%d failed runs, recorded by %d replica(s), %d webhooks", len(failed), len(replicas), len(got))

	texts := chat.all()
	if len(texts) != len(failed) {
		t.Errorf("%d Slack webhooks, want %d", len(texts), len(failed))
	}
	for _, b := range texts {
		var m map[string]string
		if err := json.Unmarshal(b, &m); err != nil || len(m) != 1 || !strings.HasPrefix(m["text"], "lockcron: job *flaky* failed on r") ||
			!strings.Contains(m["text"], "disk full") {
			t.Errorf("Slack body %s (%v)", b, err)
		}
	}
}

// Webhooks are delivered at least once: a receiver that fails once gets
// the event again, with the same Idempotency-Key, which the body carries
// too; another run has another key.
func TestNotifyRetriesWithTheSameIdempotencyKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	type call struct {
		key  string
		body []byte
	}
	var (
		mu    sync.Mutex
		calls []call
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, call{r.Header.Get("Idempotency-Key"), b})
		if len(calls) == 1 {
			http.Error(w, "down for a moment", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(hook.Close)
	got := func() []call {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+execJob("flaky", "@every 1s", "1s", `exit 1`)+`
notify "ops" {
  url = "`+hook.URL+`/ops"
}
`)
	startReplica(t, dir, cfg, "r1")
	testkit.Eventually(t, 30*time.Second, "the failed call, its retry, and the next run's call", func() bool { return len(got()) >= 3 })
	cs := got()
	var bodies [3]daemon.NotificationJSON
	for i := range bodies {
		if err := json.Unmarshal(cs[i].body, &bodies[i]); err != nil {
			t.Fatalf("webhook body %s: %v", cs[i].body, err)
		}
		if len(cs[i].key) != 32 || bodies[i].IdempotencyKey != cs[i].key {
			t.Errorf("call %d: Idempotency-Key %q, body's key %q", i, cs[i].key, bodies[i].IdempotencyKey)
		}
	}
	if cs[0].key != cs[1].key || !bodies[0].Tick.Equal(bodies[1].Tick) || bodies[0].Token != bodies[1].Token {
		t.Errorf("the retry is not the same event with the same key: %s (%s) then %s (%s)", cs[0].body, cs[0].key, cs[1].body, cs[1].key)
	}
	if cs[2].key == cs[0].key || bodies[2].Tick.Equal(bodies[0].Tick) {
		t.Errorf("the next run has the same key %s or tick: %s", cs[2].key, cs[2].body)
	}
}

// Two replicas, a job whose runs (3.5s) outlast its period (2s), queued
// (overlap queue) with a start deadline of 1s: the tick queued behind each
// run cannot start in time. Each such tick is recorded deadline_missed
// once across the fleet, and a notify block with the default outcomes
// posts it once; the runs that started in time are not posted.
func TestNotifyDeadlineMissedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ops := newHookSink(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("slow", "@every 2s", "1s", `sleep 3.5`, `overlap = "queue"`, `start_deadline = "1s"`)+`
notify "ops" {
  url = "`+ops.srv.URL+`/ops"
}
`)
	ps := startFleet(t, dir, cfg, 2)
	testkit.Eventually(t, 45*time.Second, "2 webhooks", func() bool { return len(ops.all()) >= 2 })
	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		if code := p.awaitExit(t, 30*time.Second); code != 0 {
			t.Errorf("%s exited %d", p.name, code)
		}
	}

	r := mustCLI(t, 0, dir, "history", "slow", "-json", "-limit", "1000", "-config", cfg)
	var runs []scheduler.Run
	if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
		t.Fatal(err)
	}
	key := func(r scheduler.Run) string { return r.Tick.UTC().Format(time.RFC3339Nano) + " on " + r.Replica }
	// A tick handed off at the stop may show twice (handed_off, then its
	// takeover's outcome); one recorded deadline_missed, once.
	var missed []string
	ticks := map[string]int{}
	for _, run := range runs {
		if run.Outcome == scheduler.OutcomeDeadlineMissed {
			missed = append(missed, key(run))
			ticks[run.Tick.UTC().Format(time.RFC3339Nano)]++
		}
	}
	for tick, n := range ticks {
		if n != 1 {
			t.Errorf("tick %s: recorded deadline_missed %d times, want once", tick, n)
		}
	}
	var got []string
	for _, b := range ops.all() {
		var n daemon.NotificationJSON
		if err := json.Unmarshal(b, &n); err != nil {
			t.Fatalf("webhook body %s: %v", b, err)
		}
		if n.Notify != "ops" || n.Job != "slow" || n.Outcome != scheduler.OutcomeDeadlineMissed ||
			!strings.Contains(n.Summary, "missed its start_deadline") {
			t.Errorf("webhook: %s", b)
		}
		got = append(got, key(n.Run))
	}
	slices.Sort(missed)
	slices.Sort(got)
	if len(missed) < 2 || !slices.Equal(got, missed) {
		t.Errorf("webhooks for runs %v, want one for each deadline_missed run in the history %v (2 or more)", got, missed)
	}
	t.Logf("%d history entries, %d deadline_missed", len(runs), len(missed))
}

// Two replicas, a job with alert_after = "2s" whose first run goes on
// until the test lets it end, and whose later runs end at once: the long
// run is posted once across the fleet, as running_long, by a notify block
// with the default outcomes, with a warning in the log of the replica that
// runs it. While it goes on, that replica's gauge
// lockcron_job_running_seconds is past alert_after (the other's 0) and the
// job view of every replica, and of `scheduler jobs`, has running_long;
// after, the gauge is 0 and the mark gone. The later runs post nothing.
func TestNotifyRunningLongOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ops := newHookSink(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, header(srv.Addr(), "5s")+
		execJob("slow", "@every 3s", "1s", `if [ ! -e started ]; then touch started; while [ ! -e release ]; do sleep 0.1; done; fi`,
			`alert_after = "2s"`)+`
notify "ops" {
  url = "`+ops.srv.URL+`/ops"
}
`)
	ps := startFleet(t, dir, cfg, 2)
	testkit.Eventually(t, 45*time.Second, "a webhook", func() bool { return len(ops.all()) >= 1 })
	var n daemon.NotificationJSON
	if err := json.Unmarshal(ops.all()[0], &n); err != nil {
		t.Fatalf("webhook body %s: %v", ops.all()[0], err)
	}
	runner := byName(ps, n.Replica)
	if runner == nil || n.Notify != "ops" || n.Job != "slow" || n.Outcome != scheduler.OutcomeRunningLong || n.Duration < 2*time.Second ||
		!strings.Contains(n.Summary, "lockcron: job slow is still running, past its alert_after, on "+n.Replica) {
		t.Fatalf("webhook: %s", ops.all()[0])
	}
	other := ps[0]
	if other == runner {
		other = ps[1]
	}
	// The warning comes before the webhook; its line may still be on its
	// way through the runner's stderr.
	testkit.Eventually(t, 10*time.Second, "the runner's warning read", func() bool {
		_, ok := runner.logs.find("run going past its alert_after")
		return ok
	})
	if l, ok := runner.logs.find("run going past its alert_after"); !ok || l.str("@level") != "warn" || l.str("job") != "slow" || l.str("alert_after") != "2s" {
		t.Errorf("%s: warning %v (%v), want one at warn of job slow, alert_after 2s", runner.name, l, ok)
	}
	if _, ok := other.logs.find("run going past its alert_after"); ok {
		t.Errorf("%s warned of a run it does not run", other.name)
	}

	gauge := func(p *proc) float64 {
		t.Helper()
		_, b, _ := httpDo(t, "GET", "http://"+p.admin+"/metrics", "")
		v, ok := testkit.Metric(string(b), "lockcron_job_running_seconds", `lockcron_job="slow"`)
		if !ok {
			t.Fatalf("%s: /metrics has no lockcron_job_running_seconds of slow", p.name)
		}
		return v
	}
	if v := gauge(runner); v < 2 {
		t.Errorf("%s: lockcron_job_running_seconds = %v while the run is past alert_after, want at least 2", runner.name, v)
	}
	if v := gauge(other); v != 0 {
		t.Errorf("%s: lockcron_job_running_seconds = %v, want 0: the run is not there", other.name, v)
	}
	for _, p := range ps {
		st, b, _ := httpDo(t, "GET", "http://"+p.admin+"/api/jobs", "")
		var js []daemon.JobJSON
		if err := json.Unmarshal(b, &js); st != 200 || err != nil || len(js) != 1 || js[0].RunningLong == nil ||
			js[0].RunningLong.Before(n.Start.Add(2*time.Second-time.Second)) || js[0].RunningLong.After(n.Start.Add(3*time.Second)) {
			t.Errorf("%s: /api/jobs: %d %v %s; want slow with running_long about 2s after %v", p.name, st, err, b, n.Start)
		}
	}
	if js := jobsJSON(t, dir, cfg); len(js) != 1 || js[0].RunningLong == nil {
		t.Errorf("scheduler jobs -json: %+v; want slow with running_long (from the ledger)", js)
	}

	if err := os.WriteFile(filepath.Join(dir, "release"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, runner.name+": the gauge back to 0", func() bool { return gauge(runner) == 0 })
	testkit.Eventually(t, 20*time.Second, "the mark gone", func() bool {
		st, b, _ := httpDo(t, "GET", "http://"+other.admin+"/api/jobs", "")
		var js []daemon.JobJSON
		return st == 200 && json.Unmarshal(b, &js) == nil && len(js) == 1 && js[0].RunningLong == nil
	})
	// Two quick runs after it, and their alert_after passed.
	var last time.Time
	testkit.Eventually(t, 30*time.Second, "two runs after the long one", func() bool {
		r := mustCLI(t, 0, dir, "history", "slow", "-json", "-config", cfg)
		var runs []scheduler.Run
		if err := json.Unmarshal([]byte(r.stdout), &runs); err != nil {
			t.Fatal(err)
		}
		k := 0
		for _, run := range runs {
			if run.Outcome == scheduler.OutcomeRan && run.Tick.After(n.Tick) {
				k++
				if run.Start.After(last) {
					last = run.Start
				}
			}
		}
		return k >= 2
	})
	quiet := last.Add(3 * time.Second)
	testkit.Eventually(t, 10*time.Second, "the later runs past their alert_after", func() bool { return time.Now().After(quiet) })
	for _, p := range ps {
		p.signal(t, syscall.SIGTERM)
	}
	for _, p := range ps {
		if code := p.awaitExit(t, 30*time.Second); code != 0 {
			t.Errorf("%s exited %d", p.name, code)
		}
	}
	if bodies := ops.all(); len(bodies) != 1 {
		t.Errorf("%d webhooks, want 1: the long run once, the quick ones not at all:\n%s", len(bodies), bytes.Join(bodies, []byte("\n")))
	}
}
