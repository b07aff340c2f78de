package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
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
// there by its name only, never by its value.
func jobDigest(b *jobBlock) string {
	data, err := json.Marshal(b)
	if err != nil {
		data = []byte(b.Name) // strings, numbers, lists and maps always marshal
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:jobDigestLen]
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
