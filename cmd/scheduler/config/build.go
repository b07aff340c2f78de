package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// ErrNoRedis: RedisClient was called on a config without Redis; the daemon
// runs on lock.NewMemory then.
var ErrNoRedis = errors.New("config: no redis configured")

// DialerRetries and DialerRetryTimeout make a client that cannot dial keep
// trying every 20ms, bounded by the command's ctx, instead of go-redis's
// default (5 tries 100ms apart, then, after PoolSize failed dials, one probe
// a second): waiters take their lock within tens of milliseconds of the
// server's return after a restart or a failover.
const (
	DialerRetries      = 1000
	DialerRetryTimeout = 20 * time.Millisecond
)

// ClusterStateReloadInterval is how often a Cluster client reloads the
// slot map: go-redis's default (up to a minute) keeps sending a failed
// primary's slots to it for too long.
const ClusterStateReloadInterval = time.Second

// RedisClient returns a client for c.Redis: for a url, redis.NewClient
// with the URL's options (username, password, db and tls replace the
// URL's when set); for addrs, redis.NewUniversalClient, which makes a
// Sentinel client with master_name, a Cluster client for several
// addresses (then with ClusterStateReloadInterval) and a plain client for
// one. Every command is bounded by redis.timeout (dial, read, write) and
// by its ctx's deadline (ContextTimeoutEnabled); a failed dial is retried
// every DialerRetryTimeout within those bounds. It connects to nothing:
// go-redis dials on the first command. It returns ErrNoRedis without a
// redis block, and an error naming the file for TLS files that cannot be
// read; its errors never show the password. The caller closes the client.
func (c *Config) RedisClient() (redis.UniversalClient, error) {
	r := c.Redis
	if r == nil {
		return nil, ErrNoRedis
	}
	tc, err := r.tlsConfig()
	if err != nil {
		return nil, err
	}
	if !r.URL.IsSet() {
		if len(r.Addrs) == 0 {
			return nil, errors.New("config: redis: neither url nor addrs")
		}
		uo := &redis.UniversalOptions{
			Addrs: slices.Clone(r.Addrs), MasterName: r.MasterName, Username: r.Username, Password: r.Password.Value(),
			DB: r.DB, TLSConfig: tc, DialTimeout: r.Timeout, ReadTimeout: r.Timeout, WriteTimeout: r.Timeout,
			ContextTimeoutEnabled: true, DialerRetries: DialerRetries, DialerRetryTimeout: DialerRetryTimeout,
		}
		if r.MasterName == "" && len(r.Addrs) > 1 {
			// What NewUniversalClient does, with the one option its
			// UniversalOptions lacks.
			o := uo.Cluster()
			o.ClusterStateReloadInterval = ClusterStateReloadInterval
			return redis.NewClusterClient(o), nil
		}
		return redis.NewUniversalClient(uo), nil
	}
	o, err := redis.ParseURL(r.URL.Value())
	if err != nil {
		// Load checked it; this is a config built by hand.
		return nil, fmt.Errorf("config: redis.url %q: not a valid Redis URL", redactURL(r.URL.Value()))
	}
	if r.Username != "" {
		o.Username = r.Username
	}
	if r.Password.IsSet() {
		o.Password = r.Password.Value()
	}
	if r.dbSet {
		o.DB = r.DB
	}
	if tc != nil {
		if o.TLSConfig != nil && tc.ServerName == "" {
			tc.ServerName = o.TLSConfig.ServerName
		}
		o.TLSConfig = tc
	}
	o.DialTimeout, o.ReadTimeout, o.WriteTimeout = r.Timeout, r.Timeout, r.Timeout
	o.ContextTimeoutEnabled = true
	o.DialerRetries, o.DialerRetryTimeout = DialerRetries, DialerRetryTimeout
	return redis.NewClient(o), nil
}

// tlsConfig builds the TLS settings, reading the files; nil without TLS.
func (r *Redis) tlsConfig() (*tls.Config, error) {
	t := r.TLS
	if t == nil {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         t.ServerName,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // the user asked for it, and Load warned
	}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		if err != nil {
			return nil, fmt.Errorf("config: redis.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("config: redis.tls.ca_file %q: no PEM certificate in it", t.CAFile)
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" || t.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("config: redis.tls.cert_file, key_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// LockOptions returns the lock client's options: lease, key prefix,
// client id (replica_id), waiter TTL and, if set, replica acknowledgement.
// Give them to lock.New, or to lock.NewMemory (then without Redis, so
// without replica_ack, which Load refuses there). Add the logger and the
// telemetry providers yourself.
func (c *Config) LockOptions() []lock.Option {
	prefix := DefaultKeyPrefix
	if c.Redis != nil {
		prefix = c.Redis.KeyPrefix
	}
	opts := []lock.Option{
		lock.WithLeaseTime(c.Lock.Lease),
		lock.WithKeyPrefix(prefix),
		lock.WithClientID(c.ReplicaID),
		lock.WithWaiterTTL(c.Lock.WaiterTTL),
	}
	if a := c.Lock.ReplicaAck; a != nil {
		opts = append(opts, lock.WithReplicaAck(a.Replicas, a.Timeout))
	}
	return opts
}

// SchedulerOptions returns the scheduler's options from the config:
// replica id, shutdown timeout, the run history's retention, who claims
// (the fleet block), and Redact for the error text the history keeps. Add
// the logger and the telemetry providers yourself.
func (c *Config) SchedulerOptions() []scheduler.Option {
	fallback := c.Fleet.ClaimFallback
	if !c.Fleet.Ranking {
		fallback = 0
	}
	return []scheduler.Option{
		scheduler.WithReplicaID(c.ReplicaID),
		scheduler.WithShutdownTimeout(c.ShutdownTimeout),
		scheduler.WithHistory(c.History.Keep, c.History.MaxAge),
		scheduler.WithRedact(c.Redact),
		scheduler.WithClaimFallback(fallback),
		scheduler.WithMemberTTL(c.Fleet.MemberTTL),
	}
}

// secretEnv names the environment variables that may hold the daemon's
// secrets: exec jobs do not inherit them.
func (c *Config) secretEnv() []string {
	names := []string{"REDIS_URL", EnvPrefix + "REDIS__URL", EnvPrefix + "REDIS__PASSWORD", EnvPrefix + "ADMIN__TOKEN"}
	if c.Redis != nil && c.Redis.PasswordEnv != "" {
		names = append(names, c.Redis.PasswordEnv)
	}
	for _, t := range c.Admin.Tokens {
		names = append(names, t.ValueEnv) // the single token's TokenEnv too
	}
	for _, n := range c.Notify {
		names = append(names, n.URLEnv)
	}
	return slices.DeleteFunc(names, func(n string) bool { return n == "" })
}

// SchedulerJobs builds the jobs for scheduler.Add: exec jobs as *execjob.Exec
// logging to log.Named(job name), http jobs as *httpjob.HTTP, func jobs looked
// up in reg (nil means jobs.DefaultRegistry), with every policy, and
// Revision the job's Digest (so that each run records which definition of
// the job it ran). It returns Errors (with places) for funcs reg does not
// hold: Load checked them against its own registry, which may differ. A
// nil log discards the jobs' output.
func (c *Config) SchedulerJobs(reg *jobs.Registry, log hclog.Logger) ([]scheduler.Job, error) {
	if reg == nil {
		reg = jobs.DefaultRegistry
	}
	if log == nil {
		log = hclog.NewNullLogger()
	}
	out := make([]scheduler.Job, 0, len(c.Jobs))
	var errs Errors
	for _, j := range c.Jobs {
		sj := j.Job
		sj.Revision = j.Digest
		switch {
		case j.Exec != nil:
			x := *j.Exec
			x.Command, x.Env, x.Unset, x.Logger = slices.Clone(x.Command), maps.Clone(x.Env), c.secretEnv(), log.Named(j.Name)
			sj.Run = &x
		case j.HTTP != nil:
			x := *j.HTTP
			x.Headers, x.ExpectStatus = maps.Clone(x.Headers), slices.Clone(x.ExpectStatus)
			sj.Run = &x
		case j.Func != "":
			f, err := reg.Lookup(j.Func)
			if err != nil {
				errs = append(errs, &Error{Pos: j.Pos, Job: j.Name, Field: "func", Msg: funcError(j.Func, err)})
				continue
			}
			sj.Run = f
		default:
			errs = append(errs, &Error{Pos: j.Pos, Job: j.Name, Field: "kind", Msg: "no kind"})
			continue
		}
		out = append(out, sj)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}
