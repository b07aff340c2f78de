package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/chaos/internal/oracle"
)

// checkChain fails a parent's effective run with no child (lost), a child
// with no effective parent run (orphan), and a recorded parent tick run
// twice; it counts the kills that landed before the child's start.
func TestCheckChain(t *testing.T) {
	wall0 := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	const mono0 = int64(1_000 * time.Second)
	at := func(d time.Duration) int64 { return mono0 + int64(d) }
	w := &window{wall0: wall0, mono0: mono0, period: time.Second, lease: 2 * time.Second, from: at(0), to: at(20 * time.Second)}
	tick := func(s int) string { return wall0.Add(time.Duration(s) * time.Second).Format(time.RFC3339) }
	seq := int64(0)
	run := func(id, job, tk, replica string, from, to time.Duration) []oracle.Event {
		var out []oracle.Event
		for _, k := range []struct {
			kind string
			m    int64
		}{{oracle.Start, at(from)}, {oracle.End, at(to)}} {
			seq++
			e := oracle.Event{Run: oracle.Run{ID: id, Job: job, Tick: tk, Replica: replica, Token: seq, Attempt: 1}, Kind: k.kind, Mono: k.m, Seq: seq, Accepted: true}
			if k.kind == oracle.End {
				e.Status = oracle.StatusOK
			}
			out = append(out, e)
		}
		return out
	}
	good := append(run("p1", chainParent, tick(1), "r1", time.Second, 1100*time.Millisecond),
		run("c1", chainChild, tick(1), "r2", 1500*time.Millisecond, 1600*time.Millisecond)...)
	kill := Kill{Replica: "r1", At: at(1105 * time.Millisecond), Job: chainParent, Tick: tick(1)}
	for _, c := range []struct {
		name     string
		evs      []oracle.Event
		recorded []string
		want     string // in a broken line; "" none
	}{
		{"good", good, []string{tick(1)}, ""},
		{"lost child", run("p2", chainParent, tick(2), "r1", 2*time.Second, 2100*time.Millisecond), nil, "did not run after the effective run"},
		{"orphan child", run("c3", chainChild, tick(3), "r1", 3*time.Second, 3100*time.Millisecond), nil, "ran without an effective run"},
		{"recorded parent run twice", append(append([]oracle.Event{}, good...), run("p1b", chainParent, tick(1), "r2", 3*time.Second, 3100*time.Millisecond)...),
			[]string{tick(1)}, "ran 2 times, though its finish was in the chain record"},
	} {
		t.Run(c.name, func(t *testing.T) {
			broken, notes := checkChain(c.evs, w, c.recorded, []Kill{kill})
			if c.want == "" && len(broken) > 0 || c.want != "" && (len(broken) != 1 || !strings.Contains(broken[0], c.want)) {
				t.Errorf("broken %q, want one with %q", broken, c.want)
			}
			if c.name == "good" && (len(notes) != 1 || !strings.Contains(notes[0], "before its child's start: 1 of 1")) {
				t.Errorf("notes %q, want the kill counted before the child's start", notes)
			}
		})
	}
}
