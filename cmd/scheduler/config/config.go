package config

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/jobs/execjob"
	"github.com/lockcron/lockcron/jobs/httpjob"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// Defaults of settings left out of the file and the environment.
const (
	DefaultKeyPrefix       = "lockcron"
	DefaultRedisTimeout    = 3 * time.Second
	DefaultConnectTimeout  = 30 * time.Second
	DefaultAdminListen     = "127.0.0.1:9090"
	DefaultLogLevel        = "info"
	DefaultTraces          = TracesNone
	DefaultMetrics         = MetricsPrometheus
	DefaultAckReplicas     = 1
	DefaultAckTimeout      = 500 * time.Millisecond
	DefaultShutdownTimeout = scheduler.DefaultShutdownTimeout
	DefaultAuditKeep       = 1000
	DefaultAuditMaxAge     = 90 * 24 * time.Hour // 2160h
	// MinLease is the shortest lock.lease a config may give: the watchdog
	// renews every lease/3 and needs several round trips of margin.
	MinLease = time.Second
)

// Telemetry exporters.
const (
	TracesNone   = "none"
	TracesStdout = "stdout"
	TracesOTLP   = "otlp"

	MetricsPrometheus = "prometheus"
	MetricsOTLP       = "otlp"
	MetricsNone       = "none"
)

// Job kinds.
const (
	KindExec = "exec"
	KindHTTP = "http"
	KindFunc = "func"
)

// Config is a loaded, validated config, with every default filled in. Load
// returns it; its builders (RedisClient, LockOptions, SchedulerOptions,
// SchedulerJobs) turn it into what the daemon runs. Printing it (fmt, JSON)
// never shows a secret. A Config is not changed by its methods, and is safe
// for concurrent reads.
type Config struct {
	// Path is the file it was loaded from.
	Path string
	// Digest is the SHA-256 of the file's bytes, in hex: what sha256sum
	// prints for it. It tells which version of the file a daemon loaded.
	Digest string
	// ReplicaID names this replica in lock owners, logs and spans. Default
	// host name and process id ("host-1234"). It must be unique across the
	// fleet, and stable across restarts for a job with replicas = "all"
	// (scheduler.WithReplicaID).
	ReplicaID string
	// Redis is the Redis connection; nil means the in-memory backend (one
	// process, no Redis).
	Redis *Redis
	// Lock holds the lock client's settings.
	Lock Lock
	// Admin is the admin HTTP listener.
	Admin Admin
	// Telemetry chooses where traces and metrics go.
	Telemetry Telemetry
	// Log is the root logger's settings.
	Log Log
	// History is the run history's retention for every job that sets none
	// of its own (scheduler.WithHistory).
	History History
	// Audit is the audit trail's retention: the audit block.
	Audit Audit
	// ShutdownTimeout bounds the graceful stop (scheduler.WithShutdownTimeout).
	ShutdownTimeout time.Duration
	// Watch makes the daemon reload the file when it changes, as on
	// SIGHUP. Default false.
	Watch bool
	// Fleet is who claims each tick: the fleet block.
	Fleet Fleet
	// Jobs are the file's jobs, in the file's order.
	Jobs []Job
	// Notify are the webhooks of the notify blocks, in the file's order.
	Notify []Notify
	// Warnings are things allowed but risky, each on one line, with its
	// place where it has one. Log them.
	Warnings []string

	// secrets are the config's secret values (passwords, tokens, URLs that
	// hold them), the longest first: Redact removes them. Secrets, so that
	// even printing the Config with %+v does not show them.
	secrets []Secret
}

// Redact returns s with every secret of the config replaced by
// "[redacted]": the Redis password and URL, the admin token, a webhook's
// URL. The scheduler applies it to the error text it keeps in the run
// history (scheduler.WithRedact), so that a job that prints its
// connection string does not leave the password in Redis.
func (c *Config) Redact(s string) string {
	for _, sec := range c.secrets {
		if v := sec.Value(); len(v) >= 3 {
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	return s
}

// Redis is the redis block: how to reach Redis.
type Redis struct {
	// URL is a redis://, rediss:// or unix:// URL (go-redis's ParseURL). It
	// may hold a password, so it is kept as a Secret; Describe shows it
	// with the password masked.
	URL Secret
	// Addrs are host:port addresses: Sentinels when MasterName is set,
	// else Cluster nodes when there are several, else one server.
	Addrs []string
	// MasterName is the Sentinel master's name.
	MasterName string
	// Username and Password authenticate (ACL or requirepass). With URL,
	// they replace the URL's when set.
	Username string
	Password Secret
	// PasswordEnv names the environment variable Password was read from, if
	// it came from password_env.
	PasswordEnv string
	// TLS is nil for plain connections (unless URL is rediss://).
	TLS *TLS
	// DB is the database number; 0 for Cluster. With URL, it replaces the
	// URL's when it is set.
	DB    int
	dbSet bool
	// KeyPrefix starts every key lockcron writes. Default "lockcron".
	KeyPrefix string
	// Timeout bounds each command (dial, read and write). Default 3s.
	Timeout time.Duration
	// ConnectTimeout bounds how long the daemon, at start-up, retries a
	// Redis that does not answer before it gives up and exits 1. Default
	// 30s.
	ConnectTimeout time.Duration
}

// TLS is the redis.tls block.
type TLS struct {
	CAFile             string // PEM bundle of trusted CAs; default the system's
	CertFile, KeyFile  string // client certificate, for mutual TLS
	ServerName         string // default the host name dialled
	InsecureSkipVerify bool   // do not check the server's certificate (warned about)
}

// Lock is the lock block.
type Lock struct {
	// Lease is the watchdog lease (lock.WithLeaseTime). Default 30s.
	Lease time.Duration
	// WaiterTTL is how long a fair-lock waiter keeps its place without
	// renewing it (lock.WithWaiterTTL). Default 3s.
	WaiterTTL time.Duration
	// ReplicaAck, when set, makes each acquisition and renewal wait for
	// replicas (lock.WithReplicaAck). Needs Redis.
	ReplicaAck *ReplicaAck
}

// ReplicaAck is the lock.replica_ack block.
type ReplicaAck struct {
	Replicas int           // default 1
	Timeout  time.Duration // default 500ms
}

// Admin is the admin block.
type Admin struct {
	// Listen is the admin HTTP listener's host:port. Default
	// "127.0.0.1:9090".
	Listen string
	// Token is the single token of token or token_env, which has scope
	// admin; empty means none. It is in Tokens too, as LegacyTokenName.
	Token Secret
	// TokenEnv names the environment variable Token was read from, if it
	// came from token_env.
	TokenEnv string
	// Tokens are every bearer token the admin API takes: Token first (if
	// set), then the token "name" { ... } blocks in the file's order. When
	// there is none, reads are open and the calls that change something
	// are taken from loopback only.
	Tokens []Token
	// PublicRead opens the reads (GET of the JSON API and the status page)
	// to callers without a token, when there are tokens. Default false.
	PublicRead bool
}

// LegacyTokenName is the name of the single admin token (token or
// token_env) among Admin.Tokens: what the admin API records as the actor
// of a call made with it.
const LegacyTokenName = "admin.token"

// Scope is what an admin token may do. Each scope may do what the smaller
// ones may: read reads the JSON API and the status page; operate also
// triggers, pauses and resumes jobs; admin also reloads the config.
type Scope int

// The scopes, smallest first.
const (
	ScopeRead Scope = iota + 1
	ScopeOperate
	ScopeAdmin
)

var scopeNames = []string{ScopeRead: "read", ScopeOperate: "operate", ScopeAdmin: "admin"}

// String is the scope's name in the config: "read", "operate" or "admin".
func (s Scope) String() string {
	if s < ScopeRead || s > ScopeAdmin {
		return fmt.Sprintf("Scope(%d)", int(s))
	}
	return scopeNames[s]
}

// Token is an admin bearer token: a token "name" { ... } block, or the
// single token (LegacyTokenName).
type Token struct {
	// Name names the token in logs and in the admin API's answers; never
	// its value.
	Name  string
	Scope Scope
	// Value is the token itself.
	Value Secret
	// ValueEnv names the environment variable Value was read from, if any.
	ValueEnv string
	// Pos is where the token's block (or the token argument) is; zero if
	// the environment set it.
	Pos Pos
}

// Telemetry is the telemetry block.
type Telemetry struct {
	Traces       string `hcl:"traces,optional"`        // "none" (default), "stdout" or "otlp"
	Metrics      string `hcl:"metrics,optional"`       // "prometheus" (default, on the admin listener), "otlp" or "none"
	OTLPEndpoint string `hcl:"otlp_endpoint,optional"` // needed when Traces or Metrics is "otlp"
	// TracesNamed and MetricsNamed report whether the config (the file or a
	// LOCKCRON_ variable) named Traces and Metrics. When it did not, the
	// daemon lets OpenTelemetry's standard variables choose, if they are
	// set: OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER and the rest.
	TracesNamed, MetricsNamed bool
}

// Log is the log block.
type Log struct {
	Level string `hcl:"level,optional"` // "trace", "debug", "info" (default), "warn" or "error"
	JSON  bool   `hcl:"json,optional"`
}

// History is the history block: how much of each job's run history Redis
// keeps (scheduler.WithHistory). A zero field keeps the scheduler's
// default (100 runs, 30 days).
type History struct {
	Keep   int           // the latest runs kept per job
	MaxAge time.Duration // no run older than this is kept
}

// Audit is the audit block: how much of the audit trail (every change
// made through the admin API or the command) is kept: the latest Keep
// entries, none older than MaxAge. Defaults DefaultAuditKeep and
// DefaultAuditMaxAge.
type Audit struct {
	Keep   int
	MaxAge time.Duration
}

// HCLogLevel returns Level as an hclog.Level.
func (l Log) HCLogLevel() hclog.Level { return hclog.LevelFromString(l.Level) }

// Job is one job block: the scheduler.Job it makes, with the defaults
// filled in (scheduler.Job.Validate) and without its Run, which
// SchedulerJobs builds.
type Job struct {
	scheduler.Job
	// Pos is where the job's block starts.
	Pos Pos
	// Digest is a digest of the job's block as written (16 hex digits):
	// the same block gives the same digest wherever it is in the file;
	// a variable the block names is there by its name, never its value.
	// The daemon sets it as the scheduler.Job's Revision, and compares it
	// to tell a changed job at a reload.
	Digest   string
	TimeZone string // "" for the scheduler's zone (UTC)

	// Kind is KindExec, KindHTTP or KindFunc; the matching one of Exec
	// (without Logger and Unset, which SchedulerJobs sets), HTTP and Func
	// is set.
	Kind string
	Exec *execjob.Exec
	HTTP *httpjob.HTTP
	Func string
}

// UsesRedis reports whether the config names a Redis; if not, the daemon
// runs on the in-memory backend (lock.NewMemory).
func (c *Config) UsesRedis() bool { return c.Redis != nil }

// Describe returns where r connects, safe to log: the URL with its password
// masked, or the addresses and the kind of deployment.
func (r *Redis) Describe() string {
	if r == nil {
		return "in-memory"
	}
	if r.URL.IsSet() {
		return redactURL(r.URL.Value())
	}
	switch {
	case r.MasterName != "":
		return fmt.Sprintf("sentinel master %q via %s", r.MasterName, strings.Join(r.Addrs, ","))
	case len(r.Addrs) > 1:
		return "cluster " + strings.Join(r.Addrs, ",")
	case len(r.Addrs) == 1:
		return r.Addrs[0]
	}
	return ""
}

// redactURL returns u with its password replaced, or a placeholder if u
// does not parse (it may still hold a password).
func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "[unparsable URL]"
	}
	return p.Redacted()
}

// defaultReplicaID is lock's default client id: host name and process id.
func defaultReplicaID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s-%d", cmp.Or(host, "lockcron"), os.Getpid())
}

// isLoopback reports whether the host of a host:port listens on loopback
// only.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	ip := net.ParseIP(host)
	return err == nil && (host == "localhost" || ip != nil && ip.IsLoopback())
}

// defaults returns a Config with every default, before the file and the
// environment.
func defaults() *Config {
	return &Config{
		ReplicaID:       defaultReplicaID(),
		Lock:            Lock{Lease: lock.DefaultLeaseTime, WaiterTTL: lock.DefaultWaiterTTL},
		Admin:           Admin{Listen: DefaultAdminListen},
		Telemetry:       Telemetry{Traces: DefaultTraces, Metrics: DefaultMetrics},
		Log:             Log{Level: DefaultLogLevel},
		ShutdownTimeout: DefaultShutdownTimeout,
		Audit:           Audit{Keep: DefaultAuditKeep, MaxAge: DefaultAuditMaxAge},
		Fleet:           Fleet{Ranking: true, ClaimFallback: scheduler.DefaultClaimFallback, MemberTTL: scheduler.DefaultMemberTTL},
	}
}

// Fleet is who claims each tick (see "Who claims" in the scheduler
// package): the replica first in rank at once, the others after their
// fallback.
type Fleet struct {
	// Ranking false makes every replica claim every tick at once
	// (scheduler.WithClaimFallback(0)).
	Ranking bool
	// ClaimFallback is the wait per rank (scheduler.WithClaimFallback).
	ClaimFallback time.Duration
	// MemberTTL is how long a replica stays a member after its last
	// heartbeat (scheduler.WithMemberTTL).
	MemberTTL time.Duration
}
