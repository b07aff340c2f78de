package main_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/daemon"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
)

// apiReplicas reads GET /api/replicas of the replica at addr.
func apiReplicas(t *testing.T, addr string) []daemon.ReplicaJSON {
	t.Helper()
	st, b, _ := httpDo(t, "GET", "http://"+addr+"/api/replicas", "")
	var rs []daemon.ReplicaJSON
	if st != 200 || json.Unmarshal(b, &rs) != nil {
		t.Fatalf("GET /api/replicas of %s: %d %s", addr, st, b)
	}
	return rs
}

// replicaOf is the replica id in rs, or the zero ReplicaJSON.
func replicaOf(rs []daemon.ReplicaJSON, id string) daemon.ReplicaJSON {
	for _, r := range rs {
		if r.ID == id {
			return r
		}
	}
	return daemon.ReplicaJSON{}
}

// stable is what two reads of one replica agree on, a few seconds apart:
// all but its last heartbeat and its runs, which move while it lives.
func stable(r daemon.ReplicaJSON) string {
	gone := "-"
	if r.GoneAt != nil {
		gone = r.GoneAt.Format(time.RFC3339Nano) + " last seen " + r.LastSeen.Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("%s %s %s %s other_config=%t other_version=%t started %s jobs %v gone %s",
		r.ID, r.State, r.Version, r.ConfigDigest, r.OtherConfig, r.OtherVersion, r.StartedAt.Format(time.RFC3339Nano), r.Jobs, gone)
}

// The fleet in view, on three replica processes: r1 and r2 on one config,
// r3 on another (a job's schedule differs). Each lists itself and the
// others, with its version, config digest, jobs and the run under way;
// r3 stands apart (other_config). r2 stopped with SIGTERM shows as
// stopped at once, with when; r3 killed shows as gone after it missed its
// heartbeats. GET /api/replicas and `scheduler replicas -json` agree, the
// table marks the same, and the Replicas page in headless Chromium lists
// them, marking the other config and the gone ones. On a tie of configs
// (r1 and r3 live), the side of the one that answers counts as most.
func TestReplicasInView(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	dir := t.TempDir()
	base := header(srv.Addr(), "5s") + execJob("slow", "@every 1s", "1s", `sleep 600`)
	cfgA := writeConfig(t, dir, base+execJob("tick", "@every 1s", "1s", `true`))
	cfgB := filepath.Join(dir, "other.hcl")
	if err := os.WriteFile(cfgB, []byte(base+execJob("tick", "@every 2s", "1s", `true`)), 0o600); err != nil {
		t.Fatal(err)
	}
	r1 := startReplicaNoWait(t, dir, cfgA, "r1")
	r2 := startReplicaNoWait(t, dir, cfgA, "r2")
	r3 := startProc(t, "r3", dir, baseEnv("LOCKCRON_REPLICA_ID=r3"), schedBin, "run", "-config", cfgB)
	for _, p := range []*proc{r1, r2, r3} {
		p.waitReady(t)
	}

	// Every replica lists the three, live, with their jobs; one runs slow.
	var rs []daemon.ReplicaJSON
	testkit.Eventually(t, 30*time.Second, "three live replicas, one running slow", func() bool {
		rs = apiReplicas(t, r1.admin)
		running := 0
		for _, r := range rs {
			if r.State != "live" {
				return false
			}
			for _, x := range r.Running {
				if x.Job == "slow" && !x.Tick.IsZero() && !x.Since.Before(x.Tick) {
					running++
				}
			}
		}
		return len(rs) == 3 && running == 1
	})
	a, b := replicaOf(rs, "r1"), replicaOf(rs, "r3")
	if a.ConfigDigest == "" || a.ConfigDigest == b.ConfigDigest || replicaOf(rs, "r2").ConfigDigest != a.ConfigDigest {
		t.Fatalf("config digests: r1 %q, r2 %q, r3 %q; want r1's and r2's alike, r3's another", a.ConfigDigest, replicaOf(rs, "r2").ConfigDigest, b.ConfigDigest)
	}
	for _, r := range rs {
		if r.OtherConfig != (r.ID == "r3") || r.OtherVersion || !strings.HasPrefix(r.Version, "devel") || r.StartedAt.IsZero() || r.StartedAt.After(r.LastSeen) ||
			!slices.Equal(r.Jobs, []string{"slow", "tick"}) || r.JobCount != 2 || r.Error != "" || r.GoneAt != nil {
			t.Errorf("replica %s: %+v; want live, started before its last heartbeat, version devel, jobs slow and tick, other_config only for r3", r.ID, r)
		}
	}

	// r2 stops cleanly: stopped at once, with when.
	r2.signal(t, syscall.SIGTERM)
	if code := r2.awaitExit(t, 30*time.Second); code != 0 {
		t.Fatalf("r2 exited %d after SIGTERM", code)
	}
	rs = apiReplicas(t, r1.admin)
	stopped := replicaOf(rs, "r2")
	if stopped.State != "stopped" || stopped.GoneAt == nil || !stopped.GoneAt.Equal(stopped.LastSeen) || time.Since(*stopped.GoneAt) > time.Minute || len(stopped.Running) != 0 {
		t.Fatalf("r2 after its stop: %+v; want stopped, gone at its last heartbeat, running nothing", stopped)
	}
	// r1 and r3 live, on two configs: each one's API counts its own as most.
	if r := replicaOf(rs, "r3"); !r.OtherConfig || replicaOf(rs, "r1").OtherConfig || stopped.OtherConfig {
		t.Errorf("r1's view: %+v; want r3 on another config, r1 and r2 not", rs)
	}
	if rs3 := apiReplicas(t, r3.admin); !replicaOf(rs3, "r1").OtherConfig || replicaOf(rs3, "r3").OtherConfig {
		t.Errorf("r3's view on a tie: %+v; want r1 on another config than r3's", rs3)
	}

	// The command, through Redis with r1's config, agrees with r1's API.
	res := mustCLI(t, 0, dir, "replicas", "-json", "-config", cfgA)
	var cliRs []daemon.ReplicaJSON
	if err := json.Unmarshal([]byte(res.stdout), &cliRs); err != nil {
		t.Fatalf("scheduler replicas -json: %v\n%s", err, res.stdout)
	}
	rs = apiReplicas(t, r1.admin)
	if len(cliRs) != len(rs) {
		t.Fatalf("scheduler replicas -json lists %d, the API %d:\n%s", len(cliRs), len(rs), res.stdout)
	}
	for i := range rs {
		if got, want := stable(cliRs[i]), stable(rs[i]); got != want {
			t.Errorf("scheduler replicas -json and GET /api/replicas differ:\n  cli: %s\n  api: %s", got, want)
		}
	}
	table := mustCLI(t, 0, dir, "replicas", "-config", cfgA).stdout
	lines := strings.Split(table, "\n")
	if len(lines) < 4 || !strings.HasPrefix(lines[0], "REPLICA") {
		t.Fatalf("scheduler replicas:\n%s", table)
	}
	for _, l := range lines[1:4] {
		f := strings.Fields(l)
		switch {
		case f[0] == "r1" && (f[1] != "live" || strings.Contains(l, "(other)")),
			f[0] == "r2" && (f[1] != "stopped" || strings.Contains(l, "(other)")),
			f[0] == "r3" && (f[1] != "live" || !strings.Contains(l, b.ConfigDigest[:12]+" (other)")):
			t.Errorf("scheduler replicas: row %q wrong:\n%s", l, table)
		}
	}

	// The Replicas page of r1 lists the three, marks r3's config and r2
	// gone.
	ctx := newBrowser(t)
	open(t, ctx, "http://"+r1.admin+"/replicas")
	sel := func(id string) string {
		return fmt.Sprintf(`document.querySelector('#replicas tr[data-replica=%s]')`, strconv.Quote(id))
	}
	waitJS(t, ctx, "three rows, r3 on another config, r2 stopped",
		`document.querySelectorAll('#replicas tbody tr').length === 3 && `+
			sel("r3")+`.dataset.otherConfig === 'true' && `+sel("r3")+`.innerText.includes('other config') && `+
			sel("r1")+`.dataset.otherConfig === 'false' && !`+sel("r1")+`.innerText.includes('other config') && `+
			sel("r2")+`.dataset.state === 'stopped' && `+sel("r2")+`.classList.contains('gone') && `+sel("r2")+`.innerText.includes('since') && `+
			sel("r1")+`.innerText.includes('this page') && `+sel("r1")+`.innerText.includes('slow')`)

	// r3 is killed: gone once it misses its heartbeats (15s after its
	// last), with when it was last seen, no longer marked as another
	// config (a gone replica is not a change half rolled out); the page
	// shows it gone too.
	r3.signal(t, syscall.SIGKILL)
	r3.awaitExit(t, 10*time.Second)
	var gone daemon.ReplicaJSON
	testkit.Eventually(t, 40*time.Second, "r3 gone", func() bool {
		gone = replicaOf(apiReplicas(t, r1.admin), "r3")
		return gone.State == "gone"
	})
	if gone.GoneAt == nil || !gone.GoneAt.Equal(gone.LastSeen.Add(15*time.Second)) || gone.OtherConfig {
		t.Errorf("r3 killed: %+v; want gone 15s after it was last seen, not marked other_config", gone)
	}
	if table := mustCLI(t, 0, dir, "replicas", "-config", cfgA).stdout; strings.Contains(table, "(other)") {
		t.Errorf("scheduler replicas marks a gone replica:\n%s", table)
	}
	waitJS(t, ctx, "r3 gone on the page, not marked", sel("r3")+`.dataset.state === 'gone' && `+sel("r3")+`.classList.contains('gone') && `+
		sel("r3")+`.dataset.otherConfig === 'false' && !`+sel("r3")+`.innerText.includes('other config')`)
}
