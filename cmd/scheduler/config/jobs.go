package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/scheduler"
)

// jobEntry is one job's name and values, as koanf decoded them.
type jobEntry struct {
	name string
	body any
}

// jobEntries lists the jobs koanf decoded, in the file's order. The HCL
// decoder gives one job as {name: body}, several as [{name: body}, ...].
func jobEntries(raw any) []jobEntry {
	var out []jobEntry
	add := func(m map[string]any) {
		for _, k := range sortedKeys(m) {
			out = append(out, jobEntry{k, m[k]})
		}
	}
	switch t := raw.(type) {
	case map[string]any:
		add(t)
	case []any:
		for _, e := range t {
			if m, ok := e.(map[string]any); ok {
				add(m)
			} else {
				out = append(out, jobEntry{})
			}
		}
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// decodeJobs decodes the job blocks the walk found, matching each with its
// values by order (and name).
func (d *decoder) decodeJobs(raw any, cfg *Config) {
	entries := jobEntries(raw)
	used := make([]bool, len(entries))
	find := func(i int, name string) (any, bool) {
		if i < len(entries) && !used[i] && entries[i].name == name {
			used[i] = true
			return entries[i].body, true
		}
		for j, e := range entries {
			if !used[j] && e.name == name {
				used[j] = true
				return e.body, true
			}
		}
		return nil, false
	}
	first := make(map[string]Pos)
	for i, item := range d.w.jobs {
		if !item.ok {
			continue
		}
		body, ok := find(i, item.name)
		if !ok {
			continue
		}
		path := []string{"job", strconv.Itoa(i)}
		m, _ := body.(map[string]any)
		if m == nil {
			m = map[string]any{}
		}
		o := obj{d: d, m: m, path: path, job: item.name, rel: 2}
		nameOK := true
		switch {
		case item.name == "":
			d.errAt(path, "", "job", `empty name: give each job a name, job "name" { ... }`)
			nameOK = false
		case strings.ContainsAny(item.name, "{}"):
			d.errAt(path, item.name, "name", "must not hold { or }: the name goes into the lock's key, and braces would break its hash tag")
			nameOK = false
		case strings.ContainsFunc(item.name, unicode.IsControl):
			d.errAt(path, item.name, "name", "has control characters")
			nameOK = false
		case strings.HasSuffix(item.name, "!manual"): // the scheduler refuses it too; here the error has its position
			d.errAt(path, item.name, "name", `must not end with "!manual": that names the ledger of a job's manual runs`)
			nameOK = false
		}
		if p, dup := first[item.name]; dup && item.name != "" {
			d.errAt(path, item.name, "name", fmt.Sprintf("duplicate job name: a job %q is at line %d already", item.name, p.Line))
			nameOK = false
		} else if item.name != "" {
			first[item.name] = item.pos
		}
		j := d.decodeJob(o, item, cfg)
		j.Digest = jobDigest(item.name, m)
		if nameOK {
			cfg.Jobs = append(cfg.Jobs, j)
		}
	}
	d.checkGroups(cfg)
}

// decodeJob decodes one job, with the scheduler's defaults.
func (d *decoder) decodeJob(o obj, item jobItem, cfg *Config) Job {
	j := Job{
		Name:         item.name,
		Pos:          item.pos,
		Lock:         scheduler.LockReentrant,
		LockName:     item.name,
		Overlap:      scheduler.OverlapSkip,
		Misfire:      scheduler.MisfireSkip,
		MisfireGrace: scheduler.DefaultMisfireGrace,
		Backoff:      scheduler.DefaultBackoff,
		OnShutdown:   scheduler.ShutdownHandoff,
	}
	if v, ok := o.str("time_zone"); ok {
		switch loc, err := time.LoadLocation(v); {
		case v == "" || v == "Local":
			o.errf("time_zone", "%q: name a zone such as \"Europe/Berlin\" or \"UTC\"; the machine's own zone could differ between replicas", v)
		case err != nil:
			o.errf("time_zone", "unknown time zone %q", v)
		default:
			j.TimeZone, j.Location = v, loc
		}
	}
	if !o.has("schedule") {
		o.missing("schedule", "every job needs a schedule, such as \"*/5 * * * *\" or \"@every 30s\"")
	} else if v, ok := o.str("schedule"); ok {
		if _, err := scheduler.ParseJobSchedule(item.name, v, 0, j.Location); err != nil {
			o.errf("schedule", "%q: %v", v, err)
		} else {
			j.Schedule = v
			if j.TimeZone != "" && hasZonePrefix(v) {
				o.warnf("time_zone", "the schedule names its own zone (CRON_TZ=), which wins over time_zone")
			}
		}
	}
	if v, ok := o.dur("jitter"); ok {
		if v > scheduler.MaxJitter {
			o.errf("jitter", "%v is longer than a year (scheduler.MaxJitter, %v)", v, scheduler.MaxJitter)
		} else {
			j.Jitter = v
		}
	}
	if v, ok := o.oneOf("lock", string(scheduler.LockReentrant), string(scheduler.LockFair)); ok {
		j.Lock = scheduler.LockKind(v)
	}
	if v, ok := o.str("lock_name"); ok {
		switch {
		case v == "":
			o.errf("lock_name", "empty: leave it out to use the job's name")
		case strings.ContainsAny(v, "{}"):
			o.errf("lock_name", "%q must not hold { or }, which would break the lock key's hash tag", v)
		default:
			j.LockName = v
		}
	}
	if v, ok := o.dur("timeout"); ok {
		j.Timeout = v
	}
	if v, ok := o.oneOf("overlap", string(scheduler.OverlapSkip), string(scheduler.OverlapQueue)); ok {
		j.Overlap = scheduler.Overlap(v)
	}
	if v, ok := o.oneOf("misfire", string(scheduler.MisfireSkip), string(scheduler.MisfireRunOnce)); ok {
		j.Misfire = scheduler.Misfire(v)
	}
	if v, ok := o.dur("misfire_grace"); ok {
		j.MisfireGrace = v
		if j.Misfire != scheduler.MisfireRunOnce {
			o.warnf("misfire_grace", "has no effect unless misfire = %q", scheduler.MisfireRunOnce)
		}
	}
	if v, ok := o.int("retries"); ok {
		if v < 0 {
			o.errf("retries", "%d is negative", v)
		} else {
			j.Retries = v
		}
	}
	if v, ok := o.dur("backoff"); ok {
		j.Backoff = v
	}
	if v, ok := o.oneOf("on_shutdown", string(scheduler.ShutdownHandoff), string(scheduler.ShutdownAbandon)); ok {
		j.OnShutdown = scheduler.ShutdownPolicy(v)
	}
	if v, ok := o.int("max_concurrency"); ok {
		if v < 1 {
			o.errf("max_concurrency", "%d: must be at least 1 (leave it out for no limit)", v)
		} else {
			j.MaxConcurrency = v
		}
	}
	if v, ok := o.str("concurrency_group"); ok {
		switch {
		case !o.has("max_concurrency"):
			o.errf("concurrency_group", "needs max_concurrency, the number of runs the group allows at once")
		case v == "":
			o.errf("concurrency_group", "empty: leave it out to use the lock's name")
		case strings.ContainsAny(v, "{}"):
			o.errf("concurrency_group", "%q must not hold { or }, which would break the key's hash tag", v)
		default:
			j.ConcurrencyGroup = v
		}
	}
	j.HistoryKeep, j.HistoryMaxAge = decodeRetention(o, "history_keep", "history_max_age")
	if j.MaxConcurrency > 0 && j.ConcurrencyGroup == "" {
		j.ConcurrencyGroup = j.LockName
	}
	d.decodeKind(o, &j, cfg)
	if j.Timeout > 0 && j.Schedule != "" {
		if gap := shortestGap(j.Name, j.Schedule, j.Jitter, j.Location); gap > 0 && j.Timeout > gap {
			o.warnf("timeout", "%v is longer than the %v between ticks: while a run goes on, later ticks are %s", j.Timeout, gap, overlapEffect(j.Overlap))
		}
	}
	return j
}

func overlapEffect(o scheduler.Overlap) string {
	if o == scheduler.OverlapQueue {
		return "queued (one at a time) or skipped"
	}
	return "skipped"
}

// hasZonePrefix reports whether a schedule names its own time zone.
func hasZonePrefix(spec string) bool {
	s := strings.TrimSpace(spec)
	return strings.HasPrefix(s, "CRON_TZ=") || strings.HasPrefix(s, "TZ=")
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

// decodeKind decodes the one kind a job must have: exec, http or func.
func (d *decoder) decodeKind(o obj, j *Job, cfg *Config) {
	var kinds []string
	for _, k := range []string{KindExec, KindHTTP, KindFunc} {
		if o.has(k) {
			kinds = append(kinds, k)
		}
	}
	switch len(kinds) {
	case 0:
		if !d.w.bad[pathKey(o.full(KindExec)...)] && !d.w.bad[pathKey(o.full(KindHTTP)...)] && !d.w.bad[pathKey(o.full(KindFunc)...)] {
			d.errAt(o.path, j.Name, "kind", `no kind: give one of exec { command = [...] }, http { url = "..." } or func = "name"`)
		}
		return
	case 1:
	default:
		o.errf(kinds[1], "%s and %s are both set: a job has exactly one kind", kinds[0], kinds[1])
		return
	}
	j.Kind = kinds[0]
	switch j.Kind {
	case KindExec:
		e, ok := o.block(KindExec)
		if !ok {
			return
		}
		x := &ExecJob{Grace: jobs.DefaultGrace}
		if !e.has("command") {
			e.missing("command", `the program and its arguments, such as ["sh", "-c", "echo hello"]`)
		} else if v, ok := e.strs("command"); ok {
			if len(v) == 0 {
				e.errf("command", "empty: give the program and its arguments")
			}
			x.Command = v
		}
		x.Env, _ = e.strMap("env")
		x.Dir, _ = e.str("dir")
		if v, ok := e.dur("grace"); ok {
			x.Grace = v
		}
		if x.Grace >= cfg.ShutdownTimeout {
			path, field := e.full("grace"), "exec.grace"
			if !d.set(path...) {
				path, field = []string{"shutdown_timeout"}, "shutdown_timeout"
			}
			d.errAt(path, j.Name, field, fmt.Sprintf("exec.grace (%v) must be shorter than shutdown_timeout (%v): a graceful stop that ends first releases the lock and hands the tick over while the process may still run", x.Grace, cfg.ShutdownTimeout))
		}
		d.validateKind(e, (&jobs.Exec{Command: x.Command, Env: x.Env, Dir: x.Dir, Grace: x.Grace}).Validate(), len(x.Command) == 0)
		j.Exec = x
	case KindHTTP:
		h, ok := o.block(KindHTTP)
		if !ok {
			return
		}
		x := &HTTPJob{}
		if !h.has("url") {
			h.missing("url", "the http(s) URL to call")
		}
		urlOK := false
		x.URL, urlOK = h.str("url")
		x.Method, _ = h.str("method")
		x.Headers, _ = h.strMap("headers")
		x.Body, _ = h.str("body")
		x.ExpectStatus, _ = h.ints("expect_status")
		d.validateKind(h, (&jobs.HTTP{URL: x.URL, Method: x.Method, Headers: x.Headers, Body: x.Body, ExpectStatus: x.ExpectStatus}).Validate(), !urlOK)
		j.HTTP = x
	case KindFunc:
		v, ok := o.str(KindFunc)
		if !ok {
			return
		}
		if v == "" {
			o.errf(KindFunc, "empty: give the name of a func registered with jobs.Register")
			return
		}
		if _, err := d.o.registry.Lookup(v); err != nil {
			o.errf(KindFunc, "%s", funcError(v, err))
			return
		}
		j.Func = v
	}
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

// goFields maps the field names in jobs' Validate errors to the file's.
var goFields = map[string]string{
	"Command": "command", "Env": "env", "Dir": "dir", "Grace": "grace",
	"URL": "url", "Method": "method", "Headers": "headers", "Body": "body", "ExpectStatus": "expect_status",
}

// validateKind reports the errors of jobs.Exec.Validate or
// jobs.HTTP.Validate under the file's names for the fields: each is
// "exec Command[0]: jobs: invalid argument: empty program name". If
// missing, the main field was reported missing already: its error is
// left out.
func (d *decoder) validateKind(o obj, err error, missing bool) {
	if err == nil {
		return
	}
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	kind := o.path[len(o.path)-1]
	for _, e := range list {
		msg := e.Error()
		field, rest := "", msg
		if head, tail, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(head, kind+" ") {
			goName := strings.TrimPrefix(head, kind+" ")
			base, index, _ := strings.Cut(goName, "[")
			if f, ok := goFields[base]; ok {
				field = f
				if index != "" {
					field += "[" + index
				}
				rest = strings.TrimPrefix(tail, jobs.ErrInvalid.Error()+": ")
			}
		}
		if missing && (field == "command" || field == "url" || strings.HasPrefix(field, "command[")) {
			continue
		}
		if field == "" {
			o.d.errAt(o.path, o.job, kind, rest)
			continue
		}
		base, _, _ := strings.Cut(field, "[")
		o.d.errAt(o.full(base), o.job, kind+"."+field, rest)
	}
}

// checkGroups checks that the jobs of a concurrency group agree on its
// max_concurrency.
func (d *decoder) checkGroups(cfg *Config) {
	type first struct {
		job string
		max int
	}
	groups := make(map[string]first)
	for i, j := range cfg.Jobs {
		if j.MaxConcurrency == 0 {
			continue
		}
		f, ok := groups[j.ConcurrencyGroup]
		if !ok {
			groups[j.ConcurrencyGroup] = first{j.Name, j.MaxConcurrency}
			continue
		}
		if f.max != j.MaxConcurrency {
			d.errAt(d.jobPath(cfg, i, "max_concurrency"), j.Name, "max_concurrency",
				fmt.Sprintf("%d, but job %q gives %d for the same concurrency group %q: the jobs of a group share one limit", j.MaxConcurrency, f.job, f.max, j.ConcurrencyGroup))
		}
	}
	// Jobs that share a lock must take it the same way: a fair release
	// wakes only the fair queue, and reentrant claims ignore it.
	kinds := make(map[string]Job)
	for i, j := range cfg.Jobs {
		f, ok := kinds[j.LockName]
		if !ok {
			kinds[j.LockName] = j
			continue
		}
		if f.Lock != j.Lock {
			d.errAt(d.jobPath(cfg, i, "lock"), j.Name, "lock",
				fmt.Sprintf("%q, but job %q takes the same lock %q as %q: jobs that share a lock must use one kind", j.Lock, f.Name, j.LockName, f.Lock))
		}
	}
}

// jobPath is the path of a field of cfg.Jobs[i], found by the job's place.
func (d *decoder) jobPath(cfg *Config, i int, field string) []string {
	for k, item := range d.w.jobs {
		if item.pos == cfg.Jobs[i].Pos {
			return []string{"job", strconv.Itoa(k), field}
		}
	}
	return nil
}
