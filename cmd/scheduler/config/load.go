package config

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/lockcron/lockcron/jobs"
)

// A LoadOption changes how Load reads a config.
type LoadOption func(*loadOptions)

type loadOptions struct {
	registry *jobs.Registry
	environ  []string
	envSet   bool
	readOnly bool
}

// ForReading loads the config for a command that neither runs jobs nor
// serves the admin API (validate, jobs, locks, history, audit, and
// trigger, pause, resume and reload, which act through Redis or the
// daemon): a secret it does not use that names an environment variable
// (admin.token_env, a token block's value_env, a notify block's url_env)
// is not needed, so an unset variable is a warning, not an error, and the
// secret stays empty.
func ForReading() LoadOption {
	return func(o *loadOptions) { o.readOnly = true }
}

// WithRegistry sets the registry that func jobs are looked up in: a name
// it does not hold is an error. Default jobs.DefaultRegistry. Register
// every func before Load.
func WithRegistry(r *jobs.Registry) LoadOption {
	return func(o *loadOptions) { o.registry = r }
}

// WithEnviron sets the environment ("NAME=value" strings) that overrides
// the file, and that password_env, token_env and url_env read. Default
// os.Environ().
func WithEnviron(env []string) LoadOption {
	return func(o *loadOptions) { o.environ, o.envSet = slices.Clone(env), true }
}

// Load reads the HCL file at path, applies the environment's overrides
// (LOCKCRON_..., REDIS_URL), fills in the defaults and validates the
// result. It does no network I/O: nothing is sent to Redis.
//
// A file that cannot be read gives an error wrapping the fs error
// (fs.ErrNotExist, ...). Anything wrong with the config gives Errors: every
// problem found, each an *Error with its place (or environment variable),
// job and field; a file that does not parse gives its syntax errors alone.
// Warnings, things allowed but risky, are in Config.Warnings. No error or
// warning shows the value of a secret.
func Load(path string, opts ...LoadOption) (*Config, error) {
	o := loadOptions{}
	for _, opt := range opts {
		opt(&o)
	}
	if o.registry == nil {
		o.registry = jobs.DefaultRegistry
	}
	if !o.envSet {
		o.environ = os.Environ()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var mode fs.FileMode
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	d := &decoder{o: o, mode: mode, pos: make(map[string]span), env: make(map[string]string), badJobs: make(map[int]bool), bad: make(map[string]bool)}
	f, diags := hclparse.NewParser().ParseHCL(data, path)
	d.file = f
	if body, ok := f.Body.(*hclsyntax.Body); ok {
		d.index(body, nil)
	}
	if d.addDiags(diags); diags.HasErrors() {
		return d.finish(defaults()) // the syntax errors alone
	}
	d.addDiags(gohcl.DecodeBody(f.Body, nil, &d.raw))
	d.applyEnv()
	cfg := d.decode()
	cfg.Path = path
	cfg.Digest = fileDigest(data)
	return d.finish(cfg)
}

// span is where a setting is: its name (the place errors give) and all of
// it (what a diagnostic's place is found in).
type span struct{ name, all hcl.Range }

// decoder turns the decoded file, with the environment over it, into a
// Config, collecting errors and warnings.
type decoder struct {
	o    loadOptions
	mode fs.FileMode
	file *hcl.File
	raw  fileConfig
	// pos indexes the file's settings by path: "redis", "url"; a job by
	// its index among the jobs ("job", "0"), a notify block by its name.
	pos map[string]span
	// env maps a setting's path to the environment variable that set it.
	env     map[string]string
	badJobs map[int]bool    // jobs HCL found errors in: nothing is missing from them
	bad     map[string]bool // settings HCL found errors in: not checked further
	errs    Errors
	warns   Errors
	secrets []string // values to scrub from every message
	// fileSecrets are the paths of secrets written in the file itself.
	fileSecrets [][]string
}

// delim separates the levels of a path in the index. It cannot appear in a
// key or a label, so a job named "db.backup" stays one level.
const delim = "\x1f"

func pathKey(path ...string) string { return strings.Join(path, delim) }

// index records where every argument and block of b is.
func (d *decoder) index(b *hclsyntax.Body, path []string) {
	for name, a := range b.Attributes {
		d.pos[pathKey(append(slices.Clone(path), name)...)] = span{a.NameRange, a.SrcRange}
	}
	n := 0
	for _, blk := range b.Blocks {
		p := append(slices.Clone(path), blk.Type)
		labelled := len(path) == 0 && (blk.Type == "job" || blk.Type == "notify" || blk.Type == "calendar") ||
			pathKey(path...) == "admin" && blk.Type == "token"
		switch {
		case !labelled:
		case len(blk.Labels) != 1:
			continue // HCL reports it; gohcl leaves it out
		case blk.Type == "job":
			p = append(p, strconv.Itoa(n))
			n++
		default:
			p = append(p, blk.Labels[0])
			if _, dup := d.pos[pathKey(p...)]; dup {
				continue // a second block of the name: the decoder reports it at its own place
			}
		}
		d.pos[pathKey(p...)] = span{blk.TypeRange, blk.Range()}
		d.index(blk.Body, p)
	}
}

// locate returns the path of the innermost setting of the file at r.
func (d *decoder) locate(r hcl.Range) []string {
	best, size := "", 0
	for k, s := range d.pos {
		if s.all.ContainsPos(r.Start) && (best == "" || s.all.End.Byte-s.all.Start.Byte < size) {
			best, size = k, s.all.End.Byte-s.all.Start.Byte
		}
	}
	if best == "" {
		return nil
	}
	return strings.Split(best, delim)
}

// describe returns the index of the job a path is in (or -1), its name,
// and the setting's name: "redis.url"; "schedule" within a job.
func (d *decoder) describe(path []string) (i int, job, field string) {
	if len(path) < 2 || path[0] != "job" {
		return -1, "", strings.Join(path, ".")
	}
	if i, _ = strconv.Atoi(path[1]); i < len(d.raw.Jobs) {
		job = d.raw.Jobs[i].Name
	}
	return i, job, strings.Join(path[2:], ".")
}

// addDiags adds HCL's diagnostics: errors to the errors, warnings to the
// warnings, each at its place in the file or under its variable.
func (d *decoder) addDiags(diags hcl.Diagnostics) {
	for _, dg := range diags {
		msg := dg.Summary
		if dg.Detail != "" {
			msg += ": " + dg.Detail
		}
		e := &Error{Msg: msg}
		if dg.Subject != nil {
			r := *dg.Subject
			if strings.HasPrefix(r.Filename, envFile) {
				e.Env = strings.TrimPrefix(r.Filename, envFile)
				e.Field = strings.ToLower(strings.Join(envPath(e.Env), "."))
			} else {
				e.Pos, e.subject, e.file = posOf(r), &r, d.file
				path := d.locate(r)
				if s, ok := d.pos[pathKey(path...)]; ok && s.name.Start.Line == r.Start.Line {
					e.Pos = posOf(s.name) // the setting's place, as for every other error
				}
				var i int
				d.bad[pathKey(path...)] = true
				if i, e.Job, e.Field = d.describe(path); i >= 0 {
					d.badJobs[i] = true
				}
			}
		}
		if dg.Severity == hcl.DiagWarning {
			d.warns = append(d.warns, e)
		} else {
			d.errs = append(d.errs, e)
		}
	}
}

func posOf(r hcl.Range) Pos { return Pos{File: r.Filename, Line: r.Start.Line, Column: r.Start.Column} }

// at returns an Error about path: at its variable if one set it, else at
// the nearest place of it (or of its blocks) in the file.
func (d *decoder) at(path []string, format string, args ...any) *Error {
	e := &Error{Msg: fmt.Sprintf(format, args...)}
	_, e.Job, e.Field = d.describe(path)
	if e.Env = d.env[pathKey(path...)]; e.Env != "" {
		return e
	}
	for n := len(path); n > 0; n-- {
		if s, ok := d.pos[pathKey(path[:n]...)]; ok {
			e.Pos, e.subject, e.file = posOf(s.name), &s.name, d.file
			return e
		}
	}
	return e
}

// posOf is where path is in the file; the zero Pos if it is not there.
func (d *decoder) posOf(path []string) Pos {
	if s, ok := d.pos[pathKey(path...)]; ok && d.env[pathKey(path...)] == "" {
		return posOf(s.name)
	}
	return Pos{}
}

func (d *decoder) errf(path []string, format string, args ...any) {
	d.errs = append(d.errs, d.at(path, format, args...))
}

// errAt adds an Error about path at r: a second block of a name, which
// the index does not hold (it holds the first).
func (d *decoder) errAt(r hcl.Range, path []string, format string, args ...any) {
	e := d.at(path, format, args...)
	e.Pos, e.subject, e.file = posOf(r), &r, d.file
	d.errs = append(d.errs, e)
}

func (d *decoder) warnf(path []string, format string, args ...any) {
	d.warns = append(d.warns, d.at(path, format, args...))
}

// set reports whether path was set, in the file or the environment, and
// HCL found no error in it.
func (d *decoder) set(path ...string) bool {
	if d.bad[pathKey(path...)] {
		return false
	}
	_, env := d.env[pathKey(path...)]
	_, file := d.pos[pathKey(path...)]
	return file || env
}

// inFile reports whether path was set in the file and not overridden.
func (d *decoder) inFile(path ...string) bool {
	_, env := d.env[pathKey(path...)]
	_, file := d.pos[pathKey(path...)]
	return file && !env
}

// lookupEnv returns the value of the environment variable name.
func (d *decoder) lookupEnv(name string) string {
	for _, kv := range slices.Backward(d.o.environ) {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// finish scrubs the secrets from the messages (which are written not to
// hold any: this is the net under that rule) and returns cfg, or the
// errors.
func (d *decoder) finish(cfg *Config) (*Config, error) {
	// The longest first: a URL before the password inside it.
	slices.SortStableFunc(d.secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range d.secrets {
		cfg.secrets = append(cfg.secrets, NewSecret(s))
	}
	for _, e := range slices.Concat(d.errs, d.warns) {
		e.Msg = cfg.Redact(e.Msg)
	}
	sortErrors(d.warns)
	for _, w := range d.warns {
		cfg.Warnings = append(cfg.Warnings, w.Error())
	}
	if len(d.errs) > 0 {
		sortErrors(d.errs)
		return nil, d.errs
	}
	return cfg, nil
}
