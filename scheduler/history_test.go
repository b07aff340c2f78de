package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/scheduler"
)

// runSink collects what WithOnRun passes, from every replica.
type runSink struct {
	mu   sync.Mutex
	runs []scheduler.Run
}

func (k *runSink) option() scheduler.Option {
	return scheduler.WithOnRun(func(r scheduler.Run) {
		k.mu.Lock()
		k.runs = append(k.runs, r)
		k.mu.Unlock()
	})
}

func (k *runSink) all() []scheduler.Run {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]scheduler.Run(nil), k.runs...)
}

// Two replicas run a job whose odd ticks fail: each tick is in the history
// once, newest first, with the replica that ran it, its duration, outcome,
// token and the tail of its error with the secret redacted; WithOnRun hears
// each run once across the fleet; both replicas read the same history.
func TestHistoryFleetWide(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job, secret = "hist", "s3cr3t-token"
	redact := scheduler.WithRedact(func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") })
	sink := &runSink{}
	var mu sync.Mutex
	n := 0
	work := jobs.Func(func(ctx context.Context) error {
		mu.Lock()
		n++
		odd := n%2 == 1
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // a duration to measure
		if odd {
			return fmt.Errorf("%s: upstream refused %s", strings.Repeat("x", 600), secret)
		}
		return nil
	})
	clk := testclock.NewFake(fakeStart)
	var rs []*replica
	for _, id := range []string{"r1", "r2"} {
		r := newRedisReplica(t, srv, id, nil, redact, sink.option(), scheduler.WithClock(clk))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Run: work, HistoryKeep: 50})
		r.start()
		rs = append(rs, r)
	}
	for range 4 {
		settle(t, clk, 2, job, rs...)
		step(t, clk, 2)
	}
	testkit.Eventually(t, 10*time.Second, "4 runs in the history", func() bool {
		h, err := rs[0].s.History(ctx, job, 0, "")
		return err == nil && len(h) == 4
	})
	for _, r := range rs {
		r.stop(t)
	}
	h1, err := rs[0].s.History(ctx, job, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	h2, err := rs[1].s.History(ctx, job, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(h1) != fmt.Sprint(h2) {
		t.Fatalf("replicas read different histories:\n%v\n%v", h1, h2)
	}
	seen := map[time.Time]bool{}
	var failed, ran int
	for i, r := range h1 {
		if i > 0 && !r.Tick.Before(h1[i-1].Tick) && r.Outcome != scheduler.OutcomeHandedOff {
			t.Errorf("entry %d (tick %s) is not older than entry %d (tick %s): want newest first", i, fmtT(r.Tick), i-1, fmtT(h1[i-1].Tick))
		}
		if r.Outcome == scheduler.OutcomeHandedOff {
			continue // given back at the stop
		}
		if seen[r.Tick] {
			t.Errorf("tick %s twice in the history", fmtT(r.Tick))
		}
		seen[r.Tick] = true
		if r.Job != job || (r.Replica != "r1" && r.Replica != "r2") || r.Attempt != 1 || r.Token == 0 || r.ID == "" {
			t.Errorf("entry %d: %+v", i, r)
		}
		if r.Duration < 20*time.Millisecond || r.End.Before(r.Start) || r.Start.Before(r.Tick.Add(-time.Second)) {
			t.Errorf("entry %d: start %v end %v duration %v; want a duration of at least the job's 20ms", i, r.Start, r.End, r.Duration)
		}
		switch r.Outcome {
		case scheduler.OutcomeFailed:
			failed++
			if len(r.Error) > scheduler.MaxErrorTail || !strings.HasSuffix(r.Error, "upstream refused [redacted]") || strings.Contains(r.Error, secret) {
				t.Errorf("entry %d: error %q (%d bytes); want its tail, at most %d bytes, redacted", i, r.Error, len(r.Error), scheduler.MaxErrorTail)
			}
		case scheduler.OutcomeRan:
			ran++
			if r.Error != "" {
				t.Errorf("entry %d: ran with error %q", i, r.Error)
			}
		default:
			t.Errorf("entry %d: outcome %s", i, r.Outcome)
		}
	}
	if failed == 0 || ran == 0 {
		t.Errorf("history has %d failed and %d ran; want both", failed, ran)
	}
	heard := sink.all()
	if len(heard) != len(h1) {
		t.Errorf("WithOnRun heard %d runs, the history holds %d: want each once", len(heard), len(h1))
	}
	// Paging: the entries before the second are the rest.
	page, err := rs[0].s.History(ctx, job, 2, h1[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) != 2 || page[0].ID != h1[1].ID || page[1].ID != h1[2].ID {
		t.Errorf("page before %s: %v; want entries 1 and 2", h1[0].ID, page)
	}
	if _, err := rs[0].s.History(ctx, "nope", 1, ""); !errors.Is(err, scheduler.ErrUnknownJob) {
		t.Errorf("history of an unknown job: %v, want ErrUnknownJob", err)
	}
	if _, err := rs[0].s.History(ctx, job, 1, "yesterday"); !errors.Is(err, scheduler.ErrInvalid) {
		t.Errorf("history before a malformed id: %v, want ErrInvalid", err)
	}
}

// A manual run is in the job's history with its trigger number.
func TestHistoryManualRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job = "hist-manual"
	j := newJournal()
	r := newRedisReplica(t, srv, "r1", nil)
	r.add(t, scheduler.Job{Name: job, Schedule: "@yearly", Run: j.fn(nil)})
	r.start()
	// A trigger sent before the replica's subscription to fleet requests
	// is in place is lost: wait for it.
	testkit.Eventually(t, 10*time.Second, "the replica subscribed to fleet requests", func() bool {
		n, err := srv.Client().PubSubNumSub(ctx, "lockcron:events:control").Result()
		return err == nil && n["lockcron:events:control"] > 0
	})
	if heard, err := r.s.Trigger(ctx, job); err != nil || heard != 1 {
		t.Fatalf("Trigger: heard by %d, %v; want 1", heard, err)
	}
	var h []scheduler.Run
	testkit.Eventually(t, 20*time.Second, "the manual run in the history", func() bool {
		var err error
		h, err = r.s.History(ctx, job, 10, "")
		return err == nil && len(h) == 1
	})
	if h[0].Trigger != 1 || h[0].Outcome != scheduler.OutcomeRan || h[0].Replica != "r1" {
		t.Fatalf("manual run in the history: %+v; want trigger 1, ran on r1", h[0])
	}
}

// Ticks missed while every replica was down are one entry of the history,
// written by one of the replicas that start and find them.
func TestHistoryMissedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job = "hist-missed"
	seed, clk := fakeStart, testclock.NewFake(fakeStart.Add(5500*time.Millisecond))
	seedLedger(t, srv, job, job, seed)
	sink := &runSink{}
	var rs []*replica
	for _, id := range []string{"r1", "r2", "r3"} {
		j := newJournal()
		r := newRedisReplica(t, srv, id, nil, sink.option(), scheduler.WithClock(clk))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Misfire: scheduler.MisfireSkip, Run: j.fn(nil)})
		rs = append(rs, r)
	}
	for _, r := range rs {
		r.start()
	}
	step(t, clk, 3)
	var missed []scheduler.Run
	testkit.Eventually(t, 10*time.Second, "a run after the misses", func() bool {
		h, err := rs[0].s.History(ctx, job, 100, "")
		if err != nil {
			return false
		}
		missed = missed[:0]
		ran := false
		for _, r := range h {
			switch r.Outcome {
			case scheduler.OutcomeMissed:
				missed = append(missed, r)
			case scheduler.OutcomeRan:
				ran = true
			}
		}
		return ran
	})
	for _, r := range rs {
		r.stop(t)
	}
	if len(missed) != 1 {
		t.Fatalf("%d missed entries, want 1: %+v", len(missed), missed)
	}
	m := missed[0]
	if m.Missed != 5 || !m.Tick.Equal(seed.Add(5*time.Second)) {
		t.Errorf("missed entry: %d ticks up to %s; want the 5 after %s", m.Missed, fmtT(m.Tick), fmtT(seed))
	}
	var heard int
	for _, r := range sink.all() {
		if r.Outcome == scheduler.OutcomeMissed {
			heard++
		}
	}
	if heard != 1 {
		t.Errorf("WithOnRun heard the misses %d times, want once", heard)
	}
}

// A replica that stops mid-run hands its tick off: the one that takes it
// over says so at WARN (which tick, from whom, why), and the history holds
// both runs: handed_off on the first, ran (attempt 2) on the second.
func TestHistoryTakeover(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const job = "hist-takeover"
	started := make(chan string, 10)
	work := func(id string) jobs.Func {
		return func(ctx context.Context) error {
			info, _ := jobs.InfoFrom(ctx)
			if info.Attempt > 1 {
				return nil
			}
			started <- id
			<-ctx.Done()
			return ctx.Err()
		}
	}
	logs := &lockedWriter{w: &strings.Builder{}}
	log := hclog.New(&hclog.LoggerOptions{Name: "app", Output: logs})
	clk := testclock.NewFake(fakeStart)
	rs := map[string]*replica{}
	for _, id := range []string{"r1", "r2"} {
		r := newRedisReplica(t, srv, id, nil, scheduler.WithLogger(log.Named(id)), scheduler.WithClock(clk))
		r.add(t, scheduler.Job{Name: job, Schedule: "@every 1s", Run: work(id), Overlap: scheduler.OverlapQueue})
		r.start()
		rs[id] = r
	}
	step(t, clk, 2)
	var first string
	select {
	case first = <-started:
	case <-ctx.Done():
		t.Fatal("no run started")
	}
	survivor := "r1"
	if first == "r1" {
		survivor = "r2"
	}
	rs[first].stop(t)
	var h []scheduler.Run
	testkit.Eventually(t, 20*time.Second, "the taken-over run in the history", func() bool {
		var err error
		h, err = rs[survivor].s.History(ctx, job, 100, "")
		if err != nil {
			return false
		}
		for _, r := range h {
			if r.Attempt == 2 && r.Outcome == scheduler.OutcomeRan && r.Replica == survivor {
				return true
			}
		}
		return false
	})
	var handed *scheduler.Run
	for i, r := range h {
		if r.Outcome == scheduler.OutcomeHandedOff && r.Replica == first {
			handed = &h[i]
		}
	}
	if handed == nil {
		t.Fatalf("no handed_off entry of %s in %+v", first, h)
	}
	// The survivor takes the tick over, waiting for it or hearing the
	// handoff; a claim of a later tick would find it as the earlier
	// unfinished one instead: either line says so.
	wants := []string{
		"app." + survivor + ".scheduler: tick taken over",
		"app." + survivor + ".scheduler: an earlier tick was claimed and never finished: running it first",
	}
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		for _, want := range wants {
			if strings.Contains(l, want) && strings.Contains(l, "tick="+handed.Tick.UTC().Format(time.RFC3339)) {
				line = l
			}
		}
	}
	if !strings.Contains(line, "[WARN]") || !strings.Contains(line, "from="+first) || !strings.Contains(line, "handed_off") {
		t.Fatalf("takeover line %q; want a WARN with the tick, from=%s and why (handed_off), in:\n%s", line, first, logs.String())
	}
}
