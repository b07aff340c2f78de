package daemon

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// Which replicas stand out: the live ones whose config differs from most
// live replicas'; on a tie, from the reader's own. Gone and stopped
// replicas neither count towards most nor are marked: after a rollout,
// those stopped on the old config are not a change half rolled out. A
// report that does not decode is shown with its error, marked neither way.
func TestReplicasJSONMarksOtherConfigs(t *testing.T) {
	now := time.Now()
	rep := func(id, digest string, gone bool) fleet.Replica {
		r := fleet.Replica{ID: id, Seen: now, Report: fmt.Sprintf(`{"version":"v1","config_digest":%q,"jobs":["a"]}`, digest)}
		if gone {
			r.Gone = now
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		rs    []fleet.Replica
		own   string
		other string // the ids marked other_config, in order
	}{
		{"all alike", []fleet.Replica{rep("r1", "A", false), rep("r2", "A", false)}, "A", ""},
		{"one apart", []fleet.Replica{rep("r1", "A", false), rep("r2", "A", false), rep("r3", "B", false)}, "B", "r3"},
		{"tie: the reader's own is most", []fleet.Replica{rep("r1", "A", false), rep("r3", "B", false)}, "B", "r1"},
		{"tie, the reader on neither: the least", []fleet.Replica{rep("r1", "B", false), rep("r3", "A", false)}, "C", "r1"},
		{"gone ones neither count nor are marked", []fleet.Replica{rep("r1", "B", false), rep("r2", "A", true), rep("r3", "A", true)}, "A", ""},
		{"a live one apart, beside gone ones", []fleet.Replica{rep("r1", "A", false), rep("r2", "A", false), rep("r3", "B", false), rep("r4", "B", true), rep("r5", "C", true)}, "A", "r3"},
		{"none live: none marked", []fleet.Replica{rep("r1", "B", true)}, "A", ""},
		{"a report that does not decode", []fleet.Replica{rep("r1", "A", false), {ID: "r2", Seen: now, Report: "{"}}, "A", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var other []string
			for _, r := range replicasJSON(tc.rs, tc.own, "v1") {
				if r.OtherConfig {
					other = append(other, r.ID)
				}
				if r.OtherVersion {
					t.Errorf("%s: other_version, all run v1", r.ID)
				}
				if bad := r.ID == "r2" && strings.Contains(tc.name, "decode"); bad != (r.Error != "") {
					t.Errorf("%s: error %q", r.ID, r.Error)
				}
			}
			if got := strings.Join(other, " "); got != tc.other {
				t.Errorf("other_config: %q, want %q", got, tc.other)
			}
		})
	}
}

// A replica's report names its first replicaListCap jobs and says how many
// it runs; the table and the page say how many more.
func TestReplicaReportCapsItsJobs(t *testing.T) {
	locks, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	s, err := scheduler.New(locks)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = replicaListCap + 10
	for i := range n {
		if err := s.Add(scheduler.Job{Name: fmt.Sprintf("job-%03d", i), Schedule: "@every 1h", Run: jobs.Func(func(context.Context) error { return nil })}); err != nil {
			t.Fatal(err)
		}
	}
	rp := &reporter{store: fleet.New(locks), id: "r1", s: s, log: hclog.NewNullLogger()}
	report := rp.report()
	if len(report) > 2000 {
		t.Errorf("a report of %d bytes: %s", len(report), report)
	}
	rs := replicasJSON([]fleet.Replica{{ID: "r1", Report: report}}, "", Version())
	if len(rs) != 1 || len(rs[0].Jobs) != replicaListCap || rs[0].Jobs[0] != "job-000" || rs[0].JobCount != n || rs[0].RunningCount != 0 {
		t.Fatalf("replicas: %+v; want the first %d of %d jobs", rs, replicaListCap, n)
	}
	var b strings.Builder
	if err := printReplicas(&b, rs); err != nil || !strings.Contains(b.String(), "job-049 +10 more") {
		t.Errorf("scheduler replicas: %v\n%s", err, b.String())
	}
	d := &pageData{Title: "replicas", Nav: "replicas", Replicas: rs, Now: time.Now()}
	var page strings.Builder
	if err := pages["replicas.html"].ExecuteTemplate(&page, "live", d); err != nil || !strings.Contains(page.String(), "job-049</a><span class=\"dim\"> &#43;10 more</span>") {
		t.Errorf("the Replicas page: %v\n%s", err, page.String())
	}
}

// The reporter does not hold up the scheduler's start: with a store that
// never answers, start returns at once (it used to wait up to 5s for the
// first report), and stop within replicaStopTimeout and a little.
func TestReporterStartsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		<-accepted
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: true, MaxRetries: -1})
	defer rdb.Close()
	locks, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer locks.Close()
	s, err := scheduler.New(locks)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rp := &reporter{store: fleet.New(locks), id: "r1", s: s, log: hclog.NewNullLogger()}
	start := time.Now()
	stop := rp.start()
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("start took %v with a store that does not answer: it holds up the scheduler", d)
	}
	start = time.Now()
	stop()
	if d := time.Since(start); d > replicaStopTimeout+5*time.Second {
		t.Errorf("stop took %v, want about %v at most", d, replicaStopTimeout)
	}
}
