package config_test

import (
	"slices"
	"strings"
	"testing"
	"time"
)

const envBase = `
log {
  level = "info"
}
admin {
  listen = "127.0.0.1:9090"
}
` + job

func TestEnvOverrides(t *testing.T) {
	cfg := mustLoad(t, envBase,
		"LOCKCRON_LOG__LEVEL=debug",
		"LOCKCRON_LOG__JSON=true",
		"LOCKCRON_ADMIN__LISTEN=127.0.0.1:9999",
		"LOCKCRON_REPLICA_ID=replica-7",
		"LOCKCRON_SHUTDOWN_TIMEOUT=45s",
		"LOCKCRON_LOCK__LEASE=15s",
		"LOCKCRON_LOCK__WAITER_TTL=6s",
		"LOCKCRON_TELEMETRY__TRACES=stdout",
		"PATH=/usr/bin",
	)
	switch {
	case cfg.Log.Level != "debug" || !cfg.Log.JSON:
		t.Errorf("log = %+v, want debug, json", cfg.Log)
	case cfg.Admin.Listen != "127.0.0.1:9999":
		t.Errorf("admin.listen = %q", cfg.Admin.Listen)
	case cfg.ReplicaID != "replica-7":
		t.Errorf("replica_id = %q", cfg.ReplicaID)
	case cfg.ShutdownTimeout != 45*time.Second:
		t.Errorf("shutdown_timeout = %v", cfg.ShutdownTimeout)
	case cfg.Lock.Lease != 15*time.Second || cfg.Lock.WaiterTTL != 6*time.Second:
		t.Errorf("lock = %+v", cfg.Lock)
	case cfg.Telemetry.Traces != "stdout":
		t.Errorf("telemetry = %+v", cfg.Telemetry)
	case cfg.UsesRedis():
		t.Errorf("UsesRedis without redis")
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %q", cfg.Warnings)
	}
}

func TestEnvRedis(t *testing.T) {
	t.Run("REDIS_URL alone", func(t *testing.T) {
		cfg := mustLoad(t, job, "REDIS_URL=redis://10.0.0.1:6379/2")
		if !cfg.UsesRedis() || cfg.Redis.URL.Value() != "redis://10.0.0.1:6379/2" {
			t.Fatalf("Redis = %+v", cfg.Redis)
		}
		if cfg.Redis.KeyPrefix != "lockcron" || cfg.Redis.Timeout != 3*time.Second {
			t.Errorf("defaults not filled in: %+v", cfg.Redis)
		}
	})
	t.Run("LOCKCRON_REDIS__URL wins over REDIS_URL", func(t *testing.T) {
		cfg := mustLoad(t, job, "REDIS_URL=redis://a:6379", "LOCKCRON_REDIS__URL=redis://b:6379")
		if got := cfg.Redis.URL.Value(); got != "redis://b:6379" {
			t.Errorf("url = %q", got)
		}
	})
	t.Run("REDIS_URL over the file's url", func(t *testing.T) {
		cfg := mustLoad(t, "redis {\n  url = \"redis://file:6379\"\n  key_prefix = \"app\"\n}\n"+job, "REDIS_URL=redis://env:6379")
		if got := cfg.Redis.URL.Value(); got != "redis://env:6379" || cfg.Redis.KeyPrefix != "app" {
			t.Errorf("redis = %q, %q", got, cfg.Redis.KeyPrefix)
		}
	})
	t.Run("REDIS_URL replaces the file's Sentinel addrs", func(t *testing.T) {
		cfg := mustLoad(t, "redis {\n  addrs = [\"s1:26379\", \"s2:26379\"]\n  master_name = \"m\"\n}\n"+job, "REDIS_URL=redis://env:6379")
		if cfg.Redis.URL.Value() != "redis://env:6379" || cfg.Redis.Addrs != nil || cfg.Redis.MasterName != "" {
			t.Errorf("redis = %+v", cfg.Redis)
		}
		if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0], "REDIS_URL replaces the file's redis.addrs") {
			t.Errorf("warnings = %q", cfg.Warnings)
		}
	})
	t.Run("addrs from the environment, comma-separated", func(t *testing.T) {
		cfg := mustLoad(t, job, "LOCKCRON_REDIS__ADDRS=a:7000, b:7000,c:7000", "LOCKCRON_REDIS__TIMEOUT=1s")
		if want := []string{"a:7000", "b:7000", "c:7000"}; !slices.Equal(cfg.Redis.Addrs, want) {
			t.Errorf("addrs = %q, want %q", cfg.Redis.Addrs, want)
		}
		if cfg.Redis.Timeout != time.Second {
			t.Errorf("timeout = %v", cfg.Redis.Timeout)
		}
	})
	t.Run("password from the environment", func(t *testing.T) {
		cfg := mustLoad(t, "redis {\n  url = \"redis://h:6379\"\n  password_env = \"MY_PW\"\n}\n"+job, "MY_PW=s3cret-value")
		if cfg.Redis.Password.Value() != "s3cret-value" || cfg.Redis.PasswordEnv != "MY_PW" {
			t.Errorf("password not read from MY_PW")
		}
	})
	t.Run("an empty variable is unset", func(t *testing.T) {
		cfg := mustLoad(t, job, "REDIS_URL=", "LOCKCRON_LOG__LEVEL=")
		if cfg.UsesRedis() || cfg.Log.Level != "info" {
			t.Errorf("empty variables were used: %+v, %q", cfg.Redis, cfg.Log.Level)
		}
	})
}

func TestEnvErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		env  []string
		want []want
	}{{
		name: "bad value",
		src:  envBase,
		env:  []string{"LOCKCRON_LOG__LEVEL=loud"},
		want: []want{{env: "LOCKCRON_LOG__LEVEL", field: "log.level", msg: `"loud" is not one of`}},
	}, {
		name: "bad duration",
		src:  envBase,
		env:  []string{"LOCKCRON_SHUTDOWN_TIMEOUT=10"},
		want: []want{{env: "LOCKCRON_SHUTDOWN_TIMEOUT", field: "shutdown_timeout", msg: `"10" is not a duration`}},
	}, {
		name: "bad number and bool",
		src:  "redis { url = \"redis://h:6379\" }\n" + envBase,
		env:  []string{"LOCKCRON_REDIS__DB=one", "LOCKCRON_LOG__JSON=maybe"},
		want: []want{
			{env: "LOCKCRON_REDIS__DB", field: "redis.db", msg: "Unsuitable value: a number is required"},
			{env: "LOCKCRON_LOG__JSON", field: "log.json", msg: "Unsuitable value: a bool is required"},
		},
	}, {
		name: "lease from the environment too short for redis",
		src:  "redis { url = \"redis://h:6379\" }\n" + envBase,
		env:  []string{"LOCKCRON_LOCK__LEASE=6s"},
		want: []want{{env: "LOCKCRON_LOCK__LEASE", field: "lock.lease", msg: "redis.timeout (3s)"}},
	}, {
		name: "bad REDIS_URL",
		src:  envBase,
		env:  []string{"REDIS_URL=http://h:6379"},
		want: []want{{env: "REDIS_URL", field: "redis.url", msg: `scheme "http"`}},
	}, {
		name: "a redis block made by the environment alone",
		src:  envBase,
		env:  []string{"LOCKCRON_REDIS__PASSWORD=x"},
		want: []want{{env: "LOCKCRON_REDIS__PASSWORD", field: "redis", msg: "needs url or addrs"}},
	}, {
		name: "typo in a nested key",
		src:  envBase,
		env:  []string{"LOCKCRON_LOG__LEVLE=debug"},
		want: []want{{env: "LOCKCRON_LOG__LEVLE", field: "log.levle", msg: `Did you mean "level"?`}},
	}, {
		name: "jobs cannot be set",
		src:  envBase,
		env:  []string{"LOCKCRON_JOB__X__SCHEDULE=@every 5m"},
		want: []want{{env: "LOCKCRON_JOB__X__SCHEDULE", field: "job", msg: "jobs cannot be set from the environment"}},
	}, {
		name: "a block set whole",
		src:  envBase,
		env:  []string{"LOCKCRON_REDIS=redis://h:6379"},
		want: []want{{env: "LOCKCRON_REDIS", field: "redis", msg: `Did you mean to define a block of type "redis"?`}},
	}, {
		name: "a value given levels",
		src:  envBase,
		env:  []string{"LOCKCRON_LOG__LEVEL__X=debug"},
		want: []want{{env: "LOCKCRON_LOG__LEVEL__X", field: "log.level.x", msg: `Blocks of type "level" are not expected here. Did you mean to define argument "level"?`}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, places, err := load(t, tt.src, tt.env...)
			checkErrors(t, err, places, tt.want)
		})
	}
}

func TestEnvUnknownTopLevelIsAWarning(t *testing.T) {
	cfg := mustLoad(t, envBase,
		"LOCKCRON_REPLCA_ID=x", // a typo
		"LOCKCRON_JOB=backup",  // run info of an exec job: not a setting
		"LOCKCRON_TICK=2026-01-01T00:00:00Z",
		"LOCKCRON_CONFIG=/etc/lockcron.hcl",
	)
	if len(cfg.Warnings) != 1 {
		t.Fatalf("warnings = %q, want one", cfg.Warnings)
	}
	if w := cfg.Warnings[0]; !strings.Contains(w, "env LOCKCRON_REPLCA_ID") || !strings.Contains(w, `Did you mean "replica_id"?`) {
		t.Errorf("warning = %q", w)
	}
}
