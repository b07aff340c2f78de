package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

func TestAddValidation(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := scheduler.New(c)
	if err != nil {
		t.Fatal(err)
	}
	noop := jobs.Func(func(context.Context) error { return nil })
	ok := scheduler.Job{Name: "taken", Schedule: "@every 1m", Run: noop}
	if err := s.Add(ok); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		job   scheduler.Job
		field string // in the message
	}{
		{"empty name", scheduler.Job{Schedule: "@daily", Run: noop}, "empty name"},
		{"brace in name", scheduler.Job{Name: "a{b}", Schedule: "@daily", Run: noop}, "name"},
		{"no func", scheduler.Job{Name: "j", Schedule: "@daily"}, "run"},
		{"bad schedule", scheduler.Job{Name: "j", Schedule: "61 * * * *", Run: noop}, "schedule"},
		{"too fast", scheduler.Job{Name: "j", Schedule: "@every 10ms", Run: noop}, "schedule"},
		{"bad lock", scheduler.Job{Name: "j", Schedule: "@daily", Run: noop, LockName: "x}"}, "lock_name"},
		{"negative timeout", scheduler.Job{Name: "j", Schedule: "@daily", Run: noop, Timeout: -time.Second}, "timeout"},
		{"negative retries", scheduler.Job{Name: "j", Schedule: "@daily", Run: noop, Retries: -1}, "retries"},
		{"negative backoff", scheduler.Job{Name: "j", Schedule: "@daily", Run: noop, Backoff: -1}, "backoff"},
		{"negative grace", scheduler.Job{Name: "j", Schedule: "@daily", Run: noop, MisfireGrace: -1}, "misfire_grace"},
		{"unknown lock kind", scheduler.Job{Name: "j", Schedule: "@daily", Run: noop, LockKind: "spin"}, "lock_kind"},
		{"unknown overlap", scheduler.Job{Name: "j", Schedule: "@daily", Run: noop, Overlap: "always"}, "overlap"},
		{"unknown misfire", scheduler.Job{Name: "j", Schedule: "@daily", Run: noop, Misfire: "all"}, "misfire"},
		{"unknown shutdown policy", scheduler.Job{Name: "j", Schedule: "@daily", Run: noop, OnShutdown: "wait"}, "on_shutdown"},
		{"name taken", scheduler.Job{Name: "taken", Schedule: "@daily", Run: noop}, "already taken"},
		{"manual ledger's name", scheduler.Job{Name: "x!manual", Schedule: "@daily", Run: noop}, "name"},
		{"one lock, two kinds", scheduler.Job{Name: "j", LockName: "taken", LockKind: scheduler.LockFair, Schedule: "@daily", Run: noop}, "lock_kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Add(tc.job)
			if !errors.Is(err, scheduler.ErrInvalid) {
				t.Fatalf("Add = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tc.field) || (tc.job.Name != "" && !strings.Contains(err.Error(), tc.job.Name)) {
				t.Fatalf("error %q does not name the job %q and %q", err, tc.job.Name, tc.field)
			}
		})
	}
	if st := s.Status(); len(st) != 1 || st[0].Job != "taken" || st[0].Schedule != "@every 1m" {
		t.Fatalf("Status after refused Adds = %+v, want the one job", st)
	}
}

func TestNewOptions(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := scheduler.New(nil); !errors.Is(err, scheduler.ErrInvalid) {
		t.Fatalf("New(nil) = %v", err)
	}
	for name, opt := range map[string]scheduler.Option{
		"nil logger":        scheduler.WithLogger(nil),
		"nil location":      scheduler.WithLocation(nil),
		"nil clock":         scheduler.WithClock(nil),
		"zero grace period": scheduler.WithShutdownTimeout(0),
	} {
		if _, err := scheduler.New(c, opt); !errors.Is(err, scheduler.ErrInvalid) {
			t.Errorf("%s: New = %v, want ErrInvalid", name, err)
		}
	}
}

func TestRunTwiceAndAfterStop(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	r := newReplica(t, c, "solo")
	// Two Runs: one runs, the other returns ErrRunning at once.
	results := make(chan error, 2)
	for range 2 {
		go func() { results <- r.s.Run(context.Background()) }()
	}
	select {
	case err := <-results:
		if !errors.Is(err, scheduler.ErrRunning) {
			t.Fatalf("second Run = %v, want ErrRunning", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("neither Run returned")
	}
	r.stop(t)
	if err := <-results; !errors.Is(err, scheduler.ErrClosed) {
		t.Fatalf("Run after Shutdown returned %v, want ErrClosed", err)
	}
	if err := r.s.Run(context.Background()); !errors.Is(err, scheduler.ErrClosed) {
		t.Fatalf("Run after Shutdown = %v, want ErrClosed", err)
	}
	if err := r.s.Add(scheduler.Job{Name: "late", Schedule: "@daily", Run: jobs.Func(func(context.Context) error { return nil })}); !errors.Is(err, scheduler.ErrClosed) {
		t.Fatalf("Add after Shutdown = %v, want ErrClosed", err)
	}
}

func TestStatusZone(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	s, err := scheduler.New(c, scheduler.WithLocation(berlin))
	if err != nil {
		t.Fatal(err)
	}
	noop := jobs.Func(func(context.Context) error { return nil })
	for _, j := range []scheduler.Job{
		{Name: "default", Schedule: "0 3 * * *", Run: noop},
		{Name: "own", Schedule: "CRON_TZ=America/New_York 0 3 * * *", Run: noop},
		{Name: "job", Schedule: "@daily", Run: noop, Location: time.UTC},
	} {
		if err := s.Add(j); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"default": "Europe/Berlin", "own": "America/New_York", "job": "UTC"}
	for _, st := range s.Status() {
		if st.Zone != want[st.Job] {
			t.Errorf("job %q: zone %q, want %q", st.Job, st.Zone, want[st.Job])
		}
	}
}
