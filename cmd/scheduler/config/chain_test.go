package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/scheduler"
)

func TestChainSettings(t *testing.T) {
	cfg := mustLoad(t, `job "extract" {
  schedule = "@every 1m"
  func = "cleanup"
}
job "load" {
  after = ["extract"]
  when = "always"
  func = "cleanup"
}`)
	load := cfg.Jobs[1]
	if !slices.Equal(load.After, []string{"extract"}) || load.When != scheduler.WhenAlways || load.Schedule != "" {
		t.Errorf("load: after %q when %q schedule %q", load.After, load.When, load.Schedule)
	}
}

func TestChainErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []want
	}{{
		name: "after with schedule",
		src: `job "a" {
  schedule = "@every 1m"
  func = "cleanup"
}
job "b" {
  schedule = "@every 1m"
  @@after = ["a"]
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "b", field: "after", msg: "a job with after has no schedule"}},
	}, {
		name: "unknown name, a child of itself, a bad when",
		src: `job "a" {
  @@after = ["nope"]
  func = "cleanup"
}
job "b" {
  @@after = ["b"]
  @@when = "sometimes"
  func = "cleanup"
}`,
		want: []want{
			{mark: 1, job: "a", field: "after", msg: `"nope" is not a job`},
			{mark: 2, job: "b", field: "after", msg: `"b" names the job itself`},
			{mark: 3, job: "b", field: "when", msg: `"sometimes" is not one of "success", "failure", "always"`},
		},
	}, {
		name: "cycle",
		src: `job "a" {
  @@after = ["b"]
  func = "cleanup"
}
job "b" {
  @@after = ["a"]
  func = "cleanup"
}`,
		want: []want{
			{mark: 1, job: "a", field: "after", msg: "a cycle: a after b after a"},
			{mark: 2, job: "b", field: "after", msg: "a cycle: b after a after b"},
		},
	}, {
		name: "fan-in of two schedules",
		src: `job "a" {
  schedule = "@every 1m"
  func = "cleanup"
}
job "b" {
  schedule = "@every 2m"
  func = "cleanup"
}
job "c" {
  @@after = ["a", "b"]
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "c", field: "after", msg: "its parents must share a schedule"}},
	}, {
		name: "neither schedule nor after",
		src: `@@job "a" {
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "a", field: "schedule", msg: "missing: every job needs a schedule, such as \"*/5 * * * *\" or \"@every 30s\", or after"}},
	}, {
		name: "overlap on a child",
		src: `job "a" {
  schedule = "@every 1m"
  func = "cleanup"
}
job "b" {
  after = ["a"]
  @@overlap = "skip"
  func = "cleanup"
}`,
		want: []want{{mark: 1, job: "b", field: "overlap", msg: `"skip": a job with after queues its runs`}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, places, err := load(t, tt.src)
			checkErrors(t, err, places, tt.want)
		})
	}
}

// The example's commented-out job that follows hello is valid once its #s
// are taken off.
func TestExampleChainJob(t *testing.T) {
	b, err := os.ReadFile("../../../config.example.hcl")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "# job \"after-hello\" {")
	if i < 0 {
		t.Fatal("config.example.hcl has no job after-hello")
	}
	var job []string
	for _, l := range strings.Split(text[i:], "\n") {
		if !strings.HasPrefix(l, "#") {
			break
		}
		job = append(job, strings.TrimPrefix(strings.TrimPrefix(l, "#"), " "))
	}
	path := filepath.Join(t.TempDir(), "example.hcl")
	if err := os.WriteFile(path, []byte(text+"\n"+strings.Join(job, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, config.WithEnviron(nil))
	if err != nil {
		t.Fatalf("config.example.hcl with after-hello: %v", err)
	}
	j := cfg.Jobs[len(cfg.Jobs)-1]
	if j.Name != "after-hello" || !slices.Equal(j.After, []string{"hello"}) || j.When != scheduler.WhenSuccess {
		t.Errorf("after-hello: %+v", j.Job)
	}
}
