package config

import (
	"cmp"
	_ "time/tzdata" // time zones by name, also on machines without zoneinfo

	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// dur reads the duration at path, written as a string ("30s", "1m30s"),
// which must be positive and at least least (why says why); def if it is
// not set or not valid.
func (d *decoder) dur(def time.Duration, s string, least time.Duration, why string, path ...string) time.Duration {
	if !d.set(path...) {
		return def
	}
	v, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		d.errf(path, "%q is not a duration (write it as \"500ms\", \"30s\", \"5m\" or \"1h30m\")", s)
	case v < 0:
		d.errf(path, "%q is negative: must be positive", s)
	case v == 0:
		d.errf(path, "%q is zero: must be positive (leave it out for the default)", s)
	case v < least:
		d.errf(path, "%v is too short: at least %v, %s", v, least, why)
	default:
		return v
	}
	return def
}

// str reads the string at path, which must not be empty and which bad
// (saying what is wrong with it, or "") must accept; def if it is not set
// or not valid.
func (d *decoder) str(def, s string, bad func(string) string, path ...string) string {
	if !d.set(path...) {
		return def
	}
	msg := bad(s)
	if strings.TrimSpace(s) == "" {
		msg = "empty: leave it out for the default"
	}
	if msg != "" {
		d.errf(path, "%s", msg)
		return def
	}
	return s
}

// oneOf reads the string at path, which must be one of choices; "" if
// it is not set or not valid.
func (d *decoder) oneOf(s string, path []string, choices ...string) string {
	if !d.set(path...) {
		return ""
	}
	if l := strings.ToLower(strings.TrimSpace(s)); slices.Contains(choices, l) {
		return l
	}
	d.errf(path, "%q is not one of %s", s, quoteAll(choices))
	return ""
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// decode turns the file, with the environment over it, into a Config.
func (d *decoder) decode() *Config {
	cfg := defaults()
	r := &d.raw
	cfg.ReplicaID = d.str(cfg.ReplicaID, r.ReplicaID, func(s string) string {
		if strings.ContainsFunc(s, unicode.IsControl) {
			return fmt.Sprintf("%q has control characters", s)
		}
		return ""
	}, "replica_id")
	cfg.ShutdownTimeout = d.dur(cfg.ShutdownTimeout, r.ShutdownTimeout, 0, "", "shutdown_timeout")
	cfg.Watch = r.Watch
	if f := r.Fleet; f != nil {
		if f.Ranking != nil {
			cfg.Fleet.Ranking = *f.Ranking
		}
		cfg.Fleet.ClaimFallback = d.dur(cfg.Fleet.ClaimFallback, f.ClaimFallback, 0, "", "fleet", "claim_fallback")
		cfg.Fleet.MemberTTL = d.dur(cfg.Fleet.MemberTTL, f.MemberTTL, 30*time.Millisecond, "since a replica heartbeats every third of it", "fleet", "member_ttl")
	}
	if r.Redis != nil {
		cfg.Redis = d.decodeRedis(r.Redis)
	}
	leaseOK := true
	if l := r.Lock; l != nil {
		leaseOK = d.decodeLock(l, cfg)
	}
	if a := r.Admin; a != nil {
		d.decodeAdmin(a, cfg)
	}
	if t := r.Telemetry; t != nil {
		d.decodeTelemetry(t, cfg)
	}
	if l := r.Log; l != nil {
		cfg.Log.Level = cmp.Or(d.oneOf(l.Level, []string{"log", "level"}, "trace", "debug", "info", "warn", "error"), cfg.Log.Level)
		cfg.Log.JSON = l.JSON
	}
	if h := r.History; h != nil {
		cfg.History.Keep, cfg.History.MaxAge = d.retention(h.Keep, h.MaxAge, []string{"history", "keep"}, []string{"history", "max_age"})
	}
	if a := r.Audit; a != nil {
		d.decodeAudit(a, cfg)
	}
	if leaseOK {
		d.checkLease(cfg)
	}
	d.decodeJobs(cfg)
	d.decodeNotify(cfg)
	d.checkFileMode()
	return cfg
}

// retention reads a run history's retention: a count of entries (at least
// 1) and an age (at least a second); 0 for one left out.
func (d *decoder) retention(keep int, age string, keepPath, agePath []string) (int, time.Duration) {
	if d.set(keepPath...) && keep < 1 {
		d.errf(keepPath, "%d: the history keeps at least 1 run (leave it out for the default, %d)", keep, scheduler.DefaultHistoryKeep)
		keep = 0
	}
	return keep, d.dur(0, age, time.Second, fmt.Sprintf("the history keeps runs at least 1s (leave it out for the default, %v)", scheduler.DefaultHistoryMaxAge), agePath...)
}

// decodeAudit reads the audit block: a count of entries (at least 1) and
// an age (at least a second).
func (d *decoder) decodeAudit(a *historyBlock, cfg *Config) {
	if d.set("audit", "keep") {
		if a.Keep < 1 {
			d.errf([]string{"audit", "keep"}, "%d: the audit trail keeps at least 1 entry (leave it out for the default, %d)", a.Keep, DefaultAuditKeep)
		} else {
			cfg.Audit.Keep = a.Keep
		}
	}
	cfg.Audit.MaxAge = d.dur(cfg.Audit.MaxAge, a.MaxAge, time.Second, fmt.Sprintf("the audit trail keeps entries at least 1s (leave it out for the default, %v)", DefaultAuditMaxAge), "audit", "max_age")
}

func (d *decoder) decodeRedis(r *redisBlock) *Redis {
	out := &Redis{KeyPrefix: DefaultKeyPrefix, Timeout: DefaultRedisTimeout, ConnectTimeout: DefaultConnectTimeout}
	p := func(key string) []string { return []string{"redis", key} }
	useURL, useAddrs, useMaster := d.set(p("url")...), d.set(p("addrs")...), d.set(p("master_name")...)
	urlEnv, addrsEnv, masterEnv := d.env[pathKey(p("url")...)], d.env[pathKey(p("addrs")...)], d.env[pathKey(p("master_name")...)]
	// An address from the environment replaces the file's other form.
	if useURL && urlEnv != "" && (useAddrs && addrsEnv == "" || useMaster && masterEnv == "") {
		d.warnf(p("addrs"), "%s replaces the file's redis.addrs and redis.master_name", urlEnv)
		useAddrs, useMaster = false, false
	} else if useAddrs && addrsEnv != "" && useURL && urlEnv == "" {
		d.warnf(p("url"), "%s replaces the file's redis.url", addrsEnv)
		useURL = false
	}
	switch {
	case useURL && useAddrs:
		d.errf(p("url"), "url and addrs are both set: give url for one server, or addrs (with master_name for Sentinel)")
		useURL, useAddrs = false, false
	case !useURL && !useAddrs:
		d.errf([]string{"redis"}, "needs url or addrs (or leave the redis block out for the in-memory backend)")
	}
	if useURL {
		d.addSecretURL(r.URL)
		if d.inFile(p("url")...) && urlPassword(r.URL) != "" {
			d.fileSecrets = append(d.fileSecrets, p("url"))
		}
		if msg := checkRedisURL(r.URL); msg != "" {
			d.errf(p("url"), "%s", msg)
		} else {
			out.URL = NewSecret(r.URL)
		}
	}
	if useAddrs {
		if len(r.Addrs) == 0 {
			d.errf(p("addrs"), "empty: give one host:port, several Cluster nodes, or the Sentinels with master_name")
		}
		nerrs := len(d.errs)
		for _, a := range r.Addrs {
			if msg := checkHostPort(a, false); msg != "" {
				d.errf(p("addrs"), "%s", msg)
			}
		}
		if len(d.errs) == nerrs {
			out.Addrs = r.Addrs
		}
	}
	if useMaster {
		switch {
		case !useAddrs:
			d.errf(p("master_name"), "needs addrs, the Sentinels' host:port addresses (a url names one server)")
		case strings.TrimSpace(r.MasterName) == "":
			d.errf(p("master_name"), "empty")
		default:
			out.MasterName = r.MasterName
		}
	}
	out.Username = r.Username
	pw, pwEnv := d.secret(r.Password, p("password"), r.PasswordEnv, p("password_env"), false)
	out.Password, out.PasswordEnv = NewSecret(pw), pwEnv
	if d.set(p("db")...) {
		switch v := r.DB; {
		case v < 0:
			d.errf(p("db"), "%d is negative", v)
		case v != 0 && len(out.Addrs) > 1 && out.MasterName == "":
			d.errf(p("db"), "Redis Cluster has only database 0, not %d", v)
		default:
			out.DB, out.dbSet = v, true
		}
	}
	out.KeyPrefix = d.str(out.KeyPrefix, r.KeyPrefix, func(s string) string {
		if strings.ContainsAny(s, "{}") {
			return fmt.Sprintf("%q has a brace, which would break the keys' hash tags", s)
		}
		return ""
	}, p("key_prefix")...)
	out.Timeout = d.dur(out.Timeout, r.Timeout, 0, "", p("timeout")...)
	out.ConnectTimeout = d.dur(out.ConnectTimeout, r.ConnectTimeout, 0, "", p("connect_timeout")...)
	if t := r.TLS; t != nil {
		out.TLS = d.decodeTLS(t)
	}
	return out
}

func (d *decoder) decodeTLS(t *tlsBlock) *TLS {
	p := func(key string) []string { return []string{"redis", "tls", key} }
	tl := &TLS{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile, ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify}
	switch {
	case tl.CertFile != "" && tl.KeyFile == "":
		d.errf(p("cert_file"), "needs key_file: a client certificate goes with its key")
	case tl.KeyFile != "" && tl.CertFile == "":
		d.errf(p("key_file"), "needs cert_file: a client key goes with its certificate")
	}
	if t.Enabled != nil && !*t.Enabled { // a tls block turns TLS on, unless it says enabled = false
		if *tl != (TLS{}) {
			d.warnf(p("enabled"), "false: the other tls settings are ignored")
		}
		return nil
	}
	if tl.InsecureSkipVerify {
		d.warnf(p("insecure_skip_verify"), "the server's certificate is not checked: anyone on the path can read and change the traffic, passwords included")
	}
	return tl
}

// secret reads a secret given at valuePath (in the file or the
// environment) or in the environment variable named at envPath, one of
// them, and returns it with the variable's name if it came from one. An
// unset variable is an error, or a warning if notNeeded and the command
// only reads (ForReading).
func (d *decoder) secret(value string, valuePath []string, envName string, envPath []string, notNeeded bool) (v, from string) {
	switch byValue, byEnv := d.set(valuePath...), d.set(envPath...); {
	case byValue && byEnv:
		d.errf(envPath, "%s and %s are both set: give one", valuePath[len(valuePath)-1], envPath[len(envPath)-1])
	case byValue:
		if d.inFile(valuePath...) && value != "" {
			d.fileSecrets = append(d.fileSecrets, valuePath)
		}
		v = value
	case byEnv:
		v = d.lookupEnv(envName)
		switch {
		case v != "":
			from = envName
		case notNeeded && d.o.readOnly:
			d.warnf(envPath, "the environment variable %q is not set, or empty: this command does not need it, but run does", envName)
		default:
			d.errf(envPath, "the environment variable %q is not set, or empty", envName)
		}
	}
	if v != "" {
		d.secrets = append(d.secrets, v)
	}
	return v, from
}

// checkRedisURL returns what is wrong with a Redis URL, or "". It never
// quotes the URL whole: it may hold a password.
func checkRedisURL(u string) string {
	pu, err := url.Parse(u)
	if err != nil {
		why := ""
		var ue *url.Error
		var ee url.EscapeError
		if errors.As(err, &ue) && !errors.As(err, &ee) {
			// The inner error names a port or a character, not the URL;
			// an escape error would quote part of the password.
			why = ": " + ue.Err.Error()
		}
		return "not a valid URL" + why + " (the URL is not shown: it may hold a password)"
	}
	switch pu.Scheme {
	case "redis", "rediss":
		if pu.Host == "" {
			return fmt.Sprintf("%q has no host", pu.Redacted())
		}
		if p := pu.Port(); p != "" {
			if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
				return fmt.Sprintf("%q: port %q is not a number in 1..65535", pu.Redacted(), p)
			}
		}
	case "unix":
	default:
		return fmt.Sprintf("%q: scheme %q is not redis, rediss or unix", pu.Redacted(), pu.Scheme)
	}
	if _, err := redis.ParseURL(u); err != nil {
		return fmt.Sprintf("%q: %v", pu.Redacted(), err)
	}
	return ""
}

// urlPassword returns the password in a URL's userinfo, or "".
func urlPassword(u string) string {
	pu, err := url.Parse(u)
	if err != nil || pu.User == nil {
		return ""
	}
	p, _ := pu.User.Password()
	return p
}

// addSecretURL remembers a URL and its password for scrubbing.
func (d *decoder) addSecretURL(u string) {
	d.secrets = append(d.secrets, u)
	if p := urlPassword(u); p != "" {
		d.secrets = append(d.secrets, p, url.QueryEscape(p), url.PathEscape(p))
	}
	if pu, err := url.Parse(u); err != nil || pu.User != nil {
		// Also the userinfo as written, before unescaping.
		if at := strings.LastIndex(u, "@"); at > 0 {
			if i := strings.Index(u, "://"); i >= 0 && i+3 < at {
				d.secrets = append(d.secrets, u[i+3:at])
			}
		}
	}
}

// checkHostPort returns what is wrong with a host:port, or "". An empty
// host is allowed only for a listener.
func checkHostPort(a string, listener bool) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Sprintf("%q is not host:port", a)
	}
	if host == "" && !listener {
		return fmt.Sprintf("%q has no host", a)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || n == 0 && !listener {
		return fmt.Sprintf("%q: port %q is not a number in 1..65535", a, port)
	}
	return ""
}

// decodeLock decodes the lock block; false if its lease is not valid.
func (d *decoder) decodeLock(l *lockBlock, cfg *Config) bool {
	nerrs := len(d.errs)
	cfg.Lock.Lease = d.dur(cfg.Lock.Lease, l.Lease, MinLease, "since the watchdog renews every lease/3 and needs several round trips of margin", "lock", "lease")
	leaseOK := len(d.errs) == nerrs
	cfg.Lock.WaiterTTL = d.dur(cfg.Lock.WaiterTTL, l.WaiterTTL, lock.MinLeaseTime, "since a waiter renews its place every third of it", "lock", "waiter_ttl")
	if a := l.ReplicaAck; a != nil {
		ack := &ReplicaAck{Replicas: DefaultAckReplicas, Timeout: DefaultAckTimeout}
		if set := d.set("lock", "replica_ack", "replicas"); set && a.Replicas < 1 {
			d.errf([]string{"lock", "replica_ack", "replicas"}, "%d: must be at least 1 (leave replica_ack out to wait for none)", a.Replicas)
		} else if set {
			ack.Replicas = a.Replicas
		}
		ack.Timeout = d.dur(ack.Timeout, a.Timeout, 0, "", "lock", "replica_ack", "timeout")
		cfg.Lock.ReplicaAck = ack
	}
	return leaseOK
}

// checkLease checks the lock settings against Redis's: a renewal that
// hangs for the whole command timeout (plus the replicas' acknowledgement)
// must end before lease/2, so that the next one, sent at the latest lease/3
// after it, still succeeds before the lease counts as lost at 9/10 of it.
func (d *decoder) checkLease(cfg *Config) {
	if cfg.Redis == nil {
		if cfg.Lock.ReplicaAck != nil {
			d.errf([]string{"lock", "replica_ack"}, "needs redis: the in-memory backend has no replicas")
		}
		return
	}
	limit := cfg.Lock.Lease / 2
	budget := cfg.Redis.Timeout
	what := fmt.Sprintf("redis.timeout (%v)", cfg.Redis.Timeout)
	if a := cfg.Lock.ReplicaAck; a != nil {
		budget += a.Timeout
		what = fmt.Sprintf("redis.timeout (%v) plus lock.replica_ack.timeout (%v)", cfg.Redis.Timeout, a.Timeout)
	}
	if budget < limit {
		return
	}
	path := []string{"lock", "lease"}
	if !d.set(path...) {
		path = []string{"redis", "timeout"}
	}
	d.errf(path, "%s must be shorter than half the lease of %v (%v): a renewal that hangs that long must leave time for another before the lease counts as lost at 9/10 of it; raise lock.lease or lower redis.timeout",
		what, cfg.Lock.Lease, limit.Round(time.Millisecond))
}

func (d *decoder) decodeAdmin(a *adminBlock, cfg *Config) {
	p := func(key ...string) []string { return append([]string{"admin"}, key...) }
	cfg.Admin.Listen = d.str(cfg.Admin.Listen, a.Listen, func(s string) string { return checkHostPort(s, true) }, p("listen")...)
	tok, tokEnv := d.secret(a.Token, p("token"), a.TokenEnv, p("token_env"), true)
	cfg.Admin.Token, cfg.Admin.TokenEnv = NewSecret(tok), tokEnv
	// Where each token is, by name and by value, for the errors about a
	// second one.
	byName := make(map[string]Pos)
	byValue := make(map[string]string)
	if tok != "" {
		at := p("token")
		if tokEnv != "" {
			at = p("token_env")
		}
		t := Token{Name: LegacyTokenName, Scope: ScopeAdmin, Value: cfg.Admin.Token, ValueEnv: tokEnv, Pos: d.posOf(at)}
		cfg.Admin.Tokens = append(cfg.Admin.Tokens, t)
		byName[t.Name], byValue[tok] = t.Pos, where(t)
	}
	for _, b := range a.Tokens {
		if t, ok := d.decodeToken(b, byName, byValue); ok {
			cfg.Admin.Tokens = append(cfg.Admin.Tokens, t)
		}
	}
	cfg.Admin.PublicRead = a.PublicRead
	anyToken := len(a.Tokens) > 0 || d.set(p("token")...) || d.set(p("token_env")...)
	if cfg.Admin.PublicRead && !anyToken {
		d.warnf(p("public_read"), "true, but there is no token: without one, reads are open anyway")
	}
	if !isLoopback(cfg.Admin.Listen) && !anyToken && d.set(p("listen")...) {
		d.warnf(p("listen"), "%q is reachable from other machines, and there is no admin token: anyone who reaches it can read the jobs, their run history, the locks and the audit trail (who did what, from where, with what note: the JSON API and the status page), and anyone on this machine can trigger, pause and resume jobs, freeze and unfreeze them, backfill them and cancel a backfill (cancel-backfill), and reload the config; add a token block, or set token_env", cfg.Admin.Listen)
	}
}

// decodeToken decodes a token "name" { scope, value_env } block; false if
// it is not valid. byName and byValue hold the tokens before it (where
// each is); it adds its own.
func (d *decoder) decodeToken(b tokenBlock, byName map[string]Pos, byValue map[string]string) (Token, bool) {
	tp := func(key ...string) []string { return append([]string{"admin", "token", b.Name}, key...) }
	t := Token{Name: b.Name, Pos: posOf(b.At)}
	switch first, dup := byName[b.Name]; {
	case strings.TrimSpace(b.Name) == "" || strings.ContainsFunc(b.Name, unicode.IsControl):
		d.errf(tp(), "%q is not a name: give each token a plain name (it names the token in logs, never its value)", b.Name)
		return t, false
	case dup:
		d.errAt(b.At, tp(), "a token %q is at line %d already: give each token its own name", b.Name, first.Line)
		return t, false
	}
	byName[b.Name] = t.Pos
	nerrs := len(d.errs)
	if !d.set(tp("scope")...) {
		d.errf(tp(), "missing scope: give scope = %s", quoteAll(scopeNames[ScopeRead:]))
	} else if s := d.oneOf(b.Scope, tp("scope"), scopeNames[ScopeRead:]...); s != "" {
		t.Scope = Scope(slices.Index(scopeNames, s))
	}
	switch {
	case !d.set(tp("value_env")...):
		d.errf(tp(), "missing value_env: give the name of the environment variable that holds the token")
	case strings.TrimSpace(b.ValueEnv) == "":
		d.errf(tp("value_env"), "empty: give the name of the environment variable that holds the token")
	default:
		v, from := d.secret("", tp("value"), b.ValueEnv, tp("value_env"), true)
		if prev, dup := byValue[v]; dup && v != "" {
			d.errf(tp("value_env"), "%q holds the same token as %s: give each token its own value, so that a call tells which token made it", b.ValueEnv, prev)
			return t, false
		}
		t.Value, t.ValueEnv = NewSecret(v), from
		if v != "" {
			byValue[v] = where(t)
		}
	}
	return t, len(d.errs) == nerrs && t.Value.IsSet()
}

// where names a token and its place, for an error about another.
func where(t Token) string {
	name := fmt.Sprintf("token %q", t.Name)
	if t.Name == LegacyTokenName {
		name = LegacyTokenName
	}
	if t.Pos.IsValid() {
		return fmt.Sprintf("%s (line %d)", name, t.Pos.Line)
	}
	return name
}

func (d *decoder) decodeTelemetry(t *Telemetry, cfg *Config) {
	p := func(key string) []string { return []string{"telemetry", key} }
	if v := d.oneOf(t.Traces, p("traces"), TracesNone, TracesStdout, TracesOTLP); v != "" {
		cfg.Telemetry.Traces, cfg.Telemetry.TracesNamed = v, true
	}
	if v := d.oneOf(t.Metrics, p("metrics"), MetricsPrometheus, MetricsOTLP, MetricsNone); v != "" {
		cfg.Telemetry.Metrics, cfg.Telemetry.MetricsNamed = v, true
	}
	hasEP := d.set(p("otlp_endpoint")...)
	cfg.Telemetry.OTLPEndpoint = d.str("", t.OTLPEndpoint, checkEndpoint, p("otlp_endpoint")...)
	usesOTLP := cfg.Telemetry.Traces == TracesOTLP || cfg.Telemetry.Metrics == MetricsOTLP
	switch {
	case usesOTLP && !hasEP:
		key := "traces"
		if cfg.Telemetry.Traces != TracesOTLP {
			key = "metrics"
		}
		d.errf(p(key), "%q needs otlp_endpoint (host:port, or an http(s) URL)", TracesOTLP)
	case !usesOTLP && hasEP:
		d.warnf(p("otlp_endpoint"), "set, but neither traces nor metrics is \"otlp\": it is not used")
	}
}

// checkEndpoint returns what is wrong with an OTLP endpoint, or "".
func checkEndpoint(ep string) string {
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		switch {
		case err != nil:
			return "not a valid URL"
		case u.Scheme != "http" && u.Scheme != "https":
			return fmt.Sprintf("%q: scheme %q is not http or https", u.Redacted(), u.Scheme)
		case u.Host == "":
			return fmt.Sprintf("%q has no host", u.Redacted())
		}
		return ""
	}
	return checkHostPort(ep, false)
}

// checkFileMode warns about secrets written in a file that other users can
// read.
func (d *decoder) checkFileMode() {
	if d.mode&0o044 == 0 {
		return
	}
	hints := map[string]string{"redis": ", or give the password in password_env", "admin": ", or give the token in token_env", "notify": ", or give it in url_env"}
	for _, path := range d.fileSecrets {
		d.warnf(path, "a secret in a file that other users can read (mode %04o): chmod 600 the file%s", d.mode, hints[path[0]])
	}
}
