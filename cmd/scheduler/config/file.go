package config

import "github.com/hashicorp/hcl/v2"

// The schema: what a config file may hold, as gohcl decodes it. HCL checks
// the names (an unknown one gets "Did you mean ...?"), the shapes (block or
// argument, labels) and the types; every argument is optional here, the
// checks of values (and of what is missing) are the decoder's. Durations
// are strings ("30s"). The environment is decoded into the same structs,
// after the file (env.go).

type (
	fileConfig struct {
		ReplicaID       string        `hcl:"replica_id,optional"`
		ShutdownTimeout string        `hcl:"shutdown_timeout,optional"`
		Watch           bool          `hcl:"watch,optional"`
		Fleet           *fleetBlock   `hcl:"fleet,block"`
		Redis           *redisBlock   `hcl:"redis,block"`
		Lock            *lockBlock    `hcl:"lock,block"`
		Admin           *adminBlock   `hcl:"admin,block"`
		Telemetry       *Telemetry    `hcl:"telemetry,block"`
		Log             *Log          `hcl:"log,block"`
		History         *historyBlock `hcl:"history,block"`
		Audit           *historyBlock `hcl:"audit,block"`
		Notify          []notifyBlock `hcl:"notify,block"`
		Jobs            []jobBlock    `hcl:"job,block"`

		Calendars []calendarBlock `hcl:"calendar,block"`
	}
	fleetBlock struct {
		Ranking       *bool  `hcl:"ranking,optional"`
		ClaimFallback string `hcl:"claim_fallback,optional"`
		MemberTTL     string `hcl:"member_ttl,optional"`
	}
	redisBlock struct {
		URL            string    `hcl:"url,optional"`
		Addrs          []string  `hcl:"addrs,optional"`
		MasterName     string    `hcl:"master_name,optional"`
		Username       string    `hcl:"username,optional"`
		Password       string    `hcl:"password,optional"`
		PasswordEnv    string    `hcl:"password_env,optional"`
		DB             int       `hcl:"db,optional"`
		KeyPrefix      string    `hcl:"key_prefix,optional"`
		Timeout        string    `hcl:"timeout,optional"`
		ConnectTimeout string    `hcl:"connect_timeout,optional"`
		TLS            *tlsBlock `hcl:"tls,block"`
	}
	tlsBlock struct {
		Enabled            *bool  `hcl:"enabled,optional"`
		CAFile             string `hcl:"ca_file,optional"`
		CertFile           string `hcl:"cert_file,optional"`
		KeyFile            string `hcl:"key_file,optional"`
		ServerName         string `hcl:"server_name,optional"`
		InsecureSkipVerify bool   `hcl:"insecure_skip_verify,optional"`
	}
	lockBlock struct {
		Lease      string    `hcl:"lease,optional"`
		WaiterTTL  string    `hcl:"waiter_ttl,optional"`
		ReplicaAck *ackBlock `hcl:"replica_ack,block"`
	}
	ackBlock struct {
		Replicas int    `hcl:"replicas,optional"`
		Timeout  string `hcl:"timeout,optional"`
	}
	adminBlock struct {
		Listen     string `hcl:"listen,optional"`
		Token      string `hcl:"token,optional"`
		TokenEnv   string `hcl:"token_env,optional"`
		PublicRead bool   `hcl:"public_read,optional"`
		// Tokens are the token "name" { ... } blocks: an argument and a
		// block may share a name in HCL, so the single token stays.
		Tokens []tokenBlock `hcl:"token,block"`
	}
	tokenBlock struct {
		Name     string    `hcl:"name,label"`
		Scope    string    `hcl:"scope,optional"`
		ValueEnv string    `hcl:"value_env,optional"`
		At       hcl.Range `hcl:",type_range"`
	}
	historyBlock struct {
		Keep   int    `hcl:"keep,optional"`
		MaxAge string `hcl:"max_age,optional"`
	}
	notifyBlock struct {
		Name    string    `hcl:"name,label"`
		URL     string    `hcl:"url,optional"`
		URLEnv  string    `hcl:"url_env,optional"`
		Format  string    `hcl:"format,optional"`
		On      []string  `hcl:"on,optional"`
		Jobs    []string  `hcl:"jobs,optional"`
		Timeout string    `hcl:"timeout,optional"`
		Retries int       `hcl:"retries,optional"`
		At      hcl.Range `hcl:",type_range"`
	}
	calendarBlock struct {
		Name     string     `hcl:"name,label" json:"name"`
		Dates    []string   `hcl:"dates,optional" json:"dates,omitempty"`
		Ranges   [][]string `hcl:"ranges,optional" json:"ranges,omitempty"`
		Cron     []string   `hcl:"cron,optional" json:"cron,omitempty"`
		TimeZone string     `hcl:"time_zone,optional" json:"time_zone,omitempty"`
		At       hcl.Range  `hcl:",type_range" json:"-"`
	}
	// jobBlock is a job block as written. Its JSON (without the place) is
	// what its digest is taken of.
	jobBlock struct {
		Name             string     `hcl:"name,label" json:"name"`
		Schedule         string     `hcl:"schedule,optional" json:"schedule,omitempty"`
		TimeZone         string     `hcl:"time_zone,optional" json:"time_zone,omitempty"`
		Jitter           string     `hcl:"jitter,optional" json:"jitter,omitempty"`
		LockKind         string     `hcl:"lock_kind,optional" json:"lock_kind,omitempty"`
		OldLock          *string    `hcl:"lock,optional" json:"lock,omitempty"` // lock_kind's old name: refused
		LockName         string     `hcl:"lock_name,optional" json:"lock_name,omitempty"`
		Timeout          string     `hcl:"timeout,optional" json:"timeout,omitempty"`
		Overlap          string     `hcl:"overlap,optional" json:"overlap,omitempty"`
		Misfire          string     `hcl:"misfire,optional" json:"misfire,omitempty"`
		MisfireGrace     string     `hcl:"misfire_grace,optional" json:"misfire_grace,omitempty"`
		StartDeadline    string     `hcl:"start_deadline,optional" json:"start_deadline,omitempty"`
		AlertAfter       string     `hcl:"alert_after,optional" json:"alert_after,omitempty"`
		PauseAfter       int        `hcl:"pause_after_failures,optional" json:"pause_after_failures,omitempty"`
		Retries          int        `hcl:"retries,optional" json:"retries,omitempty"`
		Backoff          string     `hcl:"backoff,optional" json:"backoff,omitempty"`
		OnShutdown       string     `hcl:"on_shutdown,optional" json:"on_shutdown,omitempty"`
		MaxConcurrency   int        `hcl:"max_concurrency,optional" json:"max_concurrency,omitempty"`
		ConcurrencyGroup string     `hcl:"concurrency_group,optional" json:"concurrency_group,omitempty"`
		HistoryKeep      int        `hcl:"history_keep,optional" json:"history_keep,omitempty"`
		HistoryMaxAge    string     `hcl:"history_max_age,optional" json:"history_max_age,omitempty"`
		Exclude          []string   `hcl:"exclude,optional" json:"exclude,omitempty"`
		Exec             *execBlock `hcl:"exec,block" json:"exec,omitempty"`
		HTTP             *httpBlock `hcl:"http,block" json:"http,omitempty"`
		Func             *string    `hcl:"func,optional" json:"func,omitempty"`
		Replicas         string     `hcl:"replicas,optional" json:"replicas,omitempty"`
		Params           []string   `hcl:"params,optional" json:"params,omitempty"`
		After            []string   `hcl:"after,optional" json:"after,omitempty"`
		When             string     `hcl:"when,optional" json:"when,omitempty"`
		At               hcl.Range  `hcl:",type_range" json:"-"`
	}
	execBlock struct {
		Command []string          `hcl:"command,optional" json:"command"`
		Env     map[string]string `hcl:"env,optional" json:"env,omitempty"`
		Dir     string            `hcl:"dir,optional" json:"dir,omitempty"`
		Grace   string            `hcl:"grace,optional" json:"grace,omitempty"`
	}
	httpBlock struct {
		URL          string            `hcl:"url,optional" json:"url"`
		Method       string            `hcl:"method,optional" json:"method,omitempty"`
		Headers      map[string]string `hcl:"headers,optional" json:"headers,omitempty"`
		Body         string            `hcl:"body,optional" json:"body,omitempty"`
		ExpectStatus []int             `hcl:"expect_status,optional" json:"expect_status,omitempty"`
	}
)
