package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

func TestRedisConnectTimeout(t *testing.T) {
	tests := []struct {
		name string
		src  string
		env  []string
		want time.Duration
	}{{
		name: "default",
		src:  "redis { url = \"redis://h:6379\" }\n" + job,
		want: config.DefaultConnectTimeout,
	}, {
		name: "default with REDIS_URL",
		src:  job,
		env:  []string{"REDIS_URL=redis://h:6379"},
		want: 30 * time.Second,
	}, {
		name: "from the file",
		src:  "redis {\n  url = \"redis://h:6379\"\n  connect_timeout = \"2m\"\n}\n" + job,
		want: 2 * time.Minute,
	}, {
		name: "from the environment, over the file",
		src:  "redis {\n  url = \"redis://h:6379\"\n  connect_timeout = \"2m\"\n}\n" + job,
		env:  []string{"LOCKCRON_REDIS__CONNECT_TIMEOUT=1500ms"},
		want: 1500 * time.Millisecond,
	}, {
		name: "shorter than redis.timeout is allowed",
		src:  "redis {\n  url = \"redis://h:6379\"\n  timeout = \"5s\"\n  connect_timeout = \"1s\"\n}\n" + job,
		want: time.Second,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustLoad(t, tt.src, tt.env...)
			if !cfg.UsesRedis() {
				t.Fatal("no redis")
			}
			if got := cfg.Redis.ConnectTimeout; got != tt.want {
				t.Errorf("ConnectTimeout = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRedisConnectTimeoutErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		env  []string
		want []want
	}{{
		name: "zero",
		src:  "redis {\n  url = \"redis://h:6379\"\n  @@connect_timeout = \"0s\"\n}\n" + job,
		want: []want{{mark: 1, field: "redis.connect_timeout", msg: "zero: must be positive"}},
	}, {
		name: "negative",
		src:  "redis {\n  url = \"redis://h:6379\"\n  @@connect_timeout = \"-30s\"\n}\n" + job,
		want: []want{{mark: 1, field: "redis.connect_timeout", msg: "negative: must be positive"}},
	}, {
		name: "not a duration",
		src:  "redis {\n  url = \"redis://h:6379\"\n  @@connect_timeout = \"30\"\n}\n" + job,
		want: []want{{mark: 1, field: "redis.connect_timeout", msg: `"30" is not a duration`}},
	}, {
		name: "a bool",
		src:  "redis {\n  url = \"redis://h:6379\"\n  @@connect_timeout = true\n}\n" + job,
		want: []want{{mark: 1, field: "redis.connect_timeout", msg: `"true" is not a duration`}},
	}, {
		name: "from the environment",
		src:  "redis { url = \"redis://h:6379\" }\n" + job,
		env:  []string{"LOCKCRON_REDIS__CONNECT_TIMEOUT=forever"},
		want: []want{{env: "LOCKCRON_REDIS__CONNECT_TIMEOUT", field: "redis.connect_timeout", msg: `"forever" is not a duration`}},
	}, {
		name: "set twice",
		src:  "redis {\n  url = \"redis://h:6379\"\n  connect_timeout = \"1s\"\n  @@connect_timeout = \"2s\"\n}\n" + job,
		want: []want{{mark: 1, field: "redis", msg: `Attribute redefined: The argument "connect_timeout" was already set at `}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, places, err := load(t, tt.src, tt.env...)
			checkErrors(t, err, places, tt.want)
		})
	}
}

// The renewal budget, redis.timeout plus lock.replica_ack.timeout, must be
// shorter than lease/2: equal is refused, just under is accepted.
func TestRenewalBudgetBoundary(t *testing.T) {
	tests := []struct {
		name    string
		timeout string // redis.timeout; "" for the default (3s)
		lease   string // lock.lease; "" for the default (30s)
		ack     string // lock.replica_ack.timeout; "" for no replica_ack
		ok      bool
		field   string // of the error, when !ok
	}{
		{name: "timeout at lease/2", timeout: "3s", lease: "6s", field: "lock.lease"},
		{name: "timeout just under lease/2", timeout: "2999ms", lease: "6s", ok: true},
		{name: "lease just over twice the timeout", timeout: "3s", lease: "6001ms", ok: true},
		{name: "timeout over lease/3 but under lease/2", timeout: "2500ms", lease: "6s", ok: true},
		{name: "default lease, timeout at 15s", timeout: "15s", field: "redis.timeout"},
		{name: "default lease, timeout just under 15s", timeout: "14999ms", ok: true},
		{name: "default timeout, lease at 6s", lease: "6s", field: "lock.lease"},
		{name: "default timeout, lease just over 6s", lease: "6001ms", ok: true},
		{name: "with replica ack, at lease/2", timeout: "2s", lease: "4400ms", ack: "200ms", field: "lock.lease"},
		{name: "with replica ack, just under lease/2", timeout: "2s", lease: "4400ms", ack: "199ms", ok: true},
		{name: "replica ack alone over the limit", timeout: "1s", lease: "4s", ack: "1s", field: "lock.lease"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "redis {\n  url = \"redis://h:6379\"\n"
			if tt.timeout != "" {
				src += "  timeout = \"" + tt.timeout + "\"\n"
			}
			src += "}\nlock {\n"
			if tt.lease != "" {
				src += "  lease = \"" + tt.lease + "\"\n"
			}
			if tt.ack != "" {
				src += "  replica_ack {\n    timeout = \"" + tt.ack + "\"\n  }\n"
			}
			src += "}\n" + job
			cfg, _, err := load(t, src)
			if tt.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if cfg.Lock.Lease/2 <= cfg.Redis.Timeout {
					t.Errorf("accepted lease %v with timeout %v", cfg.Lock.Lease, cfg.Redis.Timeout)
				}
				return
			}
			es := errorList(t, err)
			if len(es) != 1 || es[0].Field != tt.field {
				t.Fatalf("want one error on %s, got:\n%v", tt.field, err)
			}
			for _, s := range []string{"redis.timeout", "half the lease", "9/10"} {
				if !strings.Contains(es[0].Msg, s) {
					t.Errorf("%q does not say %q", es[0].Msg, s)
				}
			}
		})
	}
}
