package config

import (
	"cmp"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/lockcron/lockcron/scheduler"
)

// Notification formats.
const (
	NotifyJSON  = "json"  // the run as a JSON object
	NotifySlack = "slack" // {"text": "..."}: Slack's incoming webhooks, and the many that take the same
)

// Defaults of a notify block.
const (
	DefaultNotifyTimeout = 5 * time.Second
	DefaultNotifyRetries = 3
	// MaxNotifyRetries bounds retries: with their backoff (1s, 2s, 4s, ...
	// up to 30s), a notification is given up within a few minutes.
	MaxNotifyRetries = 10
)

// DefaultNotifyOn are the outcomes a notify block reports when it names
// none: the runs an operator must look at, and the events running_long
// and auto_paused (a job that paused itself runs no more until an
// operator resumes it: whoever hears of its failures must hear of that).
var DefaultNotifyOn = []string{string(scheduler.OutcomeFailed), string(scheduler.OutcomeLostLock), string(scheduler.OutcomeMissed),
	string(scheduler.OutcomeDeadlineMissed), string(scheduler.OutcomeRunningLong), string(scheduler.OutcomeAutoPaused)}

// notifyOutcomes are the outcomes of the runs in the history, and the
// events running_long and auto_paused: those a notify block may name. Not
// the skipped ticks' skipped_busy, paused and excluded, which would send a
// webhook per tick (a weekend calendar: one a minute); the history
// coalesces those.
var notifyOutcomes = []string{
	string(scheduler.OutcomeRan), string(scheduler.OutcomeFailed), string(scheduler.OutcomeLostLock), string(scheduler.OutcomeMissed),
	string(scheduler.OutcomeInterrupted), string(scheduler.OutcomeHandedOff), string(scheduler.OutcomeError),
	string(scheduler.OutcomeDeadlineMissed), string(scheduler.OutcomeRunningLong), string(scheduler.OutcomeAutoPaused),
	string(scheduler.OutcomeReplaced),
}

// Notify is a notify "name" { ... } block: a webhook that the daemon calls
// for each run, once across the fleet (by the replica that recorded it in
// the run history), whose outcome is one of On and whose job is one of
// Jobs.
type Notify struct {
	Name string
	Pos  Pos
	// URL is the webhook, http or https. A Secret: the URLs of Slack and
	// its kin hold their token.
	URL Secret
	// URLEnv names the environment variable URL was read from, if it came
	// from url_env.
	URLEnv string
	// Format is NotifyJSON (the default) or NotifySlack.
	Format string
	// On are the outcomes notified; default DefaultNotifyOn.
	On []string
	// Jobs are the jobs notified; empty for every job.
	Jobs []string
	// Timeout bounds each attempt; default DefaultNotifyTimeout.
	Timeout time.Duration
	// Retries is how many times a failed call (a network error, a 5xx or a
	// 429) is tried again, after 1s, 2s, 4s...; default
	// DefaultNotifyRetries.
	Retries int
}

// decodeNotify decodes the notify blocks, after the jobs (which Jobs must
// name).
func (d *decoder) decodeNotify(cfg *Config) {
	seen := make(map[string]Pos)
	for _, b := range d.raw.Notify {
		np := func(key ...string) []string { return append([]string{"notify", b.Name}, key...) }
		switch first, dup := seen[b.Name]; {
		case b.Name == "" || strings.ContainsFunc(b.Name, unicode.IsControl):
			d.errf(np(), "%q is not a name: give each notify block a plain name", b.Name)
			continue
		case dup:
			d.errAt(b.At, np(), "a notify block %q is at line %d already: give each its own name", b.Name, first.Line)
			continue
		}
		seen[b.Name] = posOf(b.At)
		n := Notify{Name: b.Name, Pos: posOf(b.At), Format: NotifyJSON, On: slices.Clone(DefaultNotifyOn),
			Timeout: DefaultNotifyTimeout, Retries: DefaultNotifyRetries}
		nerrs := len(d.errs)
		d.decodeNotifyURL(&b, np, &n)
		n.Format = cmp.Or(d.oneOf(b.Format, np("format"), NotifyJSON, NotifySlack), n.Format)
		if d.set(np("on")...) {
			for _, out := range b.On {
				switch scheduler.Outcome(out) {
				case scheduler.OutcomeSkippedBusy, scheduler.OutcomePaused, scheduler.OutcomeExcluded:
					d.errf(np("on"), "%q is a skipped tick's outcome, which notify does not send (a webhook per tick; the history has them, coalesced): use %s", out, quoteAll(notifyOutcomes))
				default:
					if !slices.Contains(notifyOutcomes, out) {
						d.errf(np("on"), "%q is not an outcome a run can have: use %s", out, quoteAll(notifyOutcomes))
					}
				}
			}
			if len(b.On) == 0 {
				d.errf(np("on"), "empty: leave it out for the default, %s", quoteAll(DefaultNotifyOn))
			}
			n.On = b.On
		}
		for _, j := range b.Jobs {
			if !slices.ContainsFunc(cfg.Jobs, func(x Job) bool { return x.Name == j }) {
				d.errf(np("jobs"), "%q is not a job of this file", j)
			}
		}
		n.Jobs = b.Jobs
		n.Timeout = d.dur(n.Timeout, b.Timeout, 0, "", np("timeout")...)
		if set := d.set(np("retries")...); set && (b.Retries < 0 || b.Retries > MaxNotifyRetries) {
			d.errf(np("retries"), "%d: give 0 to %d", b.Retries, MaxNotifyRetries)
		} else if set {
			n.Retries = b.Retries
		}
		if len(d.errs) == nerrs && n.URL.IsSet() {
			cfg.Notify = append(cfg.Notify, n)
		}
	}
}

// decodeNotifyURL reads url or url_env (exactly one) into n. Its messages
// never quote the URL.
func (d *decoder) decodeNotifyURL(b *notifyBlock, np func(...string) []string, n *Notify) {
	if !d.set(np("url")...) && !d.set(np("url_env")...) {
		d.errf(np("url"), "missing: give the webhook's URL in url, or the name of the environment variable that holds it in url_env")
		return
	}
	nerrs := len(d.errs)
	u, from := d.secret(b.URL, np("url"), b.URLEnv, np("url_env"), true)
	if u == "" || len(d.errs) > nerrs {
		return
	}
	if p := urlPassword(u); p != "" {
		d.secrets = append(d.secrets, p)
	}
	key := np("url")
	if from != "" {
		key, n.URLEnv = np("url_env"), from
	}
	pu, err := url.Parse(u)
	switch {
	case err != nil:
		d.errf(key, "not a valid URL (the URL is not shown: it may hold a token)")
	case pu.Scheme != "http" && pu.Scheme != "https":
		d.errf(key, "scheme %q: the webhook must be an http or https URL", pu.Scheme)
	case pu.Host == "":
		d.errf(key, "the URL has no host")
	default:
		n.URL = NewSecret(u)
	}
}

// Describe is the block's name, format, the host it sends to and its
// outcomes: safe to log (the URL's path and query, which may hold a token,
// are left out).
func (n Notify) Describe() string {
	host := "?"
	if pu, err := url.Parse(n.URL.Value()); err == nil {
		host = pu.Host
	}
	return fmt.Sprintf("notify %q (%s to %s, on %s)", n.Name, n.Format, host, strings.Join(n.On, ", "))
}
