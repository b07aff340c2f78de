package config_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/execjob"
	"github.com/lockcron/lockcron/jobs/httpjob"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

func TestExampleConfig(t *testing.T) {
	cfg, err := config.Load("../../../config.example.hcl", config.WithEnviron(nil))
	if err != nil {
		t.Fatalf("config.example.hcl: %v", err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("config.example.hcl warns: %q", cfg.Warnings)
	}
	if cfg.UsesRedis() {
		t.Errorf("config.example.hcl uses Redis: it must run anywhere")
	}
	if len(cfg.Jobs) == 0 {
		t.Fatal("config.example.hcl has no job")
	}
	js, err := cfg.SchedulerJobs(nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	locks, err := lock.NewMemory(cfg.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	s, err := scheduler.New(locks, cfg.SchedulerOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, j := range js {
		if err := s.Add(j); err != nil {
			t.Errorf("scheduler refuses job %q: %v", j.Name, err)
		}
	}
	// Each exec job runs on a fresh machine.
	for _, j := range js {
		if x, ok := j.Run.(*execjob.Exec); ok {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := x.Run(jobs.WithInfo(ctx, jobs.Info{Job: j.Name, Replica: "test", Tick: time.Now()}))
			cancel()
			if err != nil {
				t.Errorf("job %q: %v", j.Name, err)
			}
		}
	}
}

func TestExampleConfigWithRedisFromTheEnvironment(t *testing.T) {
	cfg, err := config.Load("../../../config.example.hcl", config.WithEnviron([]string{"REDIS_URL=redis://127.0.0.1:6379/0"}))
	if err != nil {
		t.Fatal(err)
	}
	rdb, err := cfg.RedisClient()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	c, err := lock.New(rdb, cfg.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

func TestRedisClientShapes(t *testing.T) {
	tests := []struct {
		name  string
		redis string
		env   []string
		check func(t *testing.T, c redis.UniversalClient)
	}{{
		name:  "url",
		redis: `url = "redis://app:pw@10.0.0.1:6380/3"` + "\n timeout = \"2s\"",
		check: func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.Client).Options()
			if o.Addr != "10.0.0.1:6380" || o.DB != 3 || o.Username != "app" || o.Password != "pw" {
				t.Errorf("options %+v", o)
			}
			if !o.ContextTimeoutEnabled || o.ReadTimeout != 2*time.Second || o.WriteTimeout != 2*time.Second || o.DialTimeout != 2*time.Second {
				t.Errorf("timeouts %v %v %v %v", o.ContextTimeoutEnabled, o.DialTimeout, o.ReadTimeout, o.WriteTimeout)
			}
			if o.DialerRetries != config.DialerRetries || o.DialerRetryTimeout != config.DialerRetryTimeout {
				t.Errorf("dial retries %d every %v", o.DialerRetries, o.DialerRetryTimeout)
			}
			if o.TLSConfig != nil {
				t.Errorf("TLS on a redis:// url")
			}
		},
	}, {
		name:  "url with settings that replace its own",
		redis: `url = "redis://app:pw@10.0.0.1:6380/3"` + "\n username = \"other\"\n password_env = \"PW\"\n db = 5",
		env:   []string{"PW=from-env"},
		check: func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.Client).Options()
			if o.DB != 5 || o.Username != "other" || o.Password != "from-env" {
				t.Errorf("options %+v", o)
			}
		},
	}, {
		name:  "rediss url",
		redis: `url = "rediss://redis.example.com:6380"`,
		check: func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.Client).Options()
			if o.TLSConfig == nil || o.TLSConfig.ServerName != "redis.example.com" {
				t.Errorf("TLS %+v", o.TLSConfig)
			}
		},
	}, {
		name:  "one address",
		redis: `addrs = ["10.0.0.1:6379"]` + "\n db = 1\n password = \"pw\"",
		check: func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.Client).Options()
			if o.Addr != "10.0.0.1:6379" || o.DB != 1 || o.Password != "pw" || !o.ContextTimeoutEnabled || o.ReadTimeout != 3*time.Second || o.DialerRetries != config.DialerRetries {
				t.Errorf("options %+v", o)
			}
		},
	}, {
		name:  "sentinel",
		redis: `addrs = ["s1:26379", "s2:26379", "s3:26379"]` + "\n master_name = \"mymaster\"\n db = 2",
		check: func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.Client).Options()
			if o.Addr != "FailoverClient" || o.DB != 2 || !o.ContextTimeoutEnabled || o.DialerRetries != config.DialerRetries || o.DialerRetryTimeout != config.DialerRetryTimeout {
				t.Errorf("not a failover client: %+v", o)
			}
		},
	}, {
		name:  "cluster",
		redis: `addrs = ["n1:7000", "n2:7000", "n3:7000"]` + "\n timeout = \"1s\"",
		check: func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.ClusterClient).Options()
			if !slices.Equal(o.Addrs, []string{"n1:7000", "n2:7000", "n3:7000"}) || o.ClusterStateReloadInterval != time.Second || !o.ContextTimeoutEnabled || o.ReadTimeout != time.Second || o.DialerRetries != config.DialerRetries || o.DialerRetryTimeout != config.DialerRetryTimeout {
				t.Errorf("options %+v", o)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustLoad(t, "redis {\n"+tt.redis+"\n}\n"+job, tt.env...)
			c, err := cfg.RedisClient()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			tt.check(t, c)
		})
	}
}

func TestRedisClientWithoutRedis(t *testing.T) {
	cfg := mustLoad(t, job)
	if _, err := cfg.RedisClient(); !errors.Is(err, config.ErrNoRedis) {
		t.Errorf("RedisClient() = %v, want ErrNoRedis", err)
	}
	if cfg.Redis.Describe() != "in-memory" {
		t.Errorf("Describe() = %q", cfg.Redis.Describe())
	}
}

// writeCert writes a self-signed certificate and its key.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestRedisClientTLS(t *testing.T) {
	cert, key := writeCert(t, t.TempDir())
	cfg := mustLoad(t, `redis {
  addrs = ["n1:7000", "n2:7000"]
  tls {
    ca_file = "`+cert+`"
    cert_file = "`+cert+`"
    key_file = "`+key+`"
    server_name = "redis.internal"
  }
}
`+job)
	c, err := cfg.RedisClient()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := c.(*redis.ClusterClient).Options().TLSConfig
	if tc == nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "redis.internal" || tc.InsecureSkipVerify {
		t.Errorf("TLS config %+v", tc)
	}

	missing := mustLoad(t, "redis {\n  url = \"redis://h:6379\"\n  tls { ca_file = \"/nonexistent/ca.pem\" }\n}\n"+job)
	if _, err := missing.RedisClient(); err == nil || !strings.Contains(err.Error(), "redis.tls.ca_file") {
		t.Errorf("RedisClient with a missing CA file: %v", err)
	}
}

func TestLockOptions(t *testing.T) {
	cfg := mustLoad(t, "replica_id = \"r-1\"\nlock {\n  lease = \"12s\"\n  waiter_ttl = \"2s\"\n}\n"+job)
	c, err := lock.NewMemory(cfg.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ID() != "r-1" {
		t.Errorf("ID() = %q", c.ID())
	}

	cfg = mustLoad(t, "redis {\n  url = \"redis://h:6379\"\n  key_prefix = \"app\"\n}\nlock {\n  replica_ack {\n    replicas = 2\n    timeout = \"100ms\"\n  }\n}\n"+job)
	if got := len(cfg.LockOptions()); got != 5 {
		t.Errorf("%d options, want 5 (lease, prefix, id, waiter ttl, ack)", got)
	}
	if a := cfg.Lock.ReplicaAck; a == nil || a.Replicas != 2 || a.Timeout != 100*time.Millisecond {
		t.Errorf("replica_ack = %+v", a)
	}
	rdb, err := cfg.RedisClient()
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	rc, err := lock.New(rdb, cfg.LockOptions()...)
	if err != nil {
		t.Fatalf("lock.New refuses the options: %v", err)
	}
	rc.Close()
}

// The fleet block reaches the Scheduler: without ranking, every replica
// claims at once.
func TestFleetBlock(t *testing.T) {
	cfg := mustLoad(t, `fleet {
  ranking = false
  claim_fallback = "1s"
  member_ttl = "9s"
}
`+job)
	if cfg.Fleet != (config.Fleet{Ranking: false, ClaimFallback: time.Second, MemberTTL: 9 * time.Second}) {
		t.Errorf("fleet = %+v", cfg.Fleet)
	}
	locks, err := lock.NewMemory(cfg.LockOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	if _, err := scheduler.New(locks, cfg.SchedulerOptions()...); err != nil {
		t.Errorf("scheduler.New refuses the options: %v", err)
	}
}

func TestDefaults(t *testing.T) {
	cfg := mustLoad(t, job)
	host, _ := os.Hostname()
	switch {
	case !strings.HasPrefix(cfg.ReplicaID, host+"-"):
		t.Errorf("replica_id = %q", cfg.ReplicaID)
	case cfg.Lock.Lease != 30*time.Second || cfg.Lock.WaiterTTL != 3*time.Second || cfg.Lock.ReplicaAck != nil:
		t.Errorf("lock = %+v", cfg.Lock)
	case cfg.Admin.Listen != "127.0.0.1:9090" || cfg.Admin.Token.IsSet():
		t.Errorf("admin = %+v", cfg.Admin)
	case cfg.Telemetry != (config.Telemetry{Traces: "none", Metrics: "prometheus"}):
		t.Errorf("telemetry = %+v", cfg.Telemetry)
	case cfg.Log != (config.Log{Level: "info"}) || cfg.Log.HCLogLevel() != hclog.Info:
		t.Errorf("log = %+v", cfg.Log)
	case cfg.ShutdownTimeout != 30*time.Second:
		t.Errorf("shutdown_timeout = %v", cfg.ShutdownTimeout)
	case cfg.Fleet != (config.Fleet{Ranking: true, ClaimFallback: 250 * time.Millisecond, MemberTTL: 3 * time.Second}):
		t.Errorf("fleet = %+v", cfg.Fleet)
	}
	j := cfg.Jobs[0]
	if j.LockKind != scheduler.LockReentrant || j.LockName != "x" || j.Overlap != scheduler.OverlapSkip || j.Misfire != scheduler.MisfireSkip ||
		j.MisfireGrace != time.Hour || j.Backoff != time.Second || j.OnShutdown != scheduler.ShutdownHandoff || j.Exec.Grace != execjob.DefaultGrace ||
		j.Jitter != 0 {
		t.Errorf("job defaults: %+v", j)
	}
}

func TestSchedulerJobs(t *testing.T) {
	reg := testRegistry(t)
	path, _ := writeConfig(t, `
job "backup" {
  schedule = "0 3 * * *"
  time_zone = "Europe/Berlin"
  jitter = "5m"
  lock_kind = "fair"
  lock_name = "db"
  timeout = "30m"
  overlap = "queue"
  misfire = "run_once"
  misfire_grace = "2h"
  retries = 2
  backoff = "5s"
  on_shutdown = "abandon"
  max_concurrency = 2
  concurrency_group = "heavy"
  exec {
    command = ["/usr/local/bin/backup", "--all"]
    env = { BUCKET = "b", PORT = 5432 }
    dir = "/srv"
    grace = "20s"
  }
}
job "ping" {
  schedule = "H/10 * * * * *"
  http {
    url = "https://example.com/hook"
    method = "POST"
    headers = { "Content-Type" = "application/json" }
    body = "{}"
    expect_status = [200, 204]
  }
}
job "report" {
  schedule = "@hourly"
  func = "nightly-report"
}
`, 0o600)
	cfg, err := config.Load(path, config.WithEnviron(nil), config.WithRegistry(reg))
	if err != nil {
		t.Fatal(err)
	}
	js, err := cfg.SchedulerJobs(reg, hclog.New(&hclog.LoggerOptions{Name: "lockcron", Output: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	if len(js) != 3 {
		t.Fatalf("%d jobs", len(js))
	}
	b := js[0]
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if b.Name != "backup" || b.Schedule != "0 3 * * *" || b.Location.String() != berlin.String() || b.LockKind != scheduler.LockFair ||
		b.LockName != "db" || b.Timeout != 30*time.Minute || b.Overlap != scheduler.OverlapQueue || b.Misfire != scheduler.MisfireRunOnce ||
		b.MisfireGrace != 2*time.Hour || b.Retries != 2 || b.Backoff != 5*time.Second || b.OnShutdown != scheduler.ShutdownAbandon ||
		b.MaxConcurrency != 2 || b.ConcurrencyGroup != "heavy" || b.Jitter != 5*time.Minute {
		t.Errorf("backup = %+v", b)
	}
	x, ok := b.Run.(*execjob.Exec)
	if !ok || !slices.Equal(x.Command, []string{"/usr/local/bin/backup", "--all"}) || x.Env["BUCKET"] != "b" || x.Env["PORT"] != "5432" ||
		x.Dir != "/srv" || x.Grace != 20*time.Second || x.Logger == nil || x.Logger.Name() != "lockcron.backup" {
		t.Errorf("exec = %+v", b.Run)
	}
	h, ok := js[1].Run.(*httpjob.HTTP)
	if !ok || h.URL != "https://example.com/hook" || h.Method != "POST" || h.Headers["Content-Type"] != "application/json" || h.Body != "{}" ||
		!slices.Equal(h.ExpectStatus, []int{200, 204}) || js[1].LockName != "ping" || js[1].LockKind != scheduler.LockReentrant ||
		js[1].Schedule != "H/10 * * * * *" || js[1].Jitter != 0 {
		t.Errorf("http = %+v", js[1])
	}
	if _, ok := js[2].Run.(jobs.Func); !ok {
		t.Errorf("func job runs %T", js[2].Run)
	}

	// A registry without the func: an error with the job's place.
	_, err = cfg.SchedulerJobs(jobs.NewRegistry(), nil)
	var e *config.Error
	if !errors.As(err, &e) || e.Job != "report" || e.Field != "func" || !strings.Contains(err.Error(), path+":") {
		t.Errorf("SchedulerJobs with another registry: %v", err)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := config.Load(filepath.Join(t.TempDir(), "nope.hcl"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestFuncJobsUseTheDefaultRegistry(t *testing.T) {
	name := "config-test-default-registry"
	if err := jobs.Register(name, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	path, _ := writeConfig(t, "job \"j\" {\n  schedule = \"@every 1m\"\n  func = \""+name+"\"\n}\n", 0o600)
	if _, err := config.Load(path, config.WithEnviron(nil)); err != nil {
		t.Errorf("Load with the default registry: %v", err)
	}
}
