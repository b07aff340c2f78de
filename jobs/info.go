package jobs

import (
	"context"
	"strconv"
	"time"
)

// Info is what a run knows about itself. The scheduler puts it in the
// run's ctx (WithInfo), so that jobs can fence their writes with Token; exec
// jobs pass it on to their process in the environment (Env). Info is a plain
// value: copies are independent and safe to use concurrently.
type Info struct {
	Job     string    // the job's name
	Tick    time.Time // the scheduled time of the tick, not when the run started
	Lock    string    // the lock's name
	Token   int64     // the lease's fencing token
	Attempt int       // 1 for the first try of this tick, counting retries and handoffs
	Replica string    // the replica running it
}

type infoKey struct{}

// WithInfo returns a copy of ctx that carries info; its cancellation,
// deadline and cause are ctx's. ctx must not be nil. It is safe for
// concurrent use.
func WithInfo(ctx context.Context, info Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoFrom returns the Info that WithInfo put in ctx or a parent of it, and
// whether there was one; whether ctx has ended does not matter. ctx must
// not be nil. It is safe for concurrent use.
func InfoFrom(ctx context.Context) (Info, bool) {
	info, ok := ctx.Value(infoKey{}).(Info)
	return info, ok
}

// Env returns i as environment variables, "KEY=value" strings in this
// order: LOCKCRON_JOB, LOCKCRON_TICK (RFC 3339 in UTC, whole seconds),
// LOCKCRON_TOKEN, LOCKCRON_REPLICA, LOCKCRON_ATTEMPT. Lock is not included.
// Values are not quoted or escaped. Append the result to os.Environ() for
// exec.Cmd.Env.
func (i Info) Env() []string {
	return []string{
		"LOCKCRON_JOB=" + i.Job,
		"LOCKCRON_TICK=" + i.Tick.UTC().Format(time.RFC3339),
		"LOCKCRON_TOKEN=" + strconv.FormatInt(i.Token, 10),
		"LOCKCRON_REPLICA=" + i.Replica,
		"LOCKCRON_ATTEMPT=" + strconv.Itoa(i.Attempt),
	}
}
