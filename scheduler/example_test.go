package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// A Scheduler on lock.NewMemory, for one process: New, Add a job, Run it
// until the job has run once, then a graceful Shutdown.
func Example() {
	locks, err := lock.NewMemory()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close() // after the Scheduler has stopped

	s, err := scheduler.New(locks)
	if err != nil {
		fmt.Println(err)
		return
	}
	ran := make(chan struct{})
	var once sync.Once
	err = s.Add(scheduler.Job{Name: "report", Schedule: "@every 1s", Run: jobs.Func(func(ctx context.Context) error {
		once.Do(func() {
			info, _ := jobs.InfoFrom(ctx)
			fmt.Printf("%s ran, attempt %d\n", info.Job, info.Attempt)
			close(ran)
		})
		return nil
	})})
	if err != nil {
		fmt.Println(err)
		return
	}

	errc := make(chan error, 1)
	go func() { errc <- s.Run(context.Background()) }()
	<-ran

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		fmt.Println(err)
	}
	fmt.Println(errors.Is(<-errc, scheduler.ErrClosed))
	// Output:
	// report ran, attempt 1
	// true
}

// The README's scheduler: a replica of a fleet on Redis, with a job that
// runs at 2:00 in Berlin, once across the fleet.
func Example_readme() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks, err := lock.New(rdb, lock.WithClientID("replica-1")) // one per replica
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close() // after Run has returned

	s, err := scheduler.New(locks)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = s.Add(scheduler.Job{
		Name:     "nightly-report",
		Schedule: "CRON_TZ=Europe/Berlin 0 2 * * *", // or "*/10 * * * * *", "@every 30s", "@hourly"
		Run: jobs.Func(func(ctx context.Context) error {
			info, _ := jobs.InfoFrom(ctx) // job, tick, fencing token, attempt, replica
			return report(ctx, info.Tick, info.Token)
		}),
		Timeout: 10 * time.Minute,
		Retries: 2,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := s.Run(ctx); !errors.Is(err, scheduler.ErrClosed) { // blocks; on SIGTERM: graceful stop
		fmt.Println(err)
	}
}

// report stands for the job's work.
func report(ctx context.Context, tick time.Time, token int64) error { return nil }

// A replica of a fleet, on Redis: each tick of the job runs on one replica.
// Run returns after SIGTERM or SIGINT, once the runs have finished (or
// handed their ticks off). The job fences its write with its lease's
// token, so that a replica that lost the lock cannot overwrite the result
// of a newer run.
func Example_redis() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks, err := lock.New(rdb, lock.WithClientID("replica-1"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close() // after Run has returned

	s, err := scheduler.New(locks)
	if err != nil {
		fmt.Println(err)
		return
	}
	// The store keeps the highest token it has accepted and refuses lower
	// ones: here a Redis hash, checked and written in one script.
	fencedSet := redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], 'token') or '0') >= tonumber(ARGV[1]) then
  return 0
end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'body', ARGV[2])
return 1`)
	err = s.Add(scheduler.Job{Name: "report", Schedule: "0 6 * * *", Run: jobs.Func(func(ctx context.Context) error {
		info, _ := jobs.InfoFrom(ctx)
		body := fmt.Sprintf("report of %s", info.Tick.Format(time.DateOnly))
		ok, err := fencedSet.Run(ctx, rdb, []string{"report:latest"}, info.Token, body).Int()
		if err != nil {
			return err
		}
		if ok == 0 {
			return errors.New("report: a newer run has written already")
		}
		return nil
	})})
	if err != nil {
		fmt.Println(err)
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := s.Run(ctx); !errors.Is(err, scheduler.ErrClosed) {
		fmt.Println(err)
	}
}

// A program that logs with log/slog hands its logger to the Scheduler; one
// that passes no logger still hears of failed runs and lost locks: warnings
// and errors go to stderr.
func ExampleWithSlog() {
	locks, err := lock.NewMemory()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer locks.Close()

	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	s, err := scheduler.New(locks, scheduler.WithSlog(log))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = s // Add jobs, then Run: "run finished" lines go to log, with job, tick, outcome
	// Output:
}
