package config_test

import (
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// The audit block reaches the Config; left out, its defaults do.
func TestAuditRetention(t *testing.T) {
	cfg := mustLoad(t, `
audit {
  keep    = 50
  max_age = "24h"
}
`+job)
	if cfg.Audit != (config.Audit{Keep: 50, MaxAge: 24 * time.Hour}) {
		t.Errorf("Audit = %+v, want 50 and 24h", cfg.Audit)
	}
	if d := mustLoad(t, job); d.Audit != (config.Audit{Keep: 1000, MaxAge: 2160 * time.Hour}) {
		t.Errorf("without an audit block: %+v, want 1000 and 2160h", d.Audit)
	}
	if e := mustLoad(t, job, "LOCKCRON_AUDIT__KEEP=7"); e.Audit.Keep != 7 {
		t.Errorf("LOCKCRON_AUDIT__KEEP=7: keep %d", e.Audit.Keep)
	}
}

func TestAuditRetentionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		want        want
	}{
		{"negative keep", "audit {\n  @@keep = -1\n}\n", want{mark: 1, field: "audit.keep", msg: "-1: the audit trail keeps at least 1 entry"}},
		{"zero keep", "audit {\n  @@keep = 0\n}\n", want{mark: 1, field: "audit.keep", msg: "keeps at least 1 entry"}},
		{"max_age not a duration", "audit {\n  @@max_age = \"x\"\n}\n", want{mark: 1, field: "audit.max_age", msg: `"x" is not a duration`}},
		{"max_age too short", "audit {\n  @@max_age = \"10ms\"\n}\n", want{mark: 1, field: "audit.max_age", msg: "at least 1s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, places, err := load(t, tc.block+job)
			checkErrors(t, err, places, []want{tc.want})
		})
	}
}
