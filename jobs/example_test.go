package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lockcron/lockcron/jobs"
)

// logged is a Middleware that prints when a run starts and ends.
func logged(name string) jobs.Middleware {
	return func(next jobs.Runner) jobs.Runner {
		return jobs.Func(func(ctx context.Context) error {
			fmt.Println(name, "start")
			err := next.Run(ctx)
			fmt.Println(name, "end:", err)
			return err
		})
	}
}

// A Func wrapped in middleware: Recover outermost, so that a panic anywhere
// inside becomes an error.
func ExampleChain() {
	job := jobs.Func(func(ctx context.Context) error {
		var counts map[string]int
		counts["runs"]++ // panics: assignment to entry in nil map
		return nil
	})
	r := jobs.Chain(job, jobs.Recover(), logged("outer"), logged("inner"), jobs.Timeout(time.Minute))

	// The panic unwinds through inner and outer (no "end" lines) to Recover.
	err := r.Run(context.Background())
	fmt.Println(err)
	fmt.Println(errors.Is(err, jobs.ErrPanic))
	var pe *jobs.PanicError
	fmt.Println(errors.As(err, &pe) && len(pe.Stack) > 0)
	// Output:
	// outer start
	// inner start
	// jobs: panic: assignment to entry in nil map
	// true
	// true
}

// Go code registered by name, for config files to refer to.
func ExampleRegistry() {
	reg := jobs.NewRegistry() // or jobs.Register, on jobs.DefaultRegistry
	for _, name := range []string{"backup", "cleanup", "report"} {
		err := reg.Register(name, func(ctx context.Context) error {
			fmt.Println("running", name)
			return nil
		})
		if err != nil {
			fmt.Println(err)
		}
	}
	fmt.Println(reg.Register("backup", func(context.Context) error { return nil }))
	fmt.Println(reg.Register("back up", func(context.Context) error { return nil }))
	fmt.Println(reg.Names())

	if f, err := reg.Lookup("backup"); err == nil {
		_ = f.Run(context.Background())
	}
	_, err := reg.Lookup("bakup")
	fmt.Println(err)
	fmt.Println(errors.Is(err, jobs.ErrNotFound))
	// Output:
	// func "backup": jobs: name taken
	// func "back up": jobs: invalid argument: name has whitespace or control characters
	// [backup cleanup report]
	// running backup
	// func "bakup": jobs: no such func (known: backup, cleanup, report)
	// true
}

// What a run knows about itself, as an exec job's process sees it.
func ExampleInfo_Env() {
	ctx := jobs.WithInfo(context.Background(), jobs.Info{
		Job:     "backup",
		Tick:    time.Date(2025, 3, 1, 4, 0, 0, 0, time.UTC),
		Lock:    "job:backup",
		Token:   42,
		Attempt: 1,
		Replica: "replica-1",
	})
	info, ok := jobs.InfoFrom(ctx)
	fmt.Println(ok)
	for _, kv := range info.Env() {
		fmt.Println(kv)
	}
	// Output:
	// true
	// LOCKCRON_JOB=backup
	// LOCKCRON_TICK=2025-03-01T04:00:00Z
	// LOCKCRON_TOKEN=42
	// LOCKCRON_REPLICA=replica-1
	// LOCKCRON_ATTEMPT=1
	// LOCKCRON_TRIGGER=
}
