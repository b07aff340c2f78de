package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// failOn makes a job func that fails at the ticks bad says.
func failOn(bad func(tick time.Time) bool) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		info, _ := jobs.InfoFrom(ctx)
		if bad(info.Tick) {
			return errors.New("bad tick")
		}
		return nil
	}
}

// chainFleet starts n replicas on srv, each with jobs.
func chainFleet(t *testing.T, srv *redistest.Server, n int, js ...scheduler.Job) []*replica {
	t.Helper()
	var fleet []*replica
	for i := range n {
		r := newRedisReplica(t, srv, fmt.Sprintf("r%d", i+1), nil)
		r.add(t, js...)
		fleet = append(fleet, r)
	}
	for _, r := range fleet {
		r.start()
	}
	return fleet
}

// checkFollowers checks that child ran once for each tick of want, with
// parent's tick and LOCKCRON_PARENT, and for no other tick.
func checkFollowers(t *testing.T, child []execution, parent string, want map[time.Time]bool) {
	t.Helper()
	seen := make(map[time.Time]int)
	for _, x := range child {
		seen[x.info.Tick]++
		if !want[x.info.Tick] {
			t.Errorf("child ran tick %s, which no matching parent run had", x.info.Tick.Format(time.RFC3339))
		}
		if p := parent + "@" + x.info.Tick.UTC().Format(time.RFC3339Nano); x.info.Parent != p {
			t.Errorf("child of tick %s: Parent %q, want %q", x.info.Tick.Format(time.RFC3339), x.info.Parent, p)
		}
		if env := strings.Join(x.info.Env(), " "); !strings.Contains(env, "LOCKCRON_PARENT="+x.info.Parent) {
			t.Errorf("child's Env() %q has no LOCKCRON_PARENT", env)
		}
	}
	for tick, n := range seen {
		if n > 1 {
			t.Errorf("child ran tick %s %d times", tick.Format(time.RFC3339), n)
		}
	}
	for tick := range want {
		if seen[tick] == 0 {
			t.Errorf("child did not run after the parent's run of %s", tick.Format(time.RFC3339))
		}
	}
}

func TestChainRunsOncePerSuccessfulParentRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	bad := func(tick time.Time) bool { return tick.Unix()%3 == 0 }
	fleet := chainFleet(t, srv, 3,
		scheduler.Job{Name: "extract", Schedule: "@every 1s", Run: j.fn(failOn(bad))},
		scheduler.Job{Name: "load", After: []string{"extract"}, Run: j.fn(nil)})
	var cutoff time.Time
	testkit.Eventually(t, 60*time.Second, "6 runs of extract followed by load", func() bool {
		by := j.byJob()
		if len(by["extract"]) < 6 {
			return false
		}
		cutoff = by["extract"][5].info.Tick
		n := 0
		for _, x := range by["load"] {
			if !x.info.Tick.After(cutoff) {
				n++
			}
		}
		want := 0
		for _, x := range by["extract"][:6] {
			if x.err == nil {
				want++
			}
		}
		return n == want
	})
	for _, r := range fleet {
		r.stop(t)
	}
	by := j.byJob()
	checkOncePerTick(t, by, 0)
	want := make(map[time.Time]bool)
	for _, x := range by["extract"] {
		if x.err == nil && !x.info.Tick.After(cutoff) {
			want[x.info.Tick] = true
		}
	}
	var child []execution
	for _, x := range by["load"] {
		if !x.info.Tick.After(cutoff) {
			child = append(child, x)
		} else if bad(x.info.Tick) {
			t.Errorf("load ran after the failed extract of %s", x.info.Tick.Format(time.RFC3339))
		}
	}
	checkFollowers(t, child, "extract", want)
	// The child's history names its parent.
	runs, err := fleet[0].s.History(context.Background(), "load", 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) == 0 || !strings.HasPrefix(runs[0].Parent, "extract@") {
		t.Errorf("load's history = %+v, want entries with Parent extract@...", runs)
	}
}

func TestChainFanInAndWhen(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	badB := func(tick time.Time) bool { return tick.Unix()%2 == 0 }
	fleet := chainFleet(t, srv, 2,
		scheduler.Job{Name: "a", Schedule: "@every 1s", Run: j.fn(nil)},
		scheduler.Job{Name: "b", Schedule: "@every 1s", Run: j.fn(failOn(badB))},
		scheduler.Job{Name: "both", After: []string{"a", "b"}, Run: j.fn(nil)},
		scheduler.Job{Name: "cleanup", After: []string{"b"}, When: scheduler.WhenFailure, Run: j.fn(nil)})
	var cutoff time.Time
	testkit.Eventually(t, 60*time.Second, "6 ticks of a and b followed", func() bool {
		by := j.byJob()
		if len(by["a"]) < 6 || len(by["b"]) < 6 {
			return false
		}
		cutoff = by["a"][5].info.Tick
		if b := by["b"][5].info.Tick; b.Before(cutoff) {
			cutoff = b
		}
		n, m := 0, 0
		for _, x := range by["both"] {
			if !x.info.Tick.After(cutoff) {
				n++
			}
		}
		for _, x := range by["cleanup"] {
			if !x.info.Tick.After(cutoff) {
				m++
			}
		}
		okA := make(map[time.Time]bool)
		for _, x := range by["a"] {
			okA[x.info.Tick] = x.err == nil
		}
		wn, wm := 0, 0
		for _, x := range by["b"] {
			if x.info.Tick.After(cutoff) {
				continue
			}
			if x.err == nil && okA[x.info.Tick] {
				wn++
			}
			if x.err != nil {
				wm++
			}
		}
		return n == wn && m == wm && wn > 0 && wm > 0
	})
	for _, r := range fleet {
		r.stop(t)
	}
	by := j.byJob()
	okA := make(map[time.Time]bool)
	for _, x := range by["a"] {
		okA[x.info.Tick] = x.err == nil
	}
	wantBoth, wantCleanup := make(map[time.Time]bool), make(map[time.Time]bool)
	for _, x := range by["b"] {
		if x.info.Tick.After(cutoff) {
			continue
		}
		if x.err == nil && okA[x.info.Tick] {
			wantBoth[x.info.Tick] = true
		}
		if x.err != nil {
			wantCleanup[x.info.Tick] = true
		}
	}
	before := func(xs []execution) (out []execution) {
		for _, x := range xs {
			if !x.info.Tick.After(cutoff) {
				out = append(out, x)
			}
		}
		return out
	}
	// With several parents, Parent names the one whose finish completed
	// the set: a or b.
	seen := make(map[time.Time]int)
	for _, x := range before(by["both"]) {
		seen[x.info.Tick]++
		if !wantBoth[x.info.Tick] {
			t.Errorf("both ran tick %s, which a and b did not both run successfully", x.info.Tick.Format(time.RFC3339))
		}
		if !strings.HasPrefix(x.info.Parent, "a@") && !strings.HasPrefix(x.info.Parent, "b@") {
			t.Errorf("both's Parent %q, want a@... or b@...", x.info.Parent)
		}
	}
	for tick := range wantBoth {
		if seen[tick] != 1 {
			t.Errorf("both ran tick %s %d times, want once", tick.Format(time.RFC3339), seen[tick])
		}
	}
	checkFollowers(t, before(by["cleanup"]), "b", wantCleanup)
}

func TestChainFollowsManualRuns(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	fleet := chainFleet(t, srv, 2,
		scheduler.Job{Name: "extract", Schedule: "0 0 1 1 *", Run: j.fn(nil)},
		scheduler.Job{Name: "load", After: []string{"extract"}, Run: j.fn(nil)})
	// Each replica subscribes as it starts: trigger until one runs.
	ctx := testkit.Context(t)
	deadline := time.Now().Add(20 * time.Second)
	for len(j.all()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no run 20s after the first trigger")
		}
		if _, err := fleet[0].s.Trigger(ctx, "extract"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-j.ch:
		case <-time.After(300 * time.Millisecond):
		}
	}
	testkit.Eventually(t, 60*time.Second, "load after each manual run of extract", func() bool {
		by := j.byJob()
		return len(by["extract"]) > 0 && len(by["load"]) == len(by["extract"])
	})
	for _, r := range fleet {
		r.stop(t)
	}
	by := j.byJob()
	parents := make(map[int64]jobs.Info)
	for _, x := range by["extract"] {
		parents[x.info.Trigger] = x.info
	}
	seen := make(map[int64]bool)
	for _, x := range by["load"] {
		c := x.info
		p, ok := parents[c.Trigger]
		switch {
		case !ok || seen[c.Trigger]:
			t.Errorf("load ran for trigger %d: once per manual run of extract (%v) wanted", c.Trigger, parents)
		case !c.Tick.Equal(p.Tick) || c.Parent != "extract@"+p.Tick.UTC().Format(time.RFC3339Nano):
			t.Errorf("load: tick %v parent %q; extract's tick %v", c.Tick, c.Parent, p.Tick)
		}
		seen[c.Trigger] = true
	}
}

func TestChainValidation(t *testing.T) {
	run := jobs.Func(func(context.Context) error { return nil })
	for _, tc := range []struct {
		name string
		job  scheduler.Job
		want string
	}{
		{"after with schedule", scheduler.Job{Name: "x", Schedule: "@every 1s", After: []string{"a"}, Run: run}, `after: a job with after has no schedule`},
		{"itself", scheduler.Job{Name: "x", After: []string{"x"}, Run: run}, `after: "x" names the job itself`},
		{"twice", scheduler.Job{Name: "x", After: []string{"a", "a"}, Run: run}, `after: "a" is named twice`},
		{"bad when", scheduler.Job{Name: "x", After: []string{"a"}, When: "sometimes", Run: run}, `when: "sometimes" is not one of`},
		{"when alone", scheduler.Job{Name: "x", Schedule: "@every 1s", When: "failure", Run: run}, `when: "failure" without after`},
		{"overlap skip", scheduler.Job{Name: "x", After: []string{"a"}, Overlap: scheduler.OverlapSkip, Run: run}, `overlap: "skip": a job with after queues its runs`},
		{"overlap replace", scheduler.Job{Name: "x", After: []string{"a"}, Overlap: scheduler.OverlapReplace, Run: run}, `overlap: "replace": a job with after queues its runs`},
		{"after in a name", scheduler.Job{Name: "x!after!y", Schedule: "@every 1s", Run: run}, `name: must not hold "!after!"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.job.Validate()
			if !errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want ErrInvalid with %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name string
		jobs []scheduler.Job
		want []string
	}{
		{"unknown", []scheduler.Job{{Name: "x", After: []string{"nope"}}}, []string{`job "x": after: "nope" is not a job`}},
		{"cycle", []scheduler.Job{{Name: "a", After: []string{"c"}}, {Name: "b", After: []string{"a"}}, {Name: "c", After: []string{"b"}}},
			[]string{`job "a": after: a cycle: a after c after b after a`, `job "b": after: a cycle`, `job "c": after: a cycle`}},
		{"fan-in schedules", []scheduler.Job{{Name: "a", Schedule: "@every 1s"}, {Name: "b", Schedule: "@every 2s"}, {Name: "c", After: []string{"a", "b"}}},
			[]string{`job "c": after: its parents must share a schedule, so that their ticks meet: "a" runs on "@every 1s", "b" on "@every 2s"`}},
		{"fine", []scheduler.Job{{Name: "a", Schedule: "@every 1s"}, {Name: "b", Schedule: "@every 1s"}, {Name: "c", After: []string{"a", "b"}}, {Name: "d", After: []string{"c"}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := scheduler.CheckChains(tc.jobs)
			if tc.want == nil {
				if err != nil {
					t.Errorf("CheckChains = %v, want nil", err)
				}
				return
			}
			for _, w := range tc.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("CheckChains = %v, want %q", err, w)
				}
			}
			var fe *scheduler.FieldError
			if !errors.As(err, &fe) || fe.Field != "after" {
				t.Errorf("CheckChains = %v, want *FieldError of after", err)
			}
		})
	}
	// Add refuses a cycle as it closes.
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := scheduler.New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Add(scheduler.Job{Name: "a", After: []string{"b"}, Run: run}); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(scheduler.Job{Name: "b", After: []string{"a"}, Run: run}); !errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), "cycle") {
		t.Errorf("Add of a cycle = %v, want ErrInvalid naming the cycle", err)
	}
}
