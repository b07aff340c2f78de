package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
)

// jitterNames are the job names the jitter and H tests hash.
func jitterNames() []string {
	names := make([]string, 500)
	for i := range names {
		names[i] = fmt.Sprintf("svc-%d.report", i)
	}
	return names
}

// ticksFrom returns the first n ticks of s after t.
func ticksFrom(s Schedule, t time.Time, n int) []time.Time {
	out := make([]time.Time, 0, n)
	for len(out) < n {
		t = s.Next(t)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// Every replica, and every restart, computes the same jittered ticks; each
// is its base tick moved by [0, Jitter), in whole milliseconds, before the
// next base tick; Next from any time gives the first of them after it; and
// the names spread over the room.
func TestJitterTicks(t *testing.T) {
	t.Parallel()
	start := mustTime(t, "2026-03-27T22:17:31.123Z") // Berlin's summer time begins within the first days
	for _, tc := range []struct {
		spec   string
		jitter time.Duration
		n      int
	}{
		{"@every 1s", 700 * time.Millisecond, 20},
		{"@every 1m", 30 * time.Second, 20},
		{"@every 10s", time.Minute, 20}, // jitter above the period: up to the next tick
		{"0 * * * *", 5 * time.Minute, 20},
		{"0 * * * *", 2 * time.Hour, 10},
		{"*/15 * * * * *", 5 * time.Minute, 20},
		{"0 9 * * 1-5", 30 * time.Minute, 8},
		{"CRON_TZ=Europe/Berlin 30 2 * * *", 90 * time.Minute, 8},
		{"H H * * *", 10 * time.Minute, 6},
		{"*/2 * * * * *", 1500 * time.Microsecond, 20}, // a jitter of 1ms at most
		{"*/2 * * * * *", 999 * time.Microsecond, 5},   // less than a millisecond: no offset
		{"0 0 29 2 *", MaxJitter, 2},                   // four years between ticks
	} {
		t.Run(fmt.Sprintf("%s jitter %v", tc.spec, tc.jitter), func(t *testing.T) {
			t.Parallel()
			offsets := map[time.Duration]int{}
			var sum time.Duration
			for _, name := range jitterNames() {
				replicaA, err := parseJobSchedule(tc.spec, name, tc.jitter, time.UTC)
				if err != nil {
					t.Fatal(err)
				}
				replicaB, err := parseJobSchedule(tc.spec, name, tc.jitter, time.UTC)
				if err != nil {
					t.Fatal(err)
				}
				restart, err := ParseJobSchedule(name, tc.spec, tc.jitter, nil)
				if err != nil {
					t.Fatal(err)
				}
				base, err := parseJobSchedule(tc.spec, name, 0, time.UTC)
				if err != nil {
					t.Fatal(err)
				}
				bs := ticksFrom(base, start, tc.n+1)
				// The jittered tick of bs[0] is after the one before it,
				// which is before bs[0] and whole milliseconds.
				es := ticksFrom(replicaA, bs[0].Add(-time.Nanosecond), tc.n)
				if b := ticksFrom(replicaB, bs[0].Add(-time.Nanosecond), tc.n); !slices.EqualFunc(es, b, time.Time.Equal) {
					t.Fatalf("%s: replicas disagree:\n%v\n%v", name, es, b)
				}
				if r := ticksFrom(restart, bs[0].Add(-time.Nanosecond), tc.n); !slices.EqualFunc(es, r, time.Time.Equal) {
					t.Fatalf("%s: a restart disagrees:\n%v\n%v", name, es, r)
				}
				var off0 time.Duration
				for i, e := range es {
					off := e.Sub(bs[i])
					switch {
					case off < 0 || off >= tc.jitter:
						t.Fatalf("%s: tick %v moved by %v to %v, not in [0, %v)", name, bs[i], off, e, tc.jitter)
					case !e.Before(bs[i+1]):
						t.Fatalf("%s: tick %v moved to %v, not before the next tick %v", name, bs[i], e, bs[i+1])
					case e.UnixNano()%int64(time.Millisecond) != 0:
						t.Fatalf("%s: tick %v is not whole milliseconds", name, e)
					case i > 0 && !e.After(es[i-1]):
						t.Fatalf("%s: ticks %v, %v do not increase", name, es[i-1], e)
					}
					if i == 0 {
						off0 = off
					}
					// Next from anywhere between the ticks.
					prev := bs[0].Add(-time.Nanosecond)
					if i > 0 {
						prev = es[i-1]
					}
					for _, at := range []time.Time{prev, prev.Add(time.Millisecond), prev.Add(e.Sub(prev) / 2), bs[i].Add(-time.Nanosecond), bs[i], e.Add(-time.Millisecond), e.Add(-time.Nanosecond)} {
						if at.Before(prev) || !at.Before(e) {
							continue
						}
						if got := replicaA.Next(at); !got.Equal(e) {
							t.Fatalf("%s: Next(%v) = %v, want %v", name, at, got, e)
						}
					}
				}
				offsets[off0]++
				sum += off0
			}
			mean := sum / time.Duration(len(jitterNames()))
			room := tc.jitter
			if gap := ticksFrom(mustParse(t, tc.spec), start, 2); gap[1].Sub(gap[0]) < room {
				room = gap[1].Sub(gap[0])
			}
			t.Logf("%d offsets, mean %v, room %v", len(offsets), mean, room)
			if room < time.Millisecond {
				if len(offsets) != 1 || offsets[0] != len(jitterNames()) {
					t.Errorf("a jitter under 1ms moved ticks: %v", offsets)
				}
				return
			}
			// n names in b milliseconds hit b(1-e^(-n/b)) of them, on
			// average, if the hash is uniform.
			buckets := float64(room / time.Millisecond)
			if want := int(0.9 * buckets * (1 - math.Exp(-float64(len(jitterNames()))/buckets))); len(offsets) < want {
				t.Errorf("500 names got %d offsets, want at least %d: %v", len(offsets), want, offsets)
			}
			if buckets > 100 && (mean < room*4/10 || mean > room*6/10) {
				t.Errorf("mean offset %v is not near the half of %v", mean, room)
			}
		})
	}
}

func mustParse(t *testing.T, spec string) schedule {
	t.Helper()
	s, err := parseJobSchedule(spec, "x", 0, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// values returns what one expanded field element stands for.
func values(t *testing.T, elem string, hi int) []int {
	t.Helper()
	atoi := func(s string) int {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%q: not numbers", elem)
		}
		return v
	}
	r, step, ok := strings.Cut(elem, "/")
	if !ok {
		return []int{atoi(r)}
	}
	a, b, _ := strings.Cut(r, "-")
	if atoi(b) != hi {
		t.Fatalf("%q does not end at %d", elem, hi)
	}
	var out []int
	for v := atoi(a); v <= atoi(b); v += atoi(step) {
		out = append(out, v)
	}
	return out
}

// H picks, in each field, values in the field's range, by a hash of the
// job's name and the field: the same on every replica, spread over the
// names, different from field to field.
func TestScheduleH(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec  string
		field int // the field with H under test
		// the values it may stand for: from lo to hi, n values spaced by
		// step from a start below lo+step
		lo, hi, step, n int
	}{
		{"H * * * *", 0, 0, 59, 0, 1},
		{"0 H * * *", 1, 0, 23, 0, 1},
		{"0 0 H * *", 2, 1, 28, 0, 1},
		{"0 0 1 H *", 3, 1, 12, 0, 1},
		{"0 0 * * H", 4, 0, 6, 0, 1},
		{"H * * * * *", 0, 0, 59, 0, 1},
		{"H/15 * * * *", 0, 0, 59, 15, 4},
		{"0 H/6 * * *", 1, 0, 23, 6, 4},
		{"0 0 H/7 * *", 2, 1, 28, 7, 4},
		{"H/20 H/30 * * * *", 1, 0, 59, 30, 2},
		{"H/60 * * * *", 0, 0, 59, 60, 1},
		{"H(0-29) * * * *", 0, 0, 29, 0, 1},
		{"0 H(9-17) * * 1-5", 1, 9, 17, 0, 1},
		{"0 0 H(29-31) * *", 2, 29, 31, 0, 1},
		{"H(10-39)/10 * * * *", 0, 10, 39, 10, 3},
		{"0 0 * * H(1-5)", 4, 1, 5, 0, 1},
		{"CRON_TZ=Europe/Berlin H H * * *", 0, 0, 59, 0, 1},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			t.Parallel()
			picked := map[int]int{}
			for _, name := range jitterNames() {
				rest := strings.TrimPrefix(tc.spec, "CRON_TZ=Europe/Berlin ")
				a, err := expandH(rest, name)
				if err != nil {
					t.Fatal(err)
				}
				if b, _ := expandH(rest, name); a != b {
					t.Fatalf("%s: %q, then %q", name, a, b)
				}
				if strings.Contains(a, "H") {
					t.Fatalf("%s: %q still holds H", name, a)
				}
				vs := values(t, strings.Fields(a)[tc.field], tc.hi)
				step := max(tc.step, 1)
				if len(vs) != tc.n || vs[0] < tc.lo || vs[0] >= tc.lo+step && tc.step > 0 || vs[len(vs)-1] > tc.hi {
					t.Fatalf("%s: %q: field %d stands for %v, want %d values in %d-%d, stepping %d from below %d", name, a, tc.field, vs, tc.n, tc.lo, tc.hi, tc.step, tc.lo+step)
				}
				picked[vs[0]]++
				// The parsed schedule fires on the expanded spec's ticks.
				s, err := ParseJobSchedule(name, tc.spec, 0, nil)
				if err != nil {
					t.Fatal(err)
				}
				want, err := parser.Parse(strings.Replace(tc.spec, rest, a, 1))
				if err != nil {
					t.Fatal(err)
				}
				at := mustTime(t, "2026-05-04T10:11:12Z")
				if got, w := s.Next(at), want.Next(at); !got.Equal(w) {
					t.Fatalf("%s: Next = %v, the expanded spec %q gives %v", name, got, a, w)
				}
			}
			size := tc.hi - tc.lo + 1
			if tc.step > 0 {
				size = min(tc.step, size)
			}
			if want := min(size, 40); len(picked) < want {
				t.Errorf("500 names picked %d values, want at least %d: %v", len(picked), want, picked)
			}
		})
	}

	// Each field has its own hash: seconds and minutes (both 0-59) differ
	// for most names; elements of one field share it.
	same := 0
	for _, name := range jitterNames() {
		f, err := expandH("H H * * * *", name)
		if err != nil {
			t.Fatal(err)
		}
		if fs := strings.Fields(f); fs[0] == fs[1] {
			same++
		}
		f, err = expandH("H(0-29),H(30-59) * * * *", name)
		if err != nil {
			t.Fatal(err)
		}
		a, b, _ := strings.Cut(strings.Fields(f)[0], ",")
		if x, y := values(t, a, 0)[0], values(t, b, 0)[0]; y-x != 30 {
			t.Errorf("%s: H(0-29),H(30-59) gave %q", name, f)
		}
	}
	if same > 50 {
		t.Errorf("second and minute equal for %d of 500 names", same)
	}

	// Without H a spec is read as it is; names of days keep their H.
	for _, spec := range []string{"0 9 * * MON-THU", "0 9 * * thu", "@hourly", "*/5 * * * *"} {
		if got, err := expandH(spec, "x"); err != nil || got != spec {
			t.Errorf("expandH(%q) = %q, %v", spec, got, err)
		}
	}
}

func TestScheduleHErrors(t *testing.T) {
	t.Parallel()
	run := jobs.Func(func(context.Context) error { return nil })
	for _, tc := range []struct{ spec, want string }{
		{"H/61 * * * *", `minute field "H/61": step 61 is not from 1 to 60`},
		{"H/0 * * * *", `minute field "H/0": step 0 is not from 1 to 60`},
		{"H(5-3) * * * *", `minute field "H(5-3)": 5-3 is not a range`},
		{"H(0-60) * * * *", `minute field "H(0-60)": 60 is outside 0-59`},
		{"0 H(0-24) * * *", `hour field "H(0-24)": 24 is outside 0-23`},
		{"0 0 H/29 * *", `day of month field "H/29": step 29 is not from 1 to 28`},
		{"0 0 H(0-5) * *", `day of month field "H(0-5)": 0 is outside 1-31`},
		{"0 0 * H(1-13) *", `month field "H(1-13)": 13 is outside 1-12`},
		{"0 0 * * H(0-7)", `day of week field "H(0-7)": 7 is outside 0-6`},
		{"H(10-20)/12 * * * *", `step 12 is not from 1 to 11, the size of 10-20`},
		{"H/x * * * *", `step "x" is not a number`},
		{"H(a-5) * * * *", `"a" is not a number`},
		{"H(1-5 * * * *", `no closing parenthesis`},
		{"H(5) * * * *", `"5" is not a range a-b`},
		{"HH * * * *", `not one of H, H/n, H(a-b), H(a-b)/n`},
		{"H(1-5)x * * * *", `not one of H, H/n, H(a-b), H(a-b)/n`},
		{"0 H/61 * * * *", `minute field "H/61"`},
		{"H/61 0 * * * *", `second field "H/61"`},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			j := Job{Name: "nightly", Schedule: tc.spec, Run: run}
			_, err := j.validate(time.UTC)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("validate: %v, want ErrInvalid", err)
			}
			for _, part := range []string{`job "nightly"`, "schedule: ", tc.want} {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %q", err, part)
				}
			}
			if _, err := ParseJobSchedule("nightly", tc.spec, 0, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseJobSchedule: %v, want %q", err, tc.want)
			}
		})
	}

	t.Run("H without a name", func(t *testing.T) {
		if _, err := ParseSchedule("H * * * *", nil); err == nil || !strings.Contains(err.Error(), "ParseJobSchedule") {
			t.Errorf("ParseSchedule of H: %v", err)
		}
	})
	t.Run("negative jitter", func(t *testing.T) {
		j := Job{Name: "nightly", Schedule: "0 * * * *", Jitter: -time.Second, Run: run}
		_, err := j.validate(time.UTC)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `job "nightly": jitter: -1s is negative`) {
			t.Errorf("validate: %v", err)
		}
		if _, err := ParseJobSchedule("nightly", "0 * * * *", -time.Second, nil); err == nil {
			t.Error("ParseJobSchedule took a negative jitter")
		}
	})
	t.Run("jitter above MaxJitter", func(t *testing.T) {
		j := Job{Name: "nightly", Schedule: "0 0 29 2 *", Jitter: MaxJitter + time.Millisecond, Run: run}
		_, err := j.validate(time.UTC)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `job "nightly": jitter: `) {
			t.Errorf("validate: %v", err)
		}
		if _, err := ParseJobSchedule("nightly", "0 * * * *", MaxJitter+time.Millisecond, nil); err == nil {
			t.Error("ParseJobSchedule took a jitter above MaxJitter")
		}
	})
}

// A fleet of three replicas on one Redis runs each tick of jittered jobs
// once, at the tick moved by the job's offset and not before it.
func TestJitterFleet(t *testing.T) {
	t.Parallel()
	const jitter, ticks = 700 * time.Millisecond, 4
	// Two jobs whose offsets are far from the second and from each other.
	want := map[string]time.Duration{}
	var near time.Duration
	for i := 0; len(want) < 2; i++ {
		name := fmt.Sprintf("spread-%d", i)
		off := jittered{base: every(time.Second), max: jitter, frac: jitterHash(name)}.offset(time.Unix(0, 0), time.Unix(1, 0))
		if off >= 150*time.Millisecond && (near == 0 || off-near >= 200*time.Millisecond || near-off >= 200*time.Millisecond) {
			want[name], near = off, off
		}
	}

	type execution struct {
		job, replica string
		tick, start  time.Time
	}
	var (
		mu   sync.Mutex
		runs []execution
	)
	record := jobs.Func(func(ctx context.Context) error {
		start := time.Now()
		info, ok := jobs.InfoFrom(ctx)
		if !ok {
			return errors.New("no run info in the run's ctx")
		}
		mu.Lock()
		runs = append(runs, execution{info.Job, info.Replica, info.Tick, start})
		mu.Unlock()
		return nil
	})
	count := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		n := map[string]int{}
		for _, x := range runs {
			n[x.job]++
		}
		return n
	}

	srv := redistest.Start(t)
	type replica struct {
		s    *Scheduler
		runc chan error
	}
	var fleet []replica
	for i := range 3 {
		id := fmt.Sprintf("r%d", i+1)
		c, err := lock.New(srv.Client(), lock.WithClientID(id))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		s, err := New(c, WithReplicaID(id))
		if err != nil {
			t.Fatal(err)
		}
		for name := range want {
			if err := s.Add(Job{Name: name, Schedule: "@every 1s", Jitter: jitter, Run: record}); err != nil {
				t.Fatal(err)
			}
		}
		fleet = append(fleet, replica{s: s, runc: make(chan error, 1)})
	}
	for _, r := range fleet {
		go func() { r.runc <- r.s.Run(context.Background()) }()
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, r := range fleet {
			if err := r.s.Shutdown(ctx); err != nil {
				t.Errorf("Shutdown: %v", err)
			}
			if err := <-r.runc; !errors.Is(err, ErrClosed) {
				t.Errorf("Run = %v, want ErrClosed", err)
			}
		}
	}
	t.Cleanup(stop)

	deadline := time.Now().Add(ticks*time.Second + 10*time.Second)
	for n := count(); len(n) < len(want) || slices.Min(slices.Collect(maps.Values(n))) < ticks; n = count() {
		if time.Now().After(deadline) {
			t.Fatalf("runs by job after %v: %v, want %d of each", ticks*time.Second+10*time.Second, n, ticks)
		}
		time.Sleep(10 * time.Millisecond) // polling, with a deadline
	}
	stop()

	mu.Lock()
	defer mu.Unlock()
	byJob := map[string][]execution{}
	var late time.Duration
	for _, x := range runs {
		byJob[x.job] = append(byJob[x.job], x)
		late = max(late, x.start.Sub(x.tick))
	}
	byReplica := map[string]int{}
	for name, xs := range byJob {
		slices.SortFunc(xs, func(a, b execution) int { return a.tick.Compare(b.tick) })
		for i, x := range xs {
			byReplica[x.replica]++
			if off := time.Duration(x.tick.UnixMilli()%1000) * time.Millisecond; off != want[name] {
				t.Errorf("%s: tick %v is %v past its second, want its offset %v", name, x.tick, off, want[name])
			}
			if x.start.Before(x.tick) {
				t.Errorf("%s: tick %v ran early, at %v", name, x.tick, x.start)
			}
			if i > 0 && x.tick.Sub(xs[i-1].tick) != time.Second {
				t.Errorf("%s: ticks %v and %v ran one after the other (twice, or with one left out)", name, xs[i-1].tick, x.tick)
			}
		}
	}
	t.Logf("offsets %v; runs by replica %v; latest start %v after its tick", want, byReplica, late)
}

// Jobs' NextTicks (what `scheduler jobs` and the status page show) are
// the effective ticks: H and Jitter applied, as ParseJobSchedule gives them.
func TestJobsShowEffectiveTicks(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory(lock.WithClientID("solo"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	job := Job{Name: "spread", Schedule: "H H * * *", Jitter: 10 * time.Minute, Run: jobs.Func(func(context.Context) error { return nil })}
	if err := s.Add(job); err != nil {
		t.Fatal(err)
	}
	sched, err := ParseJobSchedule(job.Name, job.Schedule, job.Jitter, nil)
	if err != nil {
		t.Fatal(err)
	}
	views := s.Jobs(context.Background())
	if len(views) != 1 || len(views[0].NextTicks) != 3 {
		t.Fatalf("Jobs = %+v, want one job with three next ticks", views)
	}
	prev := views[0].NextTicks[0].Add(-time.Nanosecond)
	for i, tick := range views[0].NextTicks {
		if want := sched.Next(prev); !tick.Equal(want) {
			t.Errorf("next tick %d = %v, want %v (the effective schedule's)", i, tick, want)
		}
		prev = tick
	}
	// The name's offset moves the ticks off the whole minutes H picks
	// (fixed for this name): a view of the unjittered schedule would not.
	if first := views[0].NextTicks[0]; first.Second() == 0 && first.Nanosecond() == 0 {
		t.Errorf("first tick %v is on a whole minute: the jitter is not applied", first)
	}
}
