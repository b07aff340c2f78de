package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/scheduler"
)

// receiver is a webhook endpoint that records what it got and answers
// with the statuses of answer, in turn (200 once they run out).
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies [][]byte
	hdrs   []http.Header
	answer []int
	hold   chan struct{} // when not nil, each request waits for it to close
	got    chan struct{} // a signal per request
}

func newReceiver(t *testing.T, answer ...int) *receiver {
	r := &receiver{answer: answer, got: make(chan struct{}, 1024)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, b)
		r.hdrs = append(r.hdrs, req.Header.Clone())
		status := http.StatusOK
		if len(r.answer) > 0 {
			status, r.answer = r.answer[0], r.answer[1:]
		}
		hold := r.hold
		r.mu.Unlock()
		r.got <- struct{}{}
		if hold != nil {
			select {
			case <-hold:
			case <-req.Context().Done():
			}
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.bodies)
}

func (r *receiver) body(i int) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies[i]
}

// awaitN waits for n requests in all.
func (r *receiver) awaitN(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for r.count() < n {
		select {
		case <-r.got:
		case <-deadline:
			t.Fatalf("%d requests, want %d", r.count(), n)
		}
	}
}

// loadNotify loads a config of one job "backup" (and "report") and the
// notify blocks given, with env as the environment.
func loadNotify(t *testing.T, blocks string, env ...string) *config.Config {
	t.Helper()
	src := `
job "backup" {
  schedule = "@every 1m"
  exec { command = ["true"] }
}
job "report" {
  schedule = "@every 1m"
  exec { command = ["true"] }
}
` + blocks
	path := filepath.Join(t.TempDir(), "lockcron.hcl")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, config.WithEnviron(env))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg
}

// testNotifier builds a notifier logging to a buffer, with a short
// backoff; it is closed with the test.
func testNotifier(t *testing.T, cfg *config.Config) (*notifier, *syncBuf) {
	t.Helper()
	logs := &syncBuf{}
	n := newNotifier(cfg, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}))
	if n == nil {
		t.Fatal("no notifier")
	}
	n.backoff = 10 * time.Millisecond
	t.Cleanup(func() { n.close(context.Background()) })
	return n, logs
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// hasLine reports whether a line of logs holds every one of parts.
func hasLine(logs string, parts ...string) bool {
	for _, l := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

func run(job string, outcome scheduler.Outcome) scheduler.Run {
	tick := time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC)
	return scheduler.Run{Job: job, Tick: tick, Replica: "web-1", Attempt: 2, Start: tick,
		End: tick.Add(1200 * time.Millisecond), Duration: 1200 * time.Millisecond, Outcome: outcome, Token: 42,
		Error: "jobs: exec \"report\": exit status 3; stderr: <disk> & full"}
}

// The default outcomes (failed, lost_lock, missed), a filter on jobs, and
// the JSON body: the run, the block's name, a summary.
func TestNotifyFiltersAndJSON(t *testing.T) {
	rcv := newReceiver(t)
	cfg := loadNotify(t, `
notify "all" {
  url = "`+rcv.srv.URL+`/all"
}
notify "backup-only" {
  url = "`+rcv.srv.URL+`/backup"
  on = ["ran"]
  jobs = ["backup"]
}
`)
	n, _ := testNotifier(t, cfg)
	for _, r := range []scheduler.Run{
		run("backup", scheduler.OutcomeRan),         // backup-only
		run("report", scheduler.OutcomeRan),         // none
		run("report", scheduler.OutcomeFailed),      // all
		run("backup", scheduler.OutcomeHandedOff),   // none
		run("backup", scheduler.OutcomeLostLock),    // all
		run("report", scheduler.OutcomeInterrupted), // none
	} {
		n.onRun(r)
	}
	missed := run("report", scheduler.OutcomeMissed)
	missed.Missed, missed.Error = 3, ""
	n.onRun(missed) // all
	n.close(context.Background())
	if rcv.count() != 4 {
		t.Fatalf("%d webhooks, want 4", rcv.count())
	}
	var got []NotificationJSON
	for i := range 4 {
		var b NotificationJSON
		if err := json.Unmarshal(rcv.body(i), &b); err != nil {
			t.Fatalf("body %d: %v: %s", i, err, rcv.body(i))
		}
		got = append(got, b)
	}
	want := []struct{ notify, job, outcome string }{
		{"backup-only", "backup", "ran"}, {"all", "report", "failed"}, {"all", "backup", "lost_lock"}, {"all", "report", "missed"},
	}
	for i, w := range want {
		if got[i].Notify != w.notify || got[i].Job != w.job || string(got[i].Outcome) != w.outcome {
			t.Errorf("webhook %d: %s %s %s, want %v", i, got[i].Notify, got[i].Job, got[i].Outcome, w)
		}
	}
	f := got[1]
	if f.Replica != "web-1" || f.Attempt != 2 || f.Token != 42 || f.Duration != 1200*time.Millisecond ||
		!strings.Contains(f.Error, "exit status 3") {
		t.Errorf("failed run's body: %+v", f)
	}
	if f.Summary != "lockcron: job report failed on web-1 (2026-11-24T02:00:00Z, attempt 2, 1.2s)" {
		t.Errorf("summary %q", f.Summary)
	}
	if s := got[3].Summary; !strings.Contains(s, "missed 3 tick(s)") {
		t.Errorf("missed summary %q", s)
	}
	if h := rcv.hdrs[0]; h.Get("Content-Type") != "application/json" || !strings.HasPrefix(h.Get("User-Agent"), "lockcron/") {
		t.Errorf("headers %v", h)
	}
}

func TestNotifySlack(t *testing.T) {
	rcv := newReceiver(t)
	cfg := loadNotify(t, `
notify "chat" {
  url = "`+rcv.srv.URL+`/services/T0/B0/x"
  format = "slack"
}
`)
	n, _ := testNotifier(t, cfg)
	n.onRun(run("report", scheduler.OutcomeFailed))
	n.close(context.Background())
	var b map[string]string
	if err := json.Unmarshal(rcv.body(0), &b); err != nil || len(b) != 1 {
		t.Fatalf("slack body %s: %v", rcv.body(0), err)
	}
	want := "lockcron: job *report* failed on web-1 (2026-11-24T02:00:00Z, attempt 2, 1.2s)\n```jobs: exec \"report\": exit status 3; stderr: &lt;disk&gt; &amp; full```"
	if b["text"] != want {
		t.Errorf("text\n%q, want\n%q", b["text"], want)
	}
}

// Slack's auto_paused message says the pause's note once, in its summary,
// with no code block repeating it.
func TestNotifySlackAutoPaused(t *testing.T) {
	r := run("report", scheduler.OutcomeAutoPaused)
	r.Error = "paused after 3 failed runs in a row"
	body, err := notifyBody(config.NotifySlack, "chat", r)
	if err != nil {
		t.Fatal(err)
	}
	var b map[string]string
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	want := "lockcron: job *report* paused itself on every replica, paused after 3 failed runs in a row (the last failed on web-1, 2026-11-24T02:00:00Z); resume it to run it again"
	if b["text"] != want {
		t.Errorf("text\n%q, want\n%q", b["text"], want)
	}
}

// A 500 and a 429 are tried again; a 400 is not.
func TestNotifyRetries(t *testing.T) {
	rcv := newReceiver(t, 500, 429, 200, 400)
	cfg := loadNotify(t, `
notify "ops" {
  url = "`+rcv.srv.URL+`"
  retries = 3
}
`)
	n, logs := testNotifier(t, cfg)
	n.onRun(run("backup", scheduler.OutcomeFailed)) // 500, 429, 200
	n.onRun(run("report", scheduler.OutcomeFailed)) // 400
	n.close(context.Background())
	if rcv.count() != 4 {
		t.Errorf("%d requests, want 4 (three tries, then one refused)\n%s", rcv.count(), logs)
	}
	if l := logs.String(); !hasLine(l, "notification sent:", "job=backup", "notify=ops", "tries=3") ||
		!hasLine(l, "notification refused:", "job=report", "status=400", "tries=1") {
		t.Errorf("logs:\n%s", l)
	}
}

// A webhook that does not answer within the timeout is tried again, and
// given up after its retries, with a warning that does not show the URL.
func TestNotifyTimeoutAndNoURLInLogs(t *testing.T) {
	rcv := newReceiver(t)
	rcv.hold = make(chan struct{})
	defer close(rcv.hold)
	const token = "xoxb-secret-path-token"
	cfg := loadNotify(t, `
notify "slow" {
  url_env = "HOOK"
  timeout = "50ms"
  retries = 1
}
`, "HOOK="+rcv.srv.URL+"/hooks/"+token)
	n, logs := testNotifier(t, cfg)
	n.onRun(run("backup", scheduler.OutcomeFailed))
	n.close(context.Background())
	if rcv.count() != 2 {
		t.Errorf("%d tries, want 2", rcv.count())
	}
	l := logs.String()
	if !hasLine(l, "notification not sent:", "notify=slow", "job=backup", "tries=2", "deadline exceeded") {
		t.Errorf("logs:\n%s", l)
	}
	// An address nobody listens on: the error of the dial.
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL + "/hooks/" + token
	dead.Close()
	cfg = loadNotify(t, `
notify "dead" {
  url = "`+deadURL+`"
  retries = 0
}
`)
	n2, logs2 := testNotifier(t, cfg)
	n2.onRun(run("backup", scheduler.OutcomeFailed))
	n2.close(context.Background())
	for _, l := range []string{l, logs2.String()} {
		if strings.Contains(l, token) || strings.Contains(l, "/hooks/") {
			t.Errorf("the logs show the URL:\n%s", l)
		}
	}
	if !strings.Contains(logs2.String(), "connection refused") {
		t.Errorf("logs:\n%s", logs2)
	}
}

// A full queue drops notifications instead of blocking the run that
// reports them, and says so; close gives up on the rest at its deadline.
func TestNotifyFullQueue(t *testing.T) {
	rcv := newReceiver(t)
	rcv.hold = make(chan struct{})
	cfg := loadNotify(t, `
notify "stuck" {
  url = "`+rcv.srv.URL+`"
  timeout = "1m"
  retries = 0
}
`)
	n, logs := testNotifier(t, cfg)
	n.onRun(run("backup", scheduler.OutcomeFailed))
	rcv.awaitN(t, 1) // the sender is stuck in its first request
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range notifyQueue + 50 {
			n.onRun(run("backup", scheduler.OutcomeFailed))
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("onRun blocked on a full queue")
	}
	if l := logs.String(); !strings.Contains(l, "notifications dropped") || !strings.Contains(l, "dropped=1 ") {
		t.Errorf("no warning about dropped notifications:\n%s", l)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	closed := make(chan struct{})
	go func() { n.close(ctx); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return after its deadline")
	}
	close(rcv.hold)
	if l := logs.String(); !strings.Contains(l, "notifications not sent: the stop's deadline passed") || !strings.Contains(l, "unsent=") {
		t.Errorf("no warning about unsent notifications:\n%s", l)
	}
	n.onRun(run("backup", scheduler.OutcomeFailed)) // after close: ignored
	if c := rcv.count(); c != 1 {
		t.Errorf("%d requests, want the first only", c)
	}
}

// A manual run's parameters reach a webhook by name only: their values
// are the history's, not every receiver's.
func TestNotifyParamNamesOnly(t *testing.T) {
	t.Parallel()
	r := scheduler.Run{Job: "report", Trigger: 7, Outcome: scheduler.OutcomeFailed, Params: map[string]string{"customer": "s3cret-42", "month": "2026-10"}}
	for _, format := range []string{config.NotifyJSON, config.NotifySlack} {
		b, err := notifyBody(format, "all", r)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("s3cret-42")) || bytes.Contains(b, []byte("2026-10")) {
			t.Errorf("%s body holds a parameter's value: %s", format, b)
		}
		if format != config.NotifyJSON {
			continue
		}
		var n NotificationJSON
		if err := json.Unmarshal(b, &n); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(n.ParamNames, []string{"customer", "month"}) || n.Params != nil {
			t.Errorf("json body: param_names %q, params %v; want the names only", n.ParamNames, n.Params)
		}
	}
	if r.Params["customer"] != "s3cret-42" {
		t.Errorf("the run's params changed: %v", r.Params)
	}
}
