package daemon

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/internal/redistest"
)

// Both stores keep the latest keep entries, newest first, with their
// fields, and page with before.
func TestAuditStores(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name string
		cfg  *config.Config
	}{
		{"memory", &config.Config{}},
		{"redis", &config.Config{Redis: &config.Redis{URL: config.NewSecret("redis://" + srv.Addr()), KeyPrefix: "t"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.ReplicaID, tc.cfg.Audit = "r1", config.Audit{Keep: 3, MaxAge: time.Hour}
			a, closeAudit, err := openAudit(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer closeAudit()
			ctx := context.Background()
			for i := range 5 {
				if err := a.append(ctx, "pause", fmt.Sprintf("job%d", i), "ops", "127.0.0.1:5555", ""); err != nil {
					t.Fatal(err)
				}
			}
			es, err := a.list(ctx, 10, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != 3 || es[0].Target != "job4" || es[2].Target != "job2" {
				t.Fatalf("list = %+v, want job4, job3, job2", es)
			}
			e := es[0]
			if e.Action != "pause" || e.Actor != "ops" || e.Replica != "r1" || e.Remote != "127.0.0.1:5555" || e.Note != "" || time.Since(e.Time) > time.Minute {
				t.Errorf("entry %+v", e)
			}
			page, err := a.list(ctx, 1, es[0].ID)
			if err != nil || len(page) != 1 || page[0].ID != es[1].ID {
				t.Errorf("list(1, before %s) = %+v, %v; want %s", es[0].ID, page, err, es[1].ID)
			}
		})
	}
}

// A client's retry of an append (same nonce) appends nothing.
func TestAuditAppendRetryOnce(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	defer rdb.Close()
	ctx := context.Background()
	args := []any{10, int64(60000), "nonce-1", "action", "trigger", "target", "j"}
	id1, err1 := auditScript.Run(ctx, rdb, []string{"k:audit"}, args...).Text()
	id2, err2 := auditScript.Run(ctx, rdb, []string{"k:audit"}, args...).Text()
	if err1 != nil || err2 != nil || id1 != id2 {
		t.Fatalf("ids %q %q, errors %v %v", id1, id2, err1, err2)
	}
	if n := rdb.XLen(ctx, "k:audit").Val(); n != 1 {
		t.Errorf("%d entries, want 1", n)
	}
	if ttl := rdb.PTTL(ctx, "k:audit").Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("PTTL %v, want max_age", ttl)
	}
}

// In memory, entries older than max_age are dropped and not listed.
func TestAuditMemoryMaxAge(t *testing.T) {
	m := &memAudit{}
	now := time.Now()
	m.append(AuditEntry{Action: "pause"}, 10, time.Hour, now.Add(-2*time.Hour))
	m.append(AuditEntry{Action: "resume"}, 10, time.Hour, now)
	if len(m.entries) != 1 || m.entries[0].Action != "resume" {
		t.Errorf("entries %+v, want the resume only", m.entries)
	}
	if es := m.list(10, "", now.Add(time.Minute)); len(es) != 0 {
		t.Errorf("list past max_age = %+v", es)
	}
}

// GET /api/audit refuses a bad limit or before, naming it.
func TestAuditQuery(t *testing.T) {
	for _, tc := range []struct{ q, want string }{
		{"limit=abc", "parameter limit"},
		{"limit=0", "parameter limit"},
		{"limit=", "parameter limit"},
		{"limit=1001", "parameter limit"},
		{"before=yesterday", "parameter before"},
		{"before=", "parameter before"},
	} {
		_, _, err := auditQuery(httptest.NewRequest("GET", "/api/audit?"+tc.q, nil), defaultAudit)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.q, err, tc.want)
		}
	}
	if l, b, err := auditQuery(httptest.NewRequest("GET", "/api/audit?limit=2&before=1-0", nil), defaultAudit); err != nil || l != 2 || b != "1-0" {
		t.Errorf("limit=2&before=1-0: %d %q %v", l, b, err)
	}
}
