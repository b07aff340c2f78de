package jobs

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix starts the names of the environment variables that carry the
// run's Info (see Info.Env). An exec job's Env (execjob.Exec.Env) may not
// set such names.
const EnvPrefix = "LOCKCRON_"

// Headers that carry a run's Info on the requests of an http job
// (httpjob.HTTP); the values are those of Info.Env. Names that start with
// HeaderPrefix are reserved for them: httpjob.HTTP.Headers may not set any.
const (
	HeaderPrefix  = "Lockcron-"
	HeaderJob     = "Lockcron-Job"     // Info.Job
	HeaderTick    = "Lockcron-Tick"    // Info.Tick, RFC 3339 in UTC (a fraction for a jittered tick)
	HeaderToken   = "Lockcron-Token"   // Info.Token, the fencing token, in decimal
	HeaderReplica = "Lockcron-Replica" // Info.Replica
	HeaderAttempt = "Lockcron-Attempt" // Info.Attempt, in decimal
	HeaderTrigger = "Lockcron-Trigger" // Info.Trigger, in decimal; empty for a scheduled run
	HeaderParent  = "Lockcron-Parent"  // Info.Parent, job@tick; only on a run that follows another

	// HeaderBackfill is "1" on a backfill's run (Info.Backfill); the
	// header is absent on other runs.
	HeaderBackfill = "Lockcron-Backfill"
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
	// Trigger is the number of a manual run (the scheduler's Trigger,
	// counted per job across the fleet), 0 for a scheduled run. A manual
	// run's Tick is the time it was asked for, which may fall in the same
	// second as a scheduled tick: (Tick, Trigger) tells runs apart.
	Trigger int64
	// Backfill is true for a run of a backfill (the scheduler's
	// Backfill): a past tick run on an operator's request, Tick being
	// that past tick.
	Backfill bool
	// Params are a manual run's parameters (the scheduler's
	// TriggerParams): names of a-z, 0-9 and _ that the job declares, each
	// with its value; nil for a scheduled run or a run given none. Env
	// and the http job pass them on (ParamEnv, ParamHeader). The map is
	// the run's: do not change it.
	Params map[string]string
	// Parent is the run that started this one, for a job that runs after
	// others (the scheduler's Job.After): "job@tick", the parent's name
	// and its run's tick (RFC 3339 in UTC, as LOCKCRON_TICK); with several
	// parents, the one whose finish completed the set. "" for a run that
	// follows none.
	Parent string
}

// ParamEnvPrefix and ParamHeaderPrefix start the names that carry a run's
// Params: LOCKCRON_PARAM_CUSTOMER, Lockcron-Param-Customer.
const (
	ParamEnvPrefix    = EnvPrefix + "PARAM_"
	ParamHeaderPrefix = HeaderPrefix + "Param-"
)

// ParamEnv is the environment variable that carries the parameter name:
// LOCKCRON_PARAM_ and the name in upper case.
func ParamEnv(name string) string { return ParamEnvPrefix + strings.ToUpper(name) }

// ParamHeader is the header that carries the parameter name, in its
// canonical form: Lockcron-Param- and the name with each _ made a -
// (proxies such as nginx and Apache drop header names with _) and each
// word's first letter in upper case (report_date:
// Lockcron-Param-Report-Date). Names are of a-z, 0-9 and _, so no two
// share a header.
func ParamHeader(name string) string {
	return http.CanonicalHeaderKey(ParamHeaderPrefix + strings.ReplaceAll(name, "_", "-"))
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
// order: LOCKCRON_JOB, LOCKCRON_TICK (RFC 3339 in UTC, with a fraction of
// a second only when the tick has one: a jittered tick), LOCKCRON_TOKEN,
// LOCKCRON_REPLICA, LOCKCRON_ATTEMPT, LOCKCRON_TRIGGER (the manual run's
// number, empty for a scheduled run), on a backfill's run only
// LOCKCRON_BACKFILL=1, then one LOCKCRON_PARAM_<NAME> per parameter
// (ParamEnv), in the order of their names, and LOCKCRON_PARENT (Parent)
// for a run that follows another. Lock is not included.
// Values are not quoted or escaped. Append the result to os.Environ() for
// exec.Cmd.Env.
func (i Info) Env() []string {
	env := []string{
		"LOCKCRON_JOB=" + i.Job,
		"LOCKCRON_TICK=" + i.Tick.UTC().Format(time.RFC3339Nano),
		"LOCKCRON_TOKEN=" + strconv.FormatInt(i.Token, 10),
		"LOCKCRON_REPLICA=" + i.Replica,
		"LOCKCRON_ATTEMPT=" + strconv.Itoa(i.Attempt),
		"LOCKCRON_TRIGGER=" + i.TriggerString(),
	}
	if i.Backfill {
		env = append(env, "LOCKCRON_BACKFILL=1")
	}
	for _, k := range slices.Sorted(maps.Keys(i.Params)) {
		env = append(env, ParamEnv(k)+"="+i.Params[k])
	}
	if i.Parent != "" {
		env = append(env, "LOCKCRON_PARENT="+i.Parent)
	}
	return env
}

// TriggerString is Trigger in decimal, or "" for a scheduled run (0): the
// value of LOCKCRON_TRIGGER and of the Lockcron-Trigger header.
func (i Info) TriggerString() string {
	if i.Trigger == 0 {
		return ""
	}
	return strconv.FormatInt(i.Trigger, 10)
}
