package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"reflect"
	"slices"
	"strings"
)

// jobDigestLen is how many hex digits of a job block's SHA-256 its Digest
// keeps: 64 bits, plenty to tell a job's versions apart.
const jobDigestLen = 16

// fileDigest is the SHA-256 of a config file's bytes, in hex: what
// sha256sum prints for it.
func fileDigest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// jobDigest is the digest of a job block as written: its name and values
// (of the file alone, since jobs cannot be set from the environment), as
// JSON. Comments, blank lines, the order of keys and the job's place in
// the file do not change it; an environment variable that a job names is
// there by its name only, never by its value. Literal secrets are
// redacted before hashing (redactJob), so that the digest, which the
// ledger, the admin API and the status page show, tells nothing about
// them: a secret changed alone leaves the digest as it was.
func jobDigest(b *jobBlock) string {
	data, err := json.Marshal(redactJob(b))
	if err != nil {
		data = []byte(b.Name) // strings, numbers, lists and maps always marshal
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:jobDigestLen]
}

// SecretsDigest is a digest of what Digest leaves out of the job: the
// whole of its exec env, http headers and http URL, secrets included; ""
// for a job with none. It tells a reload that a job whose secrets alone
// changed must be applied. It is for comparing within this process only:
// never show it, store it or send it.
func (j Job) SecretsDigest() string {
	var v struct {
		Env     map[string]string
		Headers map[string]string
		URL     string
	}
	if j.Exec != nil {
		v.Env = j.Exec.Env
	}
	if j.HTTP != nil {
		v.Headers, v.URL = j.HTTP.Headers, j.HTTP.URL
	}
	if v.Env == nil && v.Headers == nil && v.URL == "" {
		return ""
	}
	data, _ := json.Marshal(v) // maps of strings and a string always marshal
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// redactJob returns a copy of b without its literal secrets: the values of
// exec env variables and http headers whose names speak of a secret
// (secretName), and the password and query values of an http job's URL
// (as httpjob's errors hide them).
func redactJob(b *jobBlock) *jobBlock {
	c := *b
	if x := b.Exec; x != nil {
		e := *x
		e.Env = redactValues(x.Env)
		c.Exec = &e
	}
	if h := b.HTTP; h != nil {
		r := *h
		r.Headers = redactValues(h.Headers)
		if u, err := url.Parse(h.URL); err == nil {
			if _, has := u.User.Password(); has {
				u.User = url.UserPassword(u.User.Username(), redacted)
			}
			if u.RawQuery != "" {
				q := u.Query()
				for _, vs := range q {
					for i := range vs {
						vs[i] = redacted
					}
				}
				u.RawQuery = q.Encode()
			}
			r.URL = u.String()
		}
		c.HTTP = &r
	}
	return &c
}

// redactValues returns m with the values of the names that speak of a
// secret replaced by "[redacted]"; m itself is left alone.
func redactValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if secretName(k) {
			v = redacted
		}
		out[k] = v
	}
	return out
}

// secretName reports whether an environment variable's or a header's name
// speaks of a secret: Authorization, Cookie, API_TOKEN, DB_PASSWORD,
// X-Api-Key, AWS_SECRET_ACCESS_KEY and the like.
func secretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"auth", "token", "secret", "pass", "key", "cookie", "credential", "session", "signature", "private"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// restartSetting is a setting the daemon reads once, at start: a change to
// it takes a restart.
type restartSetting struct {
	name  string // as in the file: "redis", "admin.listen"
	field string // the Config field it comes from, for the test that each field is classified
	value func(*Config) any
}

// restartSettings are every setting but the jobs: the daemon wires each of
// them once at start (the lock client and its Redis connection, the admin
// listener and its token, telemetry, the logger, the scheduler's options,
// the webhooks, the file watch).
var restartSettings = []restartSetting{
	{"replica_id", "ReplicaID", func(c *Config) any { return c.ReplicaID }},
	{"shutdown_timeout", "ShutdownTimeout", func(c *Config) any { return c.ShutdownTimeout }},
	{"watch", "Watch", func(c *Config) any { return c.Watch }},
	{"fleet", "Fleet", func(c *Config) any { return c.Fleet }},
	{"redis", "Redis", func(c *Config) any { return c.Redis }},
	{"lock", "Lock", func(c *Config) any { return c.Lock }},
	{"admin.listen", "Admin", func(c *Config) any { return c.Admin.Listen }},
	{"admin.token", "Admin", func(c *Config) any { return [2]string{c.Admin.Token.Value(), c.Admin.TokenEnv} }},
	{"admin.tokens", "Admin", func(c *Config) any {
		// The token blocks: names, scopes and values; not where they are.
		var ts []string
		for _, t := range c.Admin.Tokens {
			if t.Name != LegacyTokenName {
				ts = append(ts, t.Name, t.Scope.String(), t.Value.Value(), t.ValueEnv)
			}
		}
		return ts
	}},
	{"admin.public_read", "Admin", func(c *Config) any { return c.Admin.PublicRead }},
	{"telemetry", "Telemetry", func(c *Config) any { return c.Telemetry }},
	{"log", "Log", func(c *Config) any { return c.Log }},
	{"history", "History", func(c *Config) any { return c.History }},
	{"audit", "Audit", func(c *Config) any { return c.Audit }},
	{"notify", "Notify", func(c *Config) any {
		// Where a block is in the file is not part of it.
		ns := slices.Clone(c.Notify)
		for i := range ns {
			ns[i].Pos = Pos{}
		}
		return ns
	}},
}

// RestartNeeded lists the settings in which c differs from running, the
// config a daemon started with, among those that the daemon reads once at
// start: every setting but the jobs (replica_id, shutdown_timeout, watch,
// and the blocks fleet, redis, lock, admin, telemetry, log, history and
// notify). Each is named as in the file ("redis", "admin.listen",
// "admin.token", "admin.tokens" for the token blocks,
// "admin.public_read"), in that order; none if nothing changed. The values
// compared are those in effect (the file with the environment over it,
// defaults filled in), so a setting moved within the file, or written
// another way to the same effect, is no change. The values are never
// shown.
func (c *Config) RestartNeeded(running *Config) []string {
	var out []string
	for _, s := range restartSettings {
		if !reflect.DeepEqual(s.value(c), s.value(running)) {
			out = append(out, s.name)
		}
	}
	return out
}
