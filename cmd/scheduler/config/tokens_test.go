package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/jobs/execjob"
)

// Scoped admin tokens: token "name" { scope, value_env } blocks beside the
// single token, which has scope admin.
func TestTokenBlocks(t *testing.T) {
	cfg := mustLoad(t, `admin {
  token_env   = "ADMIN_TOK"
  public_read = true
  token "viewer" {
    scope     = "read"
    value_env = "VIEW_TOK"
  }
  token "oncall" {
    scope     = "operate"
    value_env = "OPS_TOK"
  }
  token "deploy" {
    scope     = "admin"
    value_env = "DEPLOY_TOK"
  }
}
`+job, "ADMIN_TOK=admin-secret", "VIEW_TOK=view-secret", "OPS_TOK=ops-secret", "DEPLOY_TOK=deploy-secret")
	type tok struct {
		name, scope, value, env string
		line                    int
	}
	var got []tok
	for _, t := range cfg.Admin.Tokens {
		got = append(got, tok{t.Name, t.Scope.String(), t.Value.Value(), t.ValueEnv, t.Pos.Line})
	}
	want := []tok{
		{config.LegacyTokenName, "admin", "admin-secret", "ADMIN_TOK", 2},
		{"viewer", "read", "view-secret", "VIEW_TOK", 4},
		{"oncall", "operate", "ops-secret", "OPS_TOK", 8},
		{"deploy", "admin", "deploy-secret", "DEPLOY_TOK", 12},
	}
	if !slices.Equal(got, want) {
		t.Errorf("tokens:\n got %+v\nwant %+v", got, want)
	}
	if !cfg.Admin.PublicRead {
		t.Errorf("public_read is false")
	}
	if s := cfg.Redact("Bearer view-secret, ops-secret"); strings.Contains(s, "secret") {
		t.Errorf("Redact leaves a token: %q", s)
	}
	// The tokens' variables are not passed on to exec jobs.
	js, err := cfg.SchedulerJobs(testRegistry(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	x, ok := js[0].Run.(*execjob.Exec)
	if !ok {
		t.Fatalf("job x runs %T", js[0].Run)
	}
	for _, v := range []string{"ADMIN_TOK", "VIEW_TOK", "OPS_TOK", "DEPLOY_TOK"} {
		if !slices.Contains(x.Unset, v) {
			t.Errorf("exec jobs inherit %s: unset %q", v, x.Unset)
		}
	}
	if w := strings.Join(cfg.Warnings, "\n"); w != "" {
		t.Errorf("warnings: %s", w)
	}

	// Without tokens, reads are open, and public_read is pointless.
	cfg = mustLoad(t, "admin {\n  public_read = true\n}\n"+job)
	if len(cfg.Admin.Tokens) != 0 || !strings.Contains(strings.Join(cfg.Warnings, "\n"), "admin.public_read: true, but there is no token") {
		t.Errorf("public_read without tokens: tokens %v, warnings %q", cfg.Admin.Tokens, cfg.Warnings)
	}
}

// Bad token blocks: each error at its place, naming the block, never a
// token's value; nothing is loaded.
func TestTokenErrors(t *testing.T) {
	cfg, places, err := load(t, `admin {
  token = "legacy-value"
  token "viewer" {
    @@scope     = "superuser"
    value_env = "VIEW_TOK"
  }
  @@token "noenv" {
    scope = "read"
  }
  @@token "noscope" {
    value_env = "OPS_TOK"
  }
  token "unset" {
    scope     = "operate"
    @@value_env = "LOCKCRON_TEST_UNSET_TOKEN"
  }
  token "empty" {
    scope     = "operate"
    @@value_env = "EMPTY_TOK"
  }
  token "copy" {
    scope     = "admin"
    @@value_env = "COPY_TOK"
  }
  token "legacy-copy" {
    scope     = "admin"
    @@value_env = "LEGACY_COPY_TOK"
  }
  @@token "viewer" {
    scope     = "read"
    value_env = "OTHER_TOK"
  }
  @@token "admin.token" {
    scope     = "read"
    value_env = "THIRD_TOK"
  }
}
`+job, "VIEW_TOK=view-secret", "OPS_TOK=ops-secret", "EMPTY_TOK=", "COPY_TOK=view-secret", "LEGACY_COPY_TOK=legacy-value",
		"OTHER_TOK=other-secret", "THIRD_TOK=third-secret", "LOCKCRON_ADMIN__TOKEN__X__SCOPE=read")
	if cfg != nil {
		t.Errorf("a config with bad tokens loaded")
	}
	checkErrors(t, err, places, []want{
		{mark: 1, field: "admin.token.viewer.scope", msg: `"superuser" is not one of "read", "operate", "admin"`},
		{mark: 2, field: "admin.token.noenv", msg: "missing value_env"},
		{mark: 3, field: "admin.token.noscope", msg: `missing scope: give scope = "read", "operate", "admin"`},
		{mark: 4, field: "admin.token.unset.value_env", msg: `the environment variable "LOCKCRON_TEST_UNSET_TOKEN" is not set, or empty`},
		{mark: 5, field: "admin.token.empty.value_env", msg: `the environment variable "EMPTY_TOK" is not set, or empty`},
		{mark: 6, field: "admin.token.copy.value_env", msg: `"COPY_TOK" holds the same token as token "viewer" (line 3)`},
		{mark: 7, field: "admin.token.legacy-copy.value_env", msg: `"LEGACY_COPY_TOK" holds the same token as admin.token (line 2)`},
		{mark: 8, field: "admin.token.viewer", msg: `a token "viewer" is at line 3 already`},
		{mark: 9, field: "admin.token.admin.token", msg: `a token "admin.token" is at line 2 already`},
		{env: "LOCKCRON_ADMIN__TOKEN__X__SCOPE", field: "admin.token", msg: "token blocks cannot be set from the environment"},
	})
	for _, secret := range []string{"legacy-value", "view-secret", "ops-secret", "other-secret"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("an error shows a token: %v", err)
		}
	}

	// A command that only reads does not need the tokens' variables.
	path, _ := writeConfig(t, "admin {\n  token \"ops\" {\n    scope = \"operate\"\n    value_env = \"LOCKCRON_TEST_UNSET_TOKEN\"\n  }\n}\n"+job, 0o600)
	cfg, err = config.Load(path, config.WithEnviron(nil), config.WithRegistry(testRegistry(t)), config.ForReading())
	if err != nil || len(cfg.Admin.Tokens) != 0 || !strings.Contains(strings.Join(cfg.Warnings, "\n"), "LOCKCRON_TEST_UNSET_TOKEN") {
		t.Errorf("ForReading with an unset value_env: %v, %+v", err, cfg)
	}
}
