package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/execjob"
	"github.com/lockcron/lockcron/jobs/httpjob"
	"github.com/lockcron/lockcron/scheduler"
)

// schedulerFields maps the fields of scheduler.FieldError to the file's
// names where they differ.
var schedulerFields = map[string]string{"history.keep": "history_keep", "history.max_age": "history_max_age"}

// decodeJobs decodes the job blocks: what is about the file here, the
// rest (defaults, enums, bounds, the schedule) by scheduler.Job.Validate,
// whose errors are put at their settings' places.
func (d *decoder) decodeJobs(cfg *Config) {
	cals, used := d.decodeCalendars(), make(map[string]bool)
	first := make(map[string]Pos)
	for i := range d.raw.Jobs {
		b := &d.raw.Jobs[i]
		jp := func(key ...string) []string { return append([]string{"job", strconv.Itoa(i)}, key...) }
		nerrs := len(d.errs)
		switch {
		case b.Name == "":
			d.errf(jp("name"), `empty name: give each job a name, job "name" { ... }`)
		case strings.ContainsFunc(b.Name, unicode.IsControl):
			d.errf(jp("name"), "has control characters")
		}
		if p, dup := first[b.Name]; dup && b.Name != "" {
			d.errf(jp("name"), "duplicate job name: a job %q is at line %d already", b.Name, p.Line)
		} else {
			first[b.Name] = posOf(b.At)
		}
		nameOK := len(d.errs) == nerrs
		j := d.decodeJob(b, jp, cfg)
		j.Exclude, j.Digest = d.decodeExclude(b, jp, cals, used, j.Digest)
		if nameOK {
			cfg.Jobs = append(cfg.Jobs, j)
		}
	}
	d.checkGroups(cfg)
	d.checkChains(cfg)
	d.checkCalendarsUsed(cals, used)
}

// decodeJob decodes one job.
func (d *decoder) decodeJob(b *jobBlock, jp func(...string) []string, cfg *Config) Job {
	j := Job{Job: scheduler.Job{Name: b.Name, Schedule: b.Schedule, LockName: b.LockName, LockKind: scheduler.LockKind(b.LockKind),
		Overlap: scheduler.Overlap(b.Overlap), Misfire: scheduler.Misfire(b.Misfire), OnShutdown: scheduler.ShutdownPolicy(b.OnShutdown),
		Retries: b.Retries, MaxConcurrency: b.MaxConcurrency, ConcurrencyGroup: b.ConcurrencyGroup, PauseAfterFailures: b.PauseAfter,
		After: b.After, When: scheduler.When(b.When)},
		Pos: posOf(b.At), Digest: jobDigest(b)}
	j.Replicas = scheduler.Replicas(b.Replicas)
	j.Params = b.Params
	if b.OldLock != nil {
		d.errf(jp("lock"), "renamed: write lock_kind = %q (the lock's kind; lock_name names the lock)", *b.OldLock)
	}
	if d.set(jp("time_zone")...) {
		switch loc, err := time.LoadLocation(b.TimeZone); {
		case b.TimeZone == "" || b.TimeZone == "Local":
			d.errf(jp("time_zone"), "%q: name a zone such as \"Europe/Berlin\" or \"UTC\"; the machine's own zone could differ between replicas", b.TimeZone)
		case err != nil:
			d.errf(jp("time_zone"), "unknown time zone %q", b.TimeZone)
		default:
			j.TimeZone, j.Location = b.TimeZone, loc
		}
	}
	if !d.set(jp("schedule")...) && !d.set(jp("after")...) {
		d.missing(jp("schedule"), "missing: every job needs a schedule, such as \"*/5 * * * *\" or \"@every 30s\", or after, the jobs whose runs it follows")
	} else if s := strings.TrimSpace(b.Schedule); j.TimeZone != "" && (strings.HasPrefix(s, "CRON_TZ=") || strings.HasPrefix(s, "TZ=")) {
		d.warnf(jp("time_zone"), "the schedule names its own zone (CRON_TZ=), which wins over time_zone")
	}
	if d.set(jp("lock_name")...) && b.LockName == "" {
		d.errf(jp("lock_name"), "empty: leave it out to use the job's name")
	}
	if d.set(jp("max_concurrency")...) && b.MaxConcurrency < 1 {
		d.errf(jp("max_concurrency"), "%d: must be at least 1 (leave it out for no limit)", b.MaxConcurrency)
	}
	if d.set(jp("concurrency_group")...) && !d.set(jp("max_concurrency")...) {
		d.errf(jp("concurrency_group"), "needs max_concurrency, the number of runs the group allows at once")
	}
	j.Jitter = d.dur(0, b.Jitter, 0, "", jp("jitter")...)
	j.Timeout = d.dur(0, b.Timeout, 0, "", jp("timeout")...)
	j.MisfireGrace = d.dur(0, b.MisfireGrace, 0, "", jp("misfire_grace")...)
	j.StartDeadline = d.dur(0, b.StartDeadline, 0, "", jp("start_deadline")...)
	j.AlertAfter = d.dur(0, b.AlertAfter, 0, "", jp("alert_after")...)
	j.Backoff = d.dur(0, b.Backoff, 0, "", jp("backoff")...)
	j.HistoryKeep, j.HistoryMaxAge = d.retention(b.HistoryKeep, b.HistoryMaxAge, jp("history_keep"), jp("history_max_age"))
	run := d.decodeKind(b, &j, jp, cfg)
	sj := j.Job
	sj.Run = run
	var fe *scheduler.FieldError
	for _, err := range unjoin(sj.Validate()) {
		switch {
		case !errors.As(err, &fe):
			if b.Name != "" { // an empty name is reported above
				d.errf(jp(), "%v", err)
			}
		case fe.Field == "run" || fe.Field == "schedule" && !d.set(jp("schedule")...):
			// reported as the job's kind, or as missing
		case fe.Field == "name":
			d.errf(jp("name"), "%s", fe.Msg)
		default:
			d.errf(jp(cmp.Or(schedulerFields[fe.Field], fe.Field)), "%s", fe.Msg)
		}
	}
	sj.Run, sj.Location = nil, j.Location // nil without time_zone: the scheduler's zone
	j.Job = sj
	if d.set(jp("misfire_grace")...) && j.Misfire != scheduler.MisfireRunOnce {
		d.warnf(jp("misfire_grace"), "has no effect unless misfire = %q", scheduler.MisfireRunOnce)
	} else if d.set(jp("misfire_grace")...) && j.StartDeadline > 0 && j.MisfireGrace > j.StartDeadline {
		d.warnf(jp("misfire_grace"), "%v is longer than start_deadline (%v): a missed tick older than start_deadline is not run but recorded deadline_missed",
			j.MisfireGrace, j.StartDeadline)
	}
	if j.AlertAfter > 0 && j.Timeout > 0 && j.Retries == 0 && j.AlertAfter >= j.Timeout {
		d.warnf(jp("alert_after"), "%v is not shorter than timeout (%v): the run is stopped before it could be announced", j.AlertAfter, j.Timeout)
	}
	if j.Timeout > 0 {
		if gap := shortestGap(j.Name, j.Schedule, j.Jitter, j.Location); gap > 0 && j.Timeout > gap {
			effect := "skipped"
			if j.Overlap == scheduler.OverlapQueue {
				effect = "queued (one at a time) or skipped"
			}
			if j.Overlap == scheduler.OverlapReplace {
				effect = "run in its place: the next tick ends it (overlap replace)"
			}
			d.warnf(jp("timeout"), "%v is longer than the %v between ticks: while a run goes on, later ticks are %s", j.Timeout, gap, effect)
		}
	}
	return j
}

// missing reports a setting a job lacks, unless HCL found errors in the
// job: an unknown argument may be the missing one misspelt, and one of the
// wrong type is reported already.
func (d *decoder) missing(path []string, msg string) {
	if i, _ := strconv.Atoi(path[1]); !d.badJobs[i] {
		d.errf(path, "%s", msg)
	}
}

// unjoin returns the errors joined in err (errors.Join), or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err == nil {
		return nil
	}
	return []error{err}
}

// shortestGap is the shortest time between the next few ticks of a job's
// schedule, or 0 if it cannot tell.
func shortestGap(name, spec string, jitter time.Duration, loc *time.Location) time.Duration {
	s, err := scheduler.ParseJobSchedule(name, spec, jitter, loc)
	if err != nil {
		return 0
	}
	var gap time.Duration
	t := s.Next(time.Now())
	for range 8 {
		n := s.Next(t)
		if n.IsZero() || !n.After(t) {
			break
		}
		if g := n.Sub(t); gap == 0 || g < gap {
			gap = g
		}
		t = n
	}
	return gap
}

// decodeKind decodes the one kind a job must have (exec, http or func) and
// returns its Runner, or nil.
func (d *decoder) decodeKind(b *jobBlock, j *Job, jp func(...string) []string, cfg *Config) jobs.Runner {
	var kinds []string
	for k, set := range map[string]bool{KindExec: b.Exec != nil, KindHTTP: b.HTTP != nil, KindFunc: b.Func != nil} {
		if set {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	switch len(kinds) {
	case 0:
		d.missing(jp("kind"), `no kind: give one of exec { command = [...] }, http { url = "..." } or func = "name"`)
		return nil
	case 1:
	default:
		d.errf(jp(kinds[1]), "%s and %s are both set: a job has exactly one kind", kinds[0], kinds[1])
		return nil
	}
	j.Kind = kinds[0]
	switch j.Kind {
	case KindExec:
		x := &execjob.Exec{Command: b.Exec.Command, Env: b.Exec.Env, Dir: b.Exec.Dir, Grace: execjob.DefaultGrace}
		if !d.set(jp("exec", "command")...) {
			d.missing(jp("exec", "command"), `missing: the program and its arguments, such as ["sh", "-c", "echo hello"]`)
		} else if len(x.Command) == 0 {
			d.errf(jp("exec", "command"), "empty: give the program and its arguments")
		}
		x.Grace = d.dur(x.Grace, b.Exec.Grace, 0, "", jp("exec", "grace")...)
		if x.Grace >= cfg.ShutdownTimeout {
			path := jp("exec", "grace")
			if !d.set(path...) {
				path = []string{"shutdown_timeout"}
			}
			e := d.at(path, "exec.grace (%v) must be shorter than shutdown_timeout (%v): a graceful stop that ends first releases the lock and hands the tick over while the process may still run", x.Grace, cfg.ShutdownTimeout)
			e.Job = b.Name
			d.errs = append(d.errs, e)
		}
		j.Exec = x
		d.kindErrors(jp, "exec", x.Validate(), len(x.Command) == 0)
		return x
	case KindHTTP:
		h := b.HTTP
		j.HTTP = &httpjob.HTTP{URL: h.URL, Method: h.Method, Headers: h.Headers, Body: h.Body, ExpectStatus: h.ExpectStatus}
		if !d.set(jp("http", "url")...) {
			d.missing(jp("http", "url"), "missing: the http(s) URL to call")
		}
		d.kindErrors(jp, "http", j.HTTP.Validate(), !d.set(jp("http", "url")...))
		return j.HTTP
	}
	name := *b.Func
	if name == "" {
		d.errf(jp("func"), "empty: give the name of a func registered with jobs.Register")
		return nil
	}
	f, err := d.o.registry.Lookup(name)
	if err != nil {
		d.errf(jp("func"), "%s", funcError(name, err))
		return nil
	}
	j.Func = name
	return f
}

// funcError words a registry's lookup error: the name, and the names it
// suggests.
func funcError(name string, err error) string {
	msg := err.Error()
	if errors.Is(err, jobs.ErrNotFound) {
		suffix := ""
		if i := strings.LastIndex(msg, " ("); i >= 0 && strings.HasSuffix(msg, ")") {
			suffix = msg[i:]
		}
		return fmt.Sprintf("%q is not registered%s", name, suffix)
	}
	return msg
}

// goField matches the start of an error of execjob.Exec.Validate or
// httpjob.HTTP.Validate: "exec Command[0]: jobs: invalid argument: ".
var goField = regexp.MustCompile(`^(\w+) (\w+)(\[.*?\])?: ` + regexp.QuoteMeta(jobs.ErrInvalid.Error()) + `: `)

// kindErrors reports the errors of execjob.Exec.Validate or httpjob.HTTP.Validate
// at the file's settings: ExpectStatus[1] is expect_status[1]. If missing,
// the main field was reported missing (or empty) already: its error is
// left out.
func (d *decoder) kindErrors(jp func(...string) []string, kind string, err error, missing bool) {
	for _, e := range unjoin(err) {
		m := goField.FindStringSubmatch(e.Error())
		if m == nil || m[1] != kind {
			d.errf(jp(kind), "%v", e)
			continue
		}
		field := strings.ToLower(regexp.MustCompile("([a-z])([A-Z])").ReplaceAllString(m[2], "${1}_${2}"))
		if missing && (field == "command" || field == "url") {
			continue
		}
		fe := d.at(jp(kind, field), "%s", strings.TrimPrefix(e.Error(), m[0]))
		fe.Field += m[3]
		d.errs = append(d.errs, fe)
	}
}

// checkGroups checks that the jobs of a concurrency group agree on its
// max_concurrency, and that jobs that share a lock take it the same way (a
// fair release wakes only the fair queue, and reentrant claims ignore it).
func (d *decoder) checkGroups(cfg *Config) {
	groups, locks := make(map[string]Job), make(map[string]Job)
	for _, j := range cfg.Jobs {
		i := slices.IndexFunc(d.raw.Jobs, func(b jobBlock) bool { return posOf(b.At) == j.Pos })
		jp := []string{"job", strconv.Itoa(i)}
		if f, ok := groups[j.ConcurrencyGroup]; ok && j.MaxConcurrency > 0 && f.MaxConcurrency != j.MaxConcurrency {
			d.errf(append(jp, "max_concurrency"), "%d, but job %q gives %d for the same concurrency group %q: the jobs of a group share one limit", j.MaxConcurrency, f.Name, f.MaxConcurrency, j.ConcurrencyGroup)
		} else if !ok && j.MaxConcurrency > 0 {
			groups[j.ConcurrencyGroup] = j
		}
		if f, ok := locks[j.LockName]; ok && f.LockKind != j.LockKind {
			d.errf(append(jp, "lock_kind"), "%q, but job %q takes the same lock %q as %q: jobs that share a lock must use one kind", j.LockKind, f.Name, j.LockName, f.LockKind)
		} else if !ok {
			locks[j.LockName] = j
		}
	}
}
