package scheduler_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/scheduler"
)

// calendar is a scheduler.Calendar made of a func.
type calendar struct {
	name     string
	contains func(time.Time) bool
}

func (c calendar) Name() string              { return c.name }
func (c calendar) Contains(t time.Time) bool { return c.contains(t) }

// excludedRuns returns the job's history entries with outcome excluded, by
// tick, each tick once (t.Errorf if twice): an entry that coalesces
// several ticks (Count, First) stands for each tick of its range, a second
// apart (the tests' jobs tick every second).
func excludedRuns(t *testing.T, s *scheduler.Scheduler, job string) map[int64]scheduler.Run {
	t.Helper()
	runs, err := s.History(testkit.Context(t), job, 1000, "")
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int64]scheduler.Run)
	for _, r := range runs {
		if r.Outcome != scheduler.OutcomeExcluded {
			continue
		}
		for _, tick := range coalescedTicks(t, r, time.Second) {
			if _, dup := out[tick.UnixMilli()]; dup {
				t.Errorf("tick %v recorded excluded twice", tick)
			}
			out[tick.UnixMilli()] = r
		}
	}
	return out
}

// coalescedTicks is the ticks an entry stands for, period apart: its Tick,
// or the range from First to Tick of an entry of Count ticks (t.Errorf if
// the range does not hold Count).
func coalescedTicks(t *testing.T, r scheduler.Run, period time.Duration) []time.Time {
	t.Helper()
	if r.Count <= 1 {
		return []time.Time{r.Tick}
	}
	var ticks []time.Time
	for tick := r.First; !tick.After(r.Tick); tick = tick.Add(period) {
		ticks = append(ticks, tick)
	}
	if int64(len(ticks)) != r.Count {
		t.Errorf("entry of %d ticks from %v to %v: %d ticks %v apart", r.Count, r.First, r.Tick, len(ticks), period)
	}
	return ticks
}

// A tick in a calendar of the job's Exclude is run by no replica of two,
// and recorded once, excluded, with the calendar as its reason; the others
// run. Jobs lists the next ticks that will run, and the excluded ones apart.
func TestCalendarExcludesTicksOnTwoReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "nightly"
	odd := calendar{"odd-seconds", func(t time.Time) bool { return t.Second()%4 == 2 }}
	j := newJournal()
	var log runLog
	fleet, _ := fleetWith(t, srv, 2, nil, []scheduler.Option{log.option()}, scheduler.Job{
		Name: job, Schedule: "@every 2s", Exclude: []scheduler.Calendar{odd}, Run: j.fn(nil),
	})
	v := fleet[0].s.Jobs(testkit.Context(t))[0]
	if len(v.NextTicks) != 3 || len(v.Skipped) == 0 {
		t.Fatalf("Jobs: next %v, skipped %v; want 3 ticks to run and the excluded ones apart", v.NextTicks, v.Skipped)
	}
	for _, tk := range v.NextTicks {
		if odd.Contains(tk) {
			t.Errorf("Jobs: next tick %v is excluded", tk)
		}
	}
	for _, sk := range v.Skipped {
		if !odd.Contains(sk.Tick) || sk.Cause != "calendar:odd-seconds" || sk.Reason != "excluded by calendar odd-seconds" {
			t.Errorf("Jobs: skipped %+v", sk)
		}
	}
	testkit.Eventually(t, 30*time.Second, "three excluded ticks recorded", func() bool {
		return len(excludedRuns(t, fleet[0].s, job)) >= 3
	})
	stopAll(t, fleet...)
	ex := excludedRuns(t, fleet[1].s, job)
	for ms, r := range ex {
		tick := time.UnixMilli(ms)
		if !odd.Contains(tick) {
			t.Errorf("tick %v recorded excluded, but the calendar does not hold it", tick)
		}
		if r.Reason != "excluded by calendar odd-seconds" {
			t.Errorf("tick %v: reason %q", tick, r.Reason)
		}
		if ranTick(j, tick) {
			t.Errorf("excluded tick %v ran", tick)
		}
		if n := len(log.of(tick)); n != 1 {
			t.Errorf("tick %v: heard %d times by WithOnRun across the fleet, want 1", tick, n)
		}
	}
	ran := 0
	for _, x := range j.all() {
		if odd.Contains(x.info.Tick) {
			t.Errorf("excluded tick %v ran", x.info.Tick)
		}
		ran++
	}
	if ran < 2 {
		t.Errorf("%d ticks ran, want the ticks outside the calendar to run", ran)
	}
	checkOncePerTick(t, j.byJob(), 0)
}

// A freeze made on one replica of two stops the job's ticks on both until
// its until, recorded excluded with its note; then the ticks run again by
// themselves. Unfreeze ends one at once. Bad input changes nothing.
func TestFreezeOnTwoReplicas(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const job = "report"
	j := newJournal()
	fleet, _ := fleetWith(t, srv, 2, nil, nil,
		scheduler.Job{Name: job, Schedule: "@every 1s", Run: j.fn(nil)},
		scheduler.Job{Name: "other", Schedule: "@every 1h", Run: j.fn(nil)})
	ctx := testkit.Context(t)
	s := fleet[0].s

	until := time.Now().Add(4 * time.Second).Truncate(time.Second)
	for _, c := range []struct {
		name, pattern, note string
		until               time.Time
		want                string
	}{
		{"no note", "", " ", until, "note: missing"},
		{"note of 10 kB", "", strings.Repeat("x", 10_000), until, "note: 10000 bytes"},
		{"note with a line break", "", "release\nfreeze", until, "has a control character"},
		{"note with a terminal escape", "", "\x1b[2Jfreeze", until, "has a control character"},
		{"note with a C1 control", "", "freeze\u0085", until, "has a control character"},
		{"pattern matching nothing", "nothing*", "n", until, `jobs: "nothing*" matches no job`},
		{"malformed pattern", "[", "n", until, `jobs: "[" is not a pattern`},
		{"until in the past", "", "n", time.Now().Add(-time.Minute), "is not in the future"},
	} {
		if _, err := s.Freeze(ctx, c.pattern, c.until, c.note); !errors.Is(err, scheduler.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Freeze = %v, want ErrInvalid saying %q", c.name, err, c.want)
		}
	}
	if err := s.Unfreeze(ctx, "f99"); !errors.Is(err, scheduler.ErrUnknownFreeze) {
		t.Errorf("Unfreeze of an unknown id = %v, want ErrUnknownFreeze", err)
	}
	if fs, err := s.Freezes(ctx); err != nil || len(fs) != 0 {
		t.Fatalf("after bad input: Freezes = %v, %v; want none", fs, err)
	}

	f, err := s.Freeze(ctx, "rep*", until, "release freeze")
	if err != nil {
		t.Fatal(err)
	}
	if fs, err := fleet[1].s.Freezes(ctx); err != nil || len(fs) != 1 || fs[0].ID != f.ID || fs[0].Note != "release freeze" || !fs[0].Until.Equal(until) {
		t.Fatalf("Freezes on the other replica = %+v, %v; want %+v", fs, err, f)
	}
	v := fleet[1].s.Jobs(ctx)[0]
	if len(v.NextTicks) == 0 || v.NextTicks[0].Before(until) || len(v.Skipped) == 0 || v.Skipped[0].Cause != "freeze:"+f.ID {
		t.Errorf("Jobs during the freeze: next %v, skipped %+v; want the ticks from %v, the others skipped by the freeze", v.NextTicks, v.Skipped, until)
	}
	testkit.Eventually(t, 30*time.Second, "a tick run after the freeze", func() bool {
		for _, x := range j.all() {
			if !x.info.Tick.Before(until) {
				return true
			}
		}
		return false
	})
	ex := excludedRuns(t, fleet[1].s, job)
	if len(ex) < 2 {
		t.Errorf("%d ticks recorded excluded during the freeze, want about 3", len(ex))
	}
	for ms, r := range ex {
		tick := time.UnixMilli(ms)
		if tick.Before(f.Created) || !tick.Before(until) || r.Reason != "freeze "+f.ID+": release freeze" {
			t.Errorf("tick %v recorded excluded (%q); the freeze is from %v to %v", tick, r.Reason, f.Created, until)
		}
	}
	for _, x := range j.all() {
		if tk := x.info.Tick; !tk.Before(f.Created.Add(time.Second)) && tk.Before(until) {
			t.Errorf("tick %v ran during the freeze (from %v to %v)", tk, f.Created, until)
		}
	}
	if fs, err := s.Freezes(ctx); err != nil || len(fs) != 0 {
		t.Errorf("after its until: Freezes = %v, %v; want none", fs, err)
	}

	// Unfreeze: a long freeze ended at once, and the ticks run again.
	f2, err := fleet[1].s.Freeze(ctx, "", time.Now().Add(time.Hour), "incident")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "a tick excluded by the second freeze", func() bool {
		for _, r := range excludedRuns(t, s, job) {
			if r.Reason == "freeze "+f2.ID+": incident" {
				return true
			}
		}
		return false
	})
	if err := s.Unfreeze(ctx, f2.ID); err != nil {
		t.Fatal(err)
	}
	ended := time.Now()
	testkit.Eventually(t, 10*time.Second, "a tick run after the unfreeze", func() bool {
		for _, x := range j.all() {
			if x.info.Tick.After(ended.Add(time.Second)) {
				return true
			}
		}
		return false
	})
	if err := s.Unfreeze(ctx, f2.ID); !errors.Is(err, scheduler.ErrUnknownFreeze) {
		t.Errorf("second Unfreeze = %v, want ErrUnknownFreeze", err)
	}
	stopAll(t, fleet...)
	checkOncePerTick(t, j.byJob(), 0)
}

// spanCalendar is a calendar that holds the times from from to to
// (exclusive) and says where its span ends (End), as the config's do.
type spanCalendar struct{ from, to time.Time }

func (c spanCalendar) Name() string { return "span" }
func (c spanCalendar) Contains(t time.Time) bool {
	return !t.Before(c.from) && t.Before(c.to)
}
func (c spanCalendar) End(t time.Time) time.Time {
	if c.Contains(t) {
		return c.to
	}
	return t
}

// The next ticks that will run pass over a freeze and a calendar's span
// at once: an @every 1s job under a day's freeze shows the ticks from its
// until; a calendar's span, from its end; a yearly job excluded every year
// shows none within the horizon, told apart from a schedule with no tick,
// and one that is not excluded shows three years' ticks.
// Job reads one job as Jobs does.
func TestNextTicksPassOverFreezesAndCalendars(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := newRedisReplica(t, srv, "r1", nil)
	day := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1)
	span := spanCalendar{from: time.Now().Add(-time.Hour), to: day.AddDate(0, 0, 3)}
	always := calendar{"always", func(time.Time) bool { return true }}
	nop := jobs.Func(func(context.Context) error { return nil })
	r.add(t,
		scheduler.Job{Name: "frozen", Schedule: "@every 1s", Run: nop},
		scheduler.Job{Name: "span", Schedule: "@every 1s", Exclude: []scheduler.Calendar{span}, Run: nop},
		scheduler.Job{Name: "yearly", Schedule: "0 0 1 1 *", Exclude: []scheduler.Calendar{always}, Run: nop},
		scheduler.Job{Name: "ended", Schedule: "0 0 30 2 *", Run: nop}, // 30 February: never
		scheduler.Job{Name: "plain-yearly", Schedule: "0 0 1 1 *", Run: nop},
	)
	ctx := testkit.Context(t)
	until := time.Now().Add(24 * time.Hour).Truncate(time.Second)
	f, err := r.s.Freeze(ctx, "frozen", until, "a day's freeze")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	views := r.s.Jobs(ctx)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Jobs took %v", d)
	}
	want := map[string][]time.Time{
		"frozen": {until, until.Add(time.Second), until.Add(2 * time.Second)},
		"span":   {span.to, span.to.Add(time.Second), span.to.Add(2 * time.Second)},
	}
	for _, v := range views {
		switch v.Job {
		case "frozen", "span":
			if !slices.EqualFunc(v.NextTicks, want[v.Job], time.Time.Equal) || len(v.Skipped) == 0 || !v.NoneBefore.IsZero() {
				t.Errorf("%s: next %v, skipped %+v, none before %v; want %v", v.Job, v.NextTicks, v.Skipped, v.NoneBefore, want[v.Job])
			}
		case "yearly":
			if len(v.NextTicks) != 0 || len(v.Skipped) == 0 || v.Skipped[0].Cause != "calendar:always" || v.NoneBefore.Before(time.Now().Add(scheduler.NextHorizon-time.Hour)) {
				t.Errorf("yearly: next %v, skipped %+v, none before %v; want none within the horizon", v.NextTicks, v.Skipped, v.NoneBefore)
			}
		case "plain-yearly": // the horizon runs from each tick found
			if len(v.NextTicks) != 3 || !v.NoneBefore.IsZero() {
				t.Errorf("plain-yearly: next %v, none before %v; want three years' ticks", v.NextTicks, v.NoneBefore)
			}
		case "ended":
			if len(v.NextTicks) != 0 || len(v.Skipped) != 0 || !v.NoneBefore.IsZero() {
				t.Errorf("ended: next %v, skipped %+v, none before %v; want none at all", v.NextTicks, v.Skipped, v.NoneBefore)
			}
		}
	}
	if v := views[0]; v.Skipped[0].Cause != "freeze:"+f.ID {
		t.Errorf("frozen: skipped %+v, want the freeze's", v.Skipped)
	}
	v, ok := r.s.Job(ctx, "span")
	if !ok || v.Job != "span" || !slices.EqualFunc(v.NextTicks, want["span"], time.Time.Equal) {
		t.Errorf("Job(span) = %+v, %v", v, ok)
	}
	if _, ok := r.s.Job(ctx, "nothing"); ok {
		t.Error("Job of an unknown name: ok")
	}
}
