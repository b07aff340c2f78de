package execjob_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/execjob"
)

// An exec job: the process sees the run's info in its environment, and its
// output is logged line by line.
func ExampleExec() {
	log := hclog.New(&hclog.LoggerOptions{Output: os.Stdout, DisableTime: true})
	r := &execjob.Exec{
		Command: []string{"sh", "-c", `echo "tick $LOCKCRON_TICK, token $LOCKCRON_TOKEN"; echo "$GREETING" >&2; exit 3`},
		Env:     map[string]string{"GREETING": "hello"},
		Logger:  log,
	}
	ctx := jobs.WithInfo(context.Background(), jobs.Info{
		Job:   "backup",
		Tick:  time.Date(2025, 3, 1, 4, 0, 0, 0, time.UTC),
		Token: 42,
	})
	err := r.Run(ctx)
	fmt.Println(err)
	var xe *execjob.ExitError
	fmt.Println(errors.As(err, &xe) && xe.Code == 3)
	// Unordered output:
	// [INFO]  output: job=backup tick=2025-03-01T04:00:00Z stream=stdout line="tick 2025-03-01T04:00:00Z, token 42"
	// [INFO]  output: job=backup tick=2025-03-01T04:00:00Z stream=stderr line=hello
	// jobs: exec "sh": exit status 3; stderr: "hello"
	// true
}
