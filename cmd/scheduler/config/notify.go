package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

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
// none: the runs an operator must look at.
var DefaultNotifyOn = []string{string(scheduler.OutcomeFailed), string(scheduler.OutcomeLostLock), string(scheduler.OutcomeMissed)}

// notifyOutcomes are the outcomes a run in the history can have, so those
// a notify block may name.
var notifyOutcomes = []string{
	string(scheduler.OutcomeRan), string(scheduler.OutcomeFailed), string(scheduler.OutcomeLostLock), string(scheduler.OutcomeMissed),
	string(scheduler.OutcomeInterrupted), string(scheduler.OutcomeHandedOff), string(scheduler.OutcomeError),
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
func (d *decoder) decodeNotify(raw any, cfg *Config) {
	bodies := make(map[string]map[string]any)
	for _, e := range jobEntries(raw) {
		// A second block of a name is an error (walkNamed): the first is
		// the one decoded.
		if m, ok := e.body.(map[string]any); ok && bodies[e.name] == nil {
			bodies[e.name] = m
		}
	}
	for _, item := range d.w.named["notify"] {
		m := bodies[item.name]
		if m == nil {
			m = map[string]any{}
		}
		o := obj{d: d, m: m, path: []string{"notify", item.name}}
		n := Notify{Name: item.name, Pos: item.pos, Format: NotifyJSON, On: slices.Clone(DefaultNotifyOn),
			Timeout: DefaultNotifyTimeout, Retries: DefaultNotifyRetries}
		ok := d.decodeNotifyURL(o, &n)
		if v, ok := o.oneOf("format", NotifyJSON, NotifySlack); ok {
			n.Format = v
		}
		if v, ok2 := o.strs("on"); ok2 {
			for _, out := range v {
				if !slices.Contains(notifyOutcomes, out) {
					o.errf("on", "%q is not an outcome a run can have: use %s", out, quoteAll(notifyOutcomes))
					ok = false
				}
			}
			if len(v) == 0 {
				o.errf("on", "empty: leave it out for the default, %s", quoteAll(DefaultNotifyOn))
				ok = false
			}
			n.On = v
		}
		if v, ok2 := o.strs("jobs"); ok2 {
			for _, j := range v {
				if !slices.ContainsFunc(cfg.Jobs, func(x Job) bool { return x.Name == j }) {
					o.errf("jobs", "%q is not a job of this file", j)
					ok = false
				}
			}
			n.Jobs = v
		}
		if v, ok2 := o.dur("timeout"); ok2 {
			n.Timeout = v
		}
		if v, ok2 := o.int("retries"); ok2 {
			if v < 0 || v > MaxNotifyRetries {
				o.errf("retries", "%d: give 0 to %d", v, MaxNotifyRetries)
				ok = false
			} else {
				n.Retries = v
			}
		}
		if ok {
			cfg.Notify = append(cfg.Notify, n)
		}
	}
}

// decodeNotifyURL reads url or url_env (exactly one) into n; false if the
// block cannot be used. Its messages never quote the URL.
func (d *decoder) decodeNotifyURL(o obj, n *Notify) bool {
	u, fromFile := o.secret("url")
	name, fromEnv := o.str("url_env")
	switch {
	case fromFile && fromEnv:
		o.errf("url_env", "url and url_env are both set: give one")
		return false
	case !fromFile && !fromEnv:
		if !o.has("url") && !o.has("url_env") {
			o.missing("url", "give the webhook's URL in url, or the name of the environment variable that holds it in url_env")
		}
		return false
	case fromEnv:
		u = d.lookupEnv(name)
		if u == "" {
			if d.o.readOnly {
				o.warnf("url_env", "the environment variable %q is not set, or empty: this command does not need it, but run does", name)
			} else {
				o.errf("url_env", "the environment variable %q is not set, or empty", name)
			}
			return false
		}
		n.URLEnv = name
	}
	d.secrets = append(d.secrets, u)
	if p := urlPassword(u); p != "" {
		d.secrets = append(d.secrets, p)
	}
	key := "url"
	if fromEnv {
		key = "url_env"
	} else if d.inFile(o.full("url")...) {
		d.fileSecrets = append(d.fileSecrets, o.full("url"))
	}
	pu, err := url.Parse(u)
	switch {
	case err != nil:
		o.errf(key, "not a valid URL (the URL is not shown: it may hold a token)")
		return false
	case pu.Scheme != "http" && pu.Scheme != "https":
		o.errf(key, "scheme %q: the webhook must be an http or https URL", pu.Scheme)
		return false
	case pu.Host == "":
		o.errf(key, "the URL has no host")
		return false
	}
	n.URL = NewSecret(u)
	return true
}

// notifyEnv are the variables the notify blocks read their URLs from.
func (c *Config) notifyEnv() []string {
	var out []string
	for _, n := range c.Notify {
		if n.URLEnv != "" {
			out = append(out, n.URLEnv)
		}
	}
	return out
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
