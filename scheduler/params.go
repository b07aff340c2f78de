package scheduler

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/fleet"
)

// MaxParamValue is the longest value of a manual run's parameter, in
// bytes (Job.Params, TriggerParams).
const MaxParamValue = 4096

// hParams is the field of a history entry that keeps a manual run's
// parameters, a JSON object.
const hParams = "params"

// paramKey is what a parameter's name looks like.
var paramKey = regexp.MustCompile(`^[a-z0-9_]+$`)

// checkParams checks the names j.Params declares.
func (j *Job) checkParams() []error {
	var errs []error
	seen := map[string]bool{}
	for i, k := range j.Params {
		switch {
		case !paramKey.MatchString(k):
			errs = append(errs, &FieldError{Job: j.Name, Field: "params", Msg: fmt.Sprintf("name %d, %q: not made of a-z, 0-9 and _", i, k)})
		case seen[k]:
			errs = append(errs, &FieldError{Job: j.Name, Field: "params", Msg: fmt.Sprintf("name %d, %q: declared twice", i, k)})
		}
		seen[k] = true
	}
	return errs
}

// checkRunParams checks the parameters of a manual run of j: only the
// names it declares, each value at most MaxParamValue bytes of UTF-8
// without control characters (they travel in headers and the
// environment). The error wraps ErrInvalid and says what is accepted.
func (j *Job) checkRunParams(params map[string]string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("scheduler: trigger %q: %s: %w", j.Name, fmt.Sprintf(format, args...), ErrInvalid)
	}
	accepts := "the job accepts " + strings.Join(j.Params, ", ")
	if len(j.Params) == 0 {
		accepts = "the job accepts none"
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		v := params[k]
		switch {
		case !paramKey.MatchString(k):
			return bad("parameter %q: a name is made of a-z, 0-9 and _; %s", k, accepts)
		case len(j.Params) == 0:
			return bad("parameter %q: the job accepts no parameters (declare them in its params)", k)
		case !slices.Contains(j.Params, k):
			return bad("parameter %q is not accepted: %s", k, accepts)
		case len(v) > MaxParamValue:
			return bad("parameter %q: value of %d bytes: at most %d", k, len(v), MaxParamValue)
		case !utf8.ValidString(v):
			return bad("parameter %q: the value is not UTF-8", k)
		case strings.ContainsFunc(v, unicode.IsControl):
			return bad("parameter %q: the value holds a control character (a newline, a tab, ...)", k)
		}
	}
	return nil
}

// TriggerParams is Trigger with parameters for the run: the job must
// declare each name in its Params, and the run gets them in its
// jobs.Info (Params; an exec job as LOCKCRON_PARAM_<NAME>, an http job as
// Lockcron-Param-<Name> headers); its history entry keeps them. They are
// stored with the request's number in the job's ledger of manual runs in
// the same step, so whichever replica claims the run reads them, also
// after a handoff; the requests of a job with Params run each once, in
// the order of their numbers (see the package doc). A name that is not declared (any, for a job without
// Params), a name not made of a-z, 0-9 and _, or a value over
// MaxParamValue bytes, not UTF-8 or with a control character is refused
// with an error wrapping ErrInvalid that says what the job accepts, before
// anything is stored or sent. Parameters are logged by name, never by
// value. params nil or empty is Trigger. It returns what Trigger returns,
// and its errors.
func (s *Scheduler) TriggerParams(ctx context.Context, job string, params map[string]string) (int64, error) {
	e, err := s.entry(job)
	if err != nil {
		return 0, err
	}
	if err := e.job.checkRunParams(params); err != nil {
		return 0, err
	}
	return s.trigger(ctx, e, params)
}

// paramNames are the names of params, sorted: what the logs show of
// them.
func paramNames(params map[string]string) []string {
	return slices.Sorted(maps.Keys(params))
}

// claimParams reads the parameters of r, a manual run just claimed in
// ledger (the claim carries them; a job on every replica claims in a
// ledger of its own and reads them from the fleet's ledger of manual
// runs; a run that follows a parent's manual run has none), and logs the
// claim with their names. It returns why the run must not start: the
// parameters could not be read, or a job with Params finds no record of
// the request (the store lost it, say Redis restarted empty between the
// trigger and the claim). The run ends then, done, with the outcome failed
// and errParamsLost, never without its parameters. A request made without
// params, before a reload gave the job Params, has a record that is not
// ordered: it runs with none.
// errParamsLost: a manual run of a job with Params whose request the store
// has no record of. Its tick is done (outcome failed, not run): another
// claim would find no record either, and later requests wait behind it.
var errParamsLost = errors.New("not run")

func (s *Scheduler) claimParams(ctx context.Context, r *run, ledger *fleet.Ledger, log hclog.Logger) error {
	if ledger != r.e.manualLedger() {
		log.Info("manual run claimed")
		return nil // a parent's manual run's: the request is the parent's
	}
	p := r.cl.Params
	if p == nil && len(r.e.job.Params) > 0 && !r.cl.Requested {
		log.Error("manual run not started: the store has no record of its request (lost with the store's data?)")
		return fmt.Errorf("%w: the store has no record of this request and its parameters (lost with the store's data?)", errParamsLost)
	}
	if len(p) == 0 {
		log.Info("manual run claimed")
		return nil
	}
	r.params = p
	log.Info("manual run claimed", "params", paramNames(p))
	return nil
}

// manualRankKey is what ranks the replicas for manual run n of e's job:
// n, so that they share the runs out; 0 for a job with Params, so that
// one replica claims its runs one after the other (the store runs them in
// their order anyway: a claim of a later one claims an earlier one not
// done first, see Trigger).
func manualRankKey(e *entry, n int64) int64 {
	if len(e.job.Params) > 0 {
		return 0
	}
	return n
}

// request notes manual run n of a job with Params, requested at at, to be
// claimed in its turn (nextRequested). e.mu is held.
func (e *entry) request(n int64, at time.Time) {
	if len(e.job.Params) == 0 {
		return
	}
	if e.requested == nil {
		e.requested = map[int64]time.Time{}
	}
	e.requested[n] = at
}

// nextRequested returns the earliest manual run noted by request after
// done, and when it was requested, and forgets it; 0 if there is none. e.mu
// is held.
func (e *entry) nextRequested(done int64) (int64, time.Time) {
	var n int64
	for k := range e.requested {
		switch {
		case k <= done:
			delete(e.requested, k)
		case n == 0 || k < n:
			n = k
		}
	}
	at := e.requested[n]
	delete(e.requested, n)
	return n, at
}
