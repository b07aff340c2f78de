package scheduler_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// syncBuffer is a bytes.Buffer safe for a logger and the test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A program that uses log/slog hears of a failed run through WithSlog, at
// ERROR, with the run's fields; the INFO lines stay out at level WARN.
func TestWithSlog(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	clk := testclock.NewFake(time.Date(2026, 11, 24, 2, 0, 0, 0, time.UTC))
	r := newReplica(t, c, "r1", scheduler.WithSlog(log), scheduler.WithClock(clk))
	r.add(t, scheduler.Job{Name: "broken", Schedule: "@every 1m", Run: jobs.Func(func(context.Context) error {
		return errors.New("disk full")
	})})
	r.start()
	tick := step(t, clk, 1)
	testkit.Eventually(t, 10*time.Second, "the failed run logged", func() bool {
		return strings.Contains(buf.String(), "run finished: job failed")
	})
	out := buf.String()
	for _, want := range []string{"level=ERROR", "job=broken", "tick=" + tick.UTC().Format(time.RFC3339Nano), `error="disk full"`, "outcome=failed", "logger=scheduler"} {
		if !strings.Contains(out, want) {
			t.Errorf("slog output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "level=INFO") {
		t.Errorf("slog output at level WARN holds INFO lines:\n%s", out)
	}
}

func TestWithSlogNil(t *testing.T) {
	t.Parallel()
	c, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := scheduler.New(c, scheduler.WithSlog(nil)); !errors.Is(err, scheduler.ErrInvalid) {
		t.Fatalf("New(WithSlog(nil)) = %v, want ErrInvalid", err)
	}
}
