package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/scheduler"
)

// Notification settings.
const (
	// notifyQueue is how many notifications may wait to be sent; more are
	// dropped (and counted), so that a slow webhook never holds up a run.
	notifyQueue = 256
	// notifyMaxBackoff caps the wait between retries.
	notifyMaxBackoff = 30 * time.Second
	// notifyDropWarnEvery is how often, at most, dropped notifications
	// are logged.
	notifyDropWarnEvery = time.Minute
	// slackTail is how much of a run's error the Slack text shows.
	slackTail = 300
)

// notifier sends the notify blocks' webhooks. The scheduler hands it each
// run it records (scheduler.WithOnRun: once per run across the fleet), and
// each of its runs going on past alert_after (WithOnRunningLong: likewise);
// each is delivered at least once: a try that fails or times out is made
// again, and every try carries the run's key (runKey) as its
// Idempotency-Key header, so that a receiver can drop repeats;
// onRun queues the run for the blocks that want it without blocking, and
// one goroutine, owned by the notifier, sends them in order, each with its
// block's timeout and retries. close stops taking runs, sends what is
// queued within its deadline, and waits for the goroutine.
type notifier struct {
	hooks   []hook
	log     hclog.Logger
	redact  func(string) string
	client  *http.Client
	agent   string
	backoff time.Duration // the first wait between tries; doubled each time

	queue  chan message
	ctx    context.Context // ends when close's deadline passes
	cancel context.CancelFunc
	quit   chan struct{} // closed by close: drain, then return
	done   chan struct{} // closed when the sender has returned

	mu       sync.Mutex
	closed   bool
	dropped  int // since the last warning
	warnedAt time.Time
}

// hook is one notify block.
type hook struct{ config.Notify }

func (h *hook) wants(r scheduler.Run) bool {
	return slices.Contains(h.On, string(r.Outcome)) && (len(h.Jobs) == 0 || slices.Contains(h.Jobs, r.Job))
}

// message is a run to send to a hook.
type message struct {
	hook *hook
	run  scheduler.Run
}

// newNotifier returns a notifier for the config's notify blocks, its
// sender started; nil if there are none.
func newNotifier(cfg *config.Config, log hclog.Logger) *notifier {
	if len(cfg.Notify) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &notifier{
		log: log, redact: cfg.Redact, agent: "lockcron/" + Version(), backoff: time.Second,
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		queue:  make(chan message, notifyQueue), ctx: ctx, cancel: cancel,
		quit: make(chan struct{}), done: make(chan struct{}),
	}
	for _, c := range cfg.Notify {
		n.hooks = append(n.hooks, hook{c})
		log.Info("notifications", "to", c.Describe())
	}
	go n.run()
	return n
}

// onRun queues r for every hook that wants it. It never blocks: when the
// queue is full, the notification is dropped and counted.
func (n *notifier) onRun(r scheduler.Run) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return
	}
	for i := range n.hooks {
		h := &n.hooks[i]
		if !h.wants(r) {
			continue
		}
		select {
		case n.queue <- message{hook: h, run: r}:
		default:
			n.dropped++
			if now := time.Now(); now.Sub(n.warnedAt) >= notifyDropWarnEvery {
				n.log.Warn("notifications dropped: the queue is full (a webhook is slow or down)", "dropped", n.dropped, "queue", notifyQueue)
				n.dropped, n.warnedAt = 0, now
			}
		}
	}
}

// close stops taking runs and sends the queued ones until ctx ends; then
// it gives up on the rest, and returns once the sender has.
func (n *notifier) close(ctx context.Context) {
	if n == nil {
		return
	}
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		<-n.done
		return
	}
	n.closed = true
	n.mu.Unlock()
	close(n.quit)
	select {
	case <-n.done:
	case <-ctx.Done():
		n.cancel()
		<-n.done
	}
	n.cancel()
}

// run sends the queued notifications, one at a time, until close; then
// what is left in the queue.
func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case m := <-n.queue:
			n.send(m)
		case <-n.quit:
			unsent := 0
			for {
				select {
				case m := <-n.queue:
					if n.ctx.Err() != nil {
						unsent++
						continue
					}
					n.send(m)
				default:
					if unsent > 0 {
						n.log.Warn("notifications not sent: the stop's deadline passed", "unsent", unsent)
					}
					return
				}
			}
		}
	}
}

// send calls the hook, trying again after a network error, a 5xx or a
// 429, with a growing wait, up to the hook's retries.
func (n *notifier) send(m message) {
	body, err := notifyBody(m.hook.Format, m.hook.Name, m.run)
	if err != nil {
		n.log.Error("notification not built", "notify", m.hook.Name, "job", m.run.Job, "error", err)
		return
	}
	key := runKey(m.run)
	log := n.log.With("notify", m.hook.Name, "job", m.run.Job, "tick", m.run.Tick.UTC().Format(time.RFC3339Nano), "outcome", m.run.Outcome)
	if m.run.Trigger > 0 {
		log = log.With("trigger", m.run.Trigger)
	}
	wait := n.backoff
	var why string
	for try := 0; try <= m.hook.Retries; try++ {
		if try > 0 {
			select {
			case <-time.After(wait):
			case <-n.ctx.Done():
				log.Warn("notification not sent: the daemon stopped", "tries", try, "last", why)
				return
			}
			wait = min(2*wait, notifyMaxBackoff)
		}
		status, err := n.post(m.hook, key, body)
		switch {
		case err == nil && status >= 200 && status < 300:
			log.Debug("notification sent", "status", status, "tries", try+1)
			return
		case err != nil:
			why = n.redact(err.Error())
		default:
			why = fmt.Sprintf("HTTP %d", status)
			if status != http.StatusTooManyRequests && status < 500 {
				log.Warn("notification refused", "status", status, "tries", try+1)
				return // another try would get the same answer
			}
		}
	}
	log.Warn("notification not sent", "tries", m.hook.Retries+1, "last", why)
}

// post sends body to the hook's URL once, bounded by its timeout, with
// key as its Idempotency-Key. Its error never holds the URL.
func (n *notifier) post(h *hook, key string, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(n.ctx, h.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL.Value(), bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("the URL does not make a request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", n.agent)
	req.Header.Set("Idempotency-Key", key)
	resp, err := n.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// NotificationJSON is the body of a notify block with format "json": the
// run as the history has it (without its id, which Redis gives the entry
// as it is appended: a run is its job, tick and trigger), the block's
// name, a one-line summary, and the run's key, also sent as the
// Idempotency-Key header. A manual run's parameters go by name only
// (ParamNames; Run.Params is left out): their values may be what a
// receiver should not see, and the history keeps them.
type NotificationJSON struct {
	Notify         string `json:"notify"`
	Summary        string `json:"summary"`
	IdempotencyKey string `json:"idempotency_key"`
	scheduler.Run
	ParamNames []string `json:"param_names,omitempty"`
}

// runKey is the idempotency key of the notifications of r: 32 hex digits
// of the SHA-256 of the job, tick, trigger, fencing token and outcome,
// which together tell one recorded run from every other (a tick run again
// after a lost lock or a handoff has a new token). Every try of every
// notify block sends the same key for the run.
func runKey(r scheduler.Run) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d\x00%s", r.Job, r.Tick.UnixNano(), r.Trigger, r.Token, r.Outcome))
	return hex.EncodeToString(sum[:16])
}

// notifyBody is the request body of a notification of r.
func notifyBody(format, name string, r scheduler.Run) ([]byte, error) {
	if format == config.NotifySlack {
		text := summary(r, true)
		// An auto_paused run's Error is the pause's note, which the
		// summary says already.
		if r.Error != "" && r.Outcome != scheduler.OutcomeAutoPaused {
			tail := r.Error
			if rs := []rune(tail); len(rs) > slackTail {
				tail = "…" + string(rs[len(rs)-slackTail:])
			}
			text += "\n```" + slackEscape(tail) + "```"
		}
		return json.Marshal(map[string]string{"text": text})
	}
	names := slices.Sorted(maps.Keys(r.Params))
	r.Params = nil // names only
	return json.Marshal(NotificationJSON{Notify: name, Summary: summary(r, false), IdempotencyKey: runKey(r), Run: r, ParamNames: names})
}

// summary says what happened to the run in a line: "lockcron: job backup
// failed on web-1 (tick 2026-11-24T02:00:00Z, attempt 2, 1.2s)". For
// Slack, the job is bold and the text escaped.
func summary(r scheduler.Run, slack bool) string {
	job := r.Job
	if slack {
		job = "*" + slackEscape(job) + "*"
	}
	what := map[scheduler.Outcome]string{
		scheduler.OutcomeRan:            "ran",
		scheduler.OutcomeFailed:         "failed",
		scheduler.OutcomeLostLock:       "lost its lock while it ran",
		scheduler.OutcomeInterrupted:    "was interrupted",
		scheduler.OutcomeHandedOff:      "was handed off by its stopping replica",
		scheduler.OutcomeError:          "could not run (the lock store did not answer)",
		scheduler.OutcomeDeadlineMissed: "missed its start_deadline and was not run",
		scheduler.OutcomeRunningLong:    "is still running, past its alert_after,",
		scheduler.OutcomeReplaced:       "was ended by a later tick (overlap replace)",
	}[r.Outcome]
	tick := r.Tick.UTC().Format(time.RFC3339)
	if r.Trigger > 0 {
		tick = fmt.Sprintf("manual run #%d", r.Trigger)
	}
	if r.Outcome == scheduler.OutcomeMissed {
		return fmt.Sprintf("lockcron: job %s missed %d tick(s), up to %s, while no replica ran it", job, max(r.Missed, 1), tick)
	}
	if r.Outcome == scheduler.OutcomeAutoPaused {
		// Error is the pause's note: "paused after 3 failed runs in a row".
		note, replica := r.Error, r.Replica
		if slack {
			note, replica = slackEscape(note), slackEscape(replica)
		}
		return fmt.Sprintf("lockcron: job %s paused itself on every replica, %s (the last failed on %s, %s); resume it to run it again", job, note, replica, tick)
	}
	if what == "" {
		what = string(r.Outcome)
	}
	s := fmt.Sprintf("lockcron: job %s %s on %s (%s, attempt %d, %s)", job, what, r.Replica, tick, r.Attempt, r.Duration.Round(time.Millisecond))
	if slack {
		s = strings.Replace(s, " on "+r.Replica, " on "+slackEscape(r.Replica), 1)
	}
	return s
}

// slackEscape escapes the three characters Slack's text markup reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
