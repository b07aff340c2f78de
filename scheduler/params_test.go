package scheduler_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/oteltest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// Manual runs with parameters: each trigger runs once across the fleet with
// its own parameters (none merged, in order), which its history entry
// keeps; parameters a job does not declare, bad names and long values are
// refused with nothing stored or run; no value reaches the logs or spans.
func TestTriggerParams(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job, plain = "report", "plain"
	j := newJournal()
	logs := &syncBuffer{}
	log := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
	js := []scheduler.Job{
		{Name: job, Schedule: "@yearly", Run: j.fn(nil), Params: []string{"customer", "date"}},
		{Name: plain, Schedule: "@yearly", Run: j.fn(nil)},
	}
	spans := oteltest.NewTracerProvider()
	fleet, _ := fleetWith(t, srv, 3, []lock.Option{lock.WithTracerProvider(spans)},
		[]scheduler.Option{scheduler.WithLogger(log), scheduler.WithTracerProvider(spans)}, js...)
	sender := newRedisReplica(t, srv, "cli", nil, scheduler.WithLogger(log))
	sender.add(t, js...)
	ctx := testkit.Context(t)
	testkit.Eventually(t, 20*time.Second, "the fleet running", func() bool { return allRunning(fleet) })

	// Refused: nothing stored (the trigger count stays), nothing run.
	long := strings.Repeat("x", scheduler.MaxParamValue+1)
	for _, c := range []struct {
		job    string
		params map[string]string
		want   string
	}{
		{job, map[string]string{"customer": "42", "region": "eu"}, `parameter "region" is not accepted: the job accepts customer, date`},
		{job, map[string]string{"Customer": "42"}, `parameter "Customer": a name is made of a-z, 0-9 and _; the job accepts customer, date`},
		{job, map[string]string{"customer": long}, fmt.Sprintf(`parameter "customer": value of %d bytes: at most %d`, len(long), scheduler.MaxParamValue)},
		{job, map[string]string{"customer": "4\n2"}, `parameter "customer": the value holds a control character`},
		{plain, map[string]string{"customer": "42"}, `parameter "customer": the job accepts no parameters`},
	} {
		_, err := sender.s.TriggerParams(ctx, c.job, c.params)
		if !errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("TriggerParams(%s, %v) = %v; want ErrInvalid saying %q", c.job, c.params, err, c.want)
		}
	}
	for _, v := range sender.s.Jobs(ctx) {
		if v.Ledger.Triggers != 0 {
			t.Fatalf("job %s: %d triggers counted after refusals, want 0", v.Job, v.Ledger.Triggers)
		}
	}

	// Five triggers at once, each with its own customer: five runs.
	const n = 5
	for i := range n {
		if _, err := sender.s.TriggerParams(ctx, job, map[string]string{"customer": fmt.Sprintf("c%d-secret", i), "date": "2026-11-27"}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, 30*time.Second, "five manual runs", func() bool { return len(j.all()) >= n })
	testkit.Eventually(t, 20*time.Second, "the runs recorded", func() bool {
		runs, err := sender.s.History(ctx, job, 0, "")
		return err == nil && len(runs) >= n
	})
	stopAll(t, fleet...)
	got := map[string]int{}
	for _, x := range j.all() {
		if x.info.Trigger == 0 || x.info.Params["date"] != "2026-11-27" {
			t.Errorf("run %+v: want a manual run with date 2026-11-27", x.info)
		}
		got[x.info.Params["customer"]]++
	}
	for i := range n {
		if c := fmt.Sprintf("c%d-secret", i); got[c] != 1 {
			t.Errorf("customer %s ran %d times, want once (runs: %v)", c, got[c], got)
		}
	}
	runs, err := sender.s.History(ctx, job, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	inHistory := map[string]int64{}
	for _, r := range runs {
		inHistory[r.Params["customer"]] = r.Trigger
	}
	for i := range n {
		if c := fmt.Sprintf("c%d-secret", i); inHistory[c] == 0 {
			t.Errorf("history: no manual run of customer %s: %+v", c, runs)
		}
	}
	out := logs.String()
	if strings.Contains(out, "-secret") || strings.Contains(out, "2026-11-27") {
		t.Errorf("a parameter's value reached the log:\n%s", out)
	}
	if !strings.Contains(out, "params=") {
		t.Errorf("the log does not name the parameters:\n%s", out)
	}
	ended := spans.Ended()
	if len(ended) == 0 {
		t.Fatal("no spans recorded")
	}
	for _, sp := range ended {
		for _, kv := range sp.Attributes() {
			if v := kv.Value.Emit(); strings.Contains(v, "-secret") || strings.Contains(v, "2026-11-27") {
				t.Errorf("span %s: attribute %s = %q holds a parameter's value", sp.Name(), kv.Key, v)
			}
		}
		for _, ev := range sp.Events() {
			if strings.Contains(fmt.Sprint(ev), "-secret") {
				t.Errorf("span %s: event %+v holds a parameter's value", sp.Name(), ev)
			}
		}
	}
}

// A job's Params are checked when it is added: names of a-z, 0-9 and _,
// each once.
func TestJobParamsValidated(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		params []string
		want   string
	}{
		{"upper case", []string{"Customer"}, `params: name 0, "Customer": not made of a-z, 0-9 and _`},
		{"dash", []string{"ok", "a-b"}, `params: name 1, "a-b": not made of a-z, 0-9 and _`},
		{"twice", []string{"a", "a"}, `params: name 1, "a": declared twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			locks, err := lock.NewMemory()
			if err != nil {
				t.Fatal(err)
			}
			defer locks.Close()
			s, err := scheduler.New(locks)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Add(scheduler.Job{Name: "j", Schedule: "@daily", Run: newJournal().fn(nil), Params: c.params})
			if !errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Add = %v; want ErrInvalid saying %q", err, c.want)
			}
		})
	}
}

// A manual run whose claimant died mid-run is run again by the replica
// that claims the next one, first, with the parameters it was requested
// with: they are kept with its number in the store, not by the claimant.
func TestTriggerParamsSurviveTakeover(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job = "report"
	// A replica that triggered and claimed run 1, and vanished.
	dead, err := lock.New(srv.Client(), lock.WithClientID("dead"))
	if err != nil {
		t.Fatal(err)
	}
	store := fleet.New(dead)
	g, err := store.Ledger(job, job)
	if err != nil {
		t.Fatal(err)
	}
	m, err := store.Ledger(job, job+"!manual", fleet.WithSharedHistory(job))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := g.Trigger(ctx, m, map[string]string{"customer": "first"}); err != nil || n != 1 {
		t.Fatalf("Trigger = %d, %v; want 1", n, err)
	}
	if _, err := m.Claim(ctx, 1, false); err != nil {
		t.Fatal(err)
	}
	if ok, err := dead.ForceUnlock(ctx, job); err != nil || !ok {
		t.Fatalf("ForceUnlock = %v, %v", ok, err)
	}
	_ = dead.Close()

	j := newJournal()
	r := newRedisReplica(t, srv, "survivor", nil)
	r.add(t, scheduler.Job{Name: job, Schedule: "@yearly", Run: j.fn(nil), Params: []string{"customer"}})
	r.start()
	testkit.Eventually(t, 10*time.Second, "the replica running", r.s.Running)
	if _, err := r.s.TriggerParams(ctx, job, map[string]string{"customer": "second"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		trigger int64
		attempt int
		who     string
	}{{1, 2, "first"}, {2, 1, "second"}} {
		x := j.awaitStart(t, 20*time.Second)
		if x.info.Trigger != want.trigger || x.info.Attempt != want.attempt || x.info.Params["customer"] != want.who {
			t.Fatalf("run %+v; want trigger %d, attempt %d, customer %s", x.info, want.trigger, want.attempt, want.who)
		}
	}
	testkit.Eventually(t, 10*time.Second, "both runs in the history", func() bool {
		runs, err := r.s.History(ctx, job, 0, "")
		return err == nil && len(runs) == 2 && runs[0].Params["customer"] == "second" && runs[1].Params["customer"] == "first"
	})
}
