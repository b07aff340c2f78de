package config

import (
	_ "time/tzdata" // time zones by name, also on machines without zoneinfo

	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// decode turns the merged values into a Config.
func (d *decoder) decode(root map[string]any) *Config {
	cfg := defaults()
	top := obj{d: d, m: root}

	if s, ok := top.str("replica_id"); ok {
		switch {
		case strings.TrimSpace(s) == "":
			top.errf("replica_id", "empty: leave it out for the default (host name and process id)")
		case strings.ContainsFunc(s, unicode.IsControl):
			top.errf("replica_id", "%q has control characters", s)
		default:
			cfg.ReplicaID = s
		}
	}
	if v, ok := top.dur("shutdown_timeout"); ok {
		cfg.ShutdownTimeout = v
	}
	if v, ok := top.bool("watch"); ok {
		cfg.Watch = v
	}
	if f, ok := top.block("fleet"); ok {
		if v, ok := f.bool("ranking"); ok {
			cfg.Fleet.Ranking = v
		}
		if v, ok := f.dur("claim_fallback"); ok {
			cfg.Fleet.ClaimFallback = v
		}
		if v, ok := f.dur("member_ttl"); ok {
			if v < 30*time.Millisecond {
				f.errf("member_ttl", "%v is too short: at least 30ms (a replica heartbeats every third of it)", v)
			} else {
				cfg.Fleet.MemberTTL = v
			}
		}
	}
	if r, ok := top.block("redis"); ok {
		cfg.Redis = d.decodeRedis(r)
	}
	if l, ok := top.block("lock"); ok {
		d.decodeLock(l, cfg)
	}
	if a, ok := top.block("admin"); ok {
		d.decodeAdmin(a, cfg)
	}
	if t, ok := top.block("telemetry"); ok {
		d.decodeTelemetry(t, cfg)
	}
	if l, ok := top.block("log"); ok {
		if v, ok := l.oneOf("level", "trace", "debug", "info", "warn", "error"); ok {
			cfg.Log.Level = v
		}
		if v, ok := l.bool("json"); ok {
			cfg.Log.JSON = v
		}
	}
	if h, ok := top.block("history"); ok {
		cfg.History.Keep, cfg.History.MaxAge = decodeRetention(h, "keep", "max_age")
	}
	d.checkLease(cfg)
	d.decodeJobs(root["job"], cfg)
	d.decodeNotify(root["notify"], cfg)
	d.checkFileMode()
	return cfg
}

// decodeRetention reads a run history's retention: a count of entries
// (at least 1) and an age (at least a second); 0 for one left out.
func decodeRetention(o obj, keepKey, ageKey string) (keep int, maxAge time.Duration) {
	if v, ok := o.int(keepKey); ok {
		if v < 1 {
			o.errf(keepKey, "%d: the history keeps at least 1 run (leave it out for the default, %d)", v, scheduler.DefaultHistoryKeep)
		} else {
			keep = v
		}
	}
	if v, ok := o.dur(ageKey); ok {
		if v < time.Second {
			o.errf(ageKey, "%v: the history keeps runs at least 1s (leave it out for the default, %v)", v, scheduler.DefaultHistoryMaxAge)
		} else {
			maxAge = v
		}
	}
	return keep, maxAge
}

func (d *decoder) decodeRedis(r obj) *Redis {
	out := &Redis{KeyPrefix: DefaultKeyPrefix, Timeout: DefaultRedisTimeout, ConnectTimeout: DefaultConnectTimeout}
	hasURL, hasAddrs, hasMaster := r.has("url"), r.has("addrs"), r.has("master_name")
	_, urlEnv := r.env("url")
	_, addrsEnv := r.env("addrs")
	_, masterEnv := r.env("master_name")
	// An address from the environment replaces the file's other form.
	useURL, useAddrs := hasURL, hasAddrs
	if hasURL && urlEnv && (hasAddrs && !addrsEnv || hasMaster && !masterEnv) {
		name, _ := r.env("url")
		r.warnf("addrs", "%s replaces the file's redis.addrs and redis.master_name", name)
		useAddrs, hasMaster = false, false
	} else if hasAddrs && addrsEnv && hasURL && !urlEnv {
		name, _ := r.env("addrs")
		r.warnf("url", "%s replaces the file's redis.url", name)
		useURL = false
	}
	switch {
	case useURL && useAddrs:
		r.errf("url", "url and addrs are both set: give url for one server, or addrs (with master_name for Sentinel)")
		useURL, useAddrs = false, false
	case !useURL && !useAddrs:
		d.errAt(r.path, "", "redis", "needs url or addrs (or leave the redis block out for the in-memory backend)")
	}
	if useURL {
		if u, ok := r.secret("url"); ok {
			d.addSecretURL(u)
			if d.inFile("redis", "url") && urlPassword(u) != "" {
				d.fileSecrets = append(d.fileSecrets, []string{"redis", "url"})
			}
			if msg := checkRedisURL(u); msg != "" {
				r.errf("url", "%s", msg)
			} else {
				out.URL = NewSecret(u)
			}
		}
	}
	if useAddrs {
		if addrs, ok := r.strs("addrs"); ok {
			if len(addrs) == 0 {
				r.errf("addrs", "empty: give one host:port, several Cluster nodes, or the Sentinels with master_name")
			}
			good := true
			for _, a := range addrs {
				if msg := checkHostPort(a, false); msg != "" {
					r.errf("addrs", "%s", msg)
					good = false
				}
			}
			if good {
				out.Addrs = addrs
			}
		}
	}
	if hasMaster {
		if m, ok := r.str("master_name"); ok {
			switch {
			case !useAddrs:
				r.errf("master_name", "needs addrs, the Sentinels' host:port addresses (a url names one server)")
			case strings.TrimSpace(m) == "":
				r.errf("master_name", "empty")
			default:
				out.MasterName = m
			}
		}
	}
	if v, ok := r.str("username"); ok {
		out.Username = v
	}
	if v, ok := r.secret("password"); ok {
		d.secrets = append(d.secrets, v)
		out.Password = NewSecret(v)
		if d.inFile("redis", "password") && v != "" {
			d.fileSecrets = append(d.fileSecrets, []string{"redis", "password"})
		}
	}
	if name, ok := r.str("password_env"); ok {
		if r.has("password") {
			r.errf("password_env", "password and password_env are both set: give one")
		} else if v := d.lookupEnv(name); v == "" {
			r.errf("password_env", "the environment variable %q is not set, or empty", name)
		} else {
			d.secrets = append(d.secrets, v)
			out.Password, out.PasswordEnv = NewSecret(v), name
		}
	}
	if v, ok := r.int("db"); ok {
		switch {
		case v < 0:
			r.errf("db", "%d is negative", v)
		case v != 0 && len(out.Addrs) > 1 && out.MasterName == "":
			r.errf("db", "Redis Cluster has only database 0, not %d", v)
		default:
			out.DB, out.dbSet = v, true
		}
	}
	if v, ok := r.str("key_prefix"); ok {
		switch {
		case v == "":
			r.errf("key_prefix", "empty: leave it out for the default %q", DefaultKeyPrefix)
		case strings.ContainsAny(v, "{}"):
			r.errf("key_prefix", "%q has a brace, which would break the keys' hash tags", v)
		default:
			out.KeyPrefix = v
		}
	}
	if v, ok := r.dur("timeout"); ok {
		out.Timeout = v
	}
	if v, ok := r.dur("connect_timeout"); ok {
		out.ConnectTimeout = v
	}
	if t, ok := r.block("tls"); ok {
		out.TLS = d.decodeTLS(t)
	}
	return out
}

func (d *decoder) decodeTLS(t obj) *TLS {
	tl := &TLS{}
	enabled := true // a tls block turns TLS on, unless it says enabled = false
	if v, ok := t.bool("enabled"); ok {
		enabled = v
	}
	tl.CAFile, _ = t.str("ca_file")
	tl.CertFile, _ = t.str("cert_file")
	tl.KeyFile, _ = t.str("key_file")
	tl.ServerName, _ = t.str("server_name")
	tl.InsecureSkipVerify, _ = t.bool("insecure_skip_verify")
	switch {
	case tl.CertFile != "" && tl.KeyFile == "":
		t.errf("cert_file", "needs key_file: a client certificate goes with its key")
	case tl.KeyFile != "" && tl.CertFile == "":
		t.errf("key_file", "needs cert_file: a client key goes with its certificate")
	}
	if !enabled {
		if *tl != (TLS{}) {
			t.warnf("enabled", "false: the other tls settings are ignored")
		}
		return nil
	}
	if tl.InsecureSkipVerify {
		t.warnf("insecure_skip_verify", "the server's certificate is not checked: anyone on the path can read and change the traffic, passwords included")
	}
	return tl
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

func (d *decoder) decodeLock(l obj, cfg *Config) {
	d.leaseBad = l.has("lease")
	if v, ok := l.dur("lease"); ok {
		d.leaseBad = false
		if v < MinLease {
			d.leaseBad = true
			l.errf("lease", "%v is too short: at least %v, since the watchdog renews every lease/3 and needs several round trips of margin", v, MinLease)
		} else {
			cfg.Lock.Lease = v
		}
	}
	if v, ok := l.dur("waiter_ttl"); ok {
		if v < lock.MinLeaseTime {
			l.errf("waiter_ttl", "%v is too short: at least %v, since a waiter renews its place every third of it", v, lock.MinLeaseTime)
		} else {
			cfg.Lock.WaiterTTL = v
		}
	}
	if a, ok := l.block("replica_ack"); ok {
		ack := &ReplicaAck{Replicas: DefaultAckReplicas, Timeout: DefaultAckTimeout}
		if v, ok := a.int("replicas"); ok {
			if v < 1 {
				a.errf("replicas", "%d: must be at least 1 (leave replica_ack out to wait for none)", v)
			} else {
				ack.Replicas = v
			}
		}
		if v, ok := a.dur("timeout"); ok {
			ack.Timeout = v
		}
		cfg.Lock.ReplicaAck = ack
	}
}

// checkLease checks the lock settings against Redis's. Renewals are sent
// every lease/3, counted from when the last one was sent, and the lease
// counts as lost at 9/10 of it after the last successful renewal was sent.
// A renewal that hangs for the whole command timeout (plus the replicas'
// acknowledgement) must therefore end before lease/2, so that the next
// one, sent at the latest lease/3 after it ended, still has time to
// succeed before 9/10 of the lease.
func (d *decoder) checkLease(cfg *Config) {
	if cfg.Redis == nil {
		if cfg.Lock.ReplicaAck != nil {
			d.errAt([]string{"lock", "replica_ack"}, "", "lock.replica_ack", "needs redis: the in-memory backend has no replicas")
		}
		return
	}
	if d.leaseBad {
		return // reported already
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
	path, field := []string{"lock", "lease"}, "lock.lease"
	if !d.set(path...) {
		path, field = []string{"redis", "timeout"}, "redis.timeout"
	}
	d.errAt(path, "", field, fmt.Sprintf("%s must be shorter than half the lease of %v (%v): a renewal that hangs that long must leave time for another before the lease counts as lost at 9/10 of it; raise lock.lease or lower redis.timeout",
		what, cfg.Lock.Lease, limit.Round(time.Millisecond)))
}

func (d *decoder) decodeAdmin(a obj, cfg *Config) {
	if v, ok := a.str("listen"); ok {
		if msg := checkHostPort(v, true); msg != "" {
			a.errf("listen", "%s", msg)
		} else {
			cfg.Admin.Listen = v
		}
	}
	if v, ok := a.secret("token"); ok {
		d.secrets = append(d.secrets, v)
		cfg.Admin.Token = NewSecret(v)
		if d.inFile("admin", "token") && v != "" {
			d.fileSecrets = append(d.fileSecrets, []string{"admin", "token"})
		}
	}
	if name, ok := a.str("token_env"); ok {
		if a.has("token") {
			a.errf("token_env", "token and token_env are both set: give one")
		} else if v := d.lookupEnv(name); v == "" && d.o.readOnly {
			a.warnf("token_env", "the environment variable %q is not set, or empty: this command does not need it, but run does", name)
		} else if v == "" {
			a.errf("token_env", "the environment variable %q is not set, or empty", name)
		} else {
			d.secrets = append(d.secrets, v)
			cfg.Admin.Token, cfg.Admin.TokenEnv = NewSecret(v), name
		}
	}
	if !isLoopback(cfg.Admin.Listen) && !cfg.Admin.Token.IsSet() && a.has("listen") {
		a.warnf("listen", "%q is reachable from other machines, and there is no admin token: anyone who reaches it can trigger, pause and resume jobs; set token_env", cfg.Admin.Listen)
	}
}

func (d *decoder) decodeTelemetry(t obj, cfg *Config) {
	if v, ok := t.oneOf("traces", TracesNone, TracesStdout, TracesOTLP); ok {
		cfg.Telemetry.Traces, cfg.Telemetry.TracesNamed = v, true
	}
	if v, ok := t.oneOf("metrics", MetricsPrometheus, MetricsOTLP, MetricsNone); ok {
		cfg.Telemetry.Metrics, cfg.Telemetry.MetricsNamed = v, true
	}
	ep, hasEP := t.str("otlp_endpoint")
	if hasEP {
		if msg := checkEndpoint(ep); msg != "" {
			t.errf("otlp_endpoint", "%s", msg)
		} else {
			cfg.Telemetry.OTLPEndpoint = ep
		}
	}
	usesOTLP := cfg.Telemetry.Traces == TracesOTLP || cfg.Telemetry.Metrics == MetricsOTLP
	switch {
	case usesOTLP && !t.has("otlp_endpoint"):
		key := "traces"
		if cfg.Telemetry.Traces != TracesOTLP {
			key = "metrics"
		}
		t.errf(key, "%q needs otlp_endpoint (host:port, or an http(s) URL)", TracesOTLP)
	case !usesOTLP && hasEP:
		t.warnf("otlp_endpoint", "set, but neither traces nor metrics is \"otlp\": it is not used")
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
	for _, path := range d.fileSecrets {
		hint := "chmod 600 the file"
		switch strings.Join(path, ".") {
		case "redis.password", "redis.url":
			hint += ", or give the password in password_env"
		case "admin.token":
			hint += ", or give the token in token_env"
		}
		d.warnAt(path, "", strings.Join(path, "."), fmt.Sprintf("a secret in a file that other users can read (mode %04o): %s", d.mode, hint))
	}
}
