package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/hcl"
	"github.com/hashicorp/hcl/hcl/ast"
	hclparser "github.com/hashicorp/hcl/hcl/parser"
	hclkoanf "github.com/knadh/koanf/parsers/hcl"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/v2"

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

// ForReading loads the config for a command that only reads (validate,
// jobs, locks, history): a secret it does not use that names an
// environment variable (admin.token_env) is not needed, so an unset
// variable is a warning, not an error, and the secret stays empty.
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
// the file, and that password_env and token_env read. Default os.Environ().
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
// job and field; a file that does not parse gives the parse error alone.
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
	data, err := file.Provider(path).ReadBytes()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var mode fs.FileMode
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	return load(path, data, mode, o)
}

// bytesProvider gives koanf a file's bytes, read once by Load.
type bytesProvider []byte

func (b bytesProvider) ReadBytes() ([]byte, error) { return b, nil }

func (b bytesProvider) Read() (map[string]any, error) {
	return nil, errors.New("config: bytesProvider does not support Read")
}

func load(path string, data []byte, mode fs.FileMode, o loadOptions) (cfg *Config, err error) {
	w := newWalker(path)
	f, err := parseHCL(data)
	if err != nil {
		return nil, Errors{parseError(path, err)}
	}
	w.walkFile(f)

	k := koanf.New(delim)
	if err := loadKoanf(k, data); err != nil {
		// The tree holds something the decoder cannot map (a job block
		// without a name, say): the walk has reported it, with its place.
		errs := w.errs
		if len(errs) == 0 {
			errs = Errors{{Pos: Pos{File: path, Line: 1, Column: 1}, Msg: "cannot decode: " + err.Error()}}
		}
		sortErrors(errs)
		return nil, errs
	}
	d := newDecoder(w, o, mode)
	ep := env.Provider(delim, env.Opt{
		TransformFunc: d.envKey,
		EnvironFunc:   func() []string { return o.environ },
	})
	if err := k.Load(ep, nil); err != nil {
		return nil, fmt.Errorf("config: environment: %w", err)
	}
	root, _ := normalize(k.Raw()).(map[string]any)
	cfg = d.decode(root)
	cfg.Path = path
	cfg.Digest = fileDigest(data)
	return d.finish(cfg)
}

// parseHCL parses data as the koanf parser does (HCL, or JSON), into a
// syntax tree that keeps the places of keys.
func parseHCL(data []byte) (f *ast.File, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, err = nil, fmt.Errorf("%v", r)
		}
	}()
	return hcl.ParseBytes(data)
}

// loadKoanf loads the file's values into k with koanf's HCL parser.
func loadKoanf(k *koanf.Koanf, data []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return k.Load(bytesProvider(data), hclkoanf.Parser(true))
}

// parseError turns an HCL parse error into an Error at its place.
func parseError(path string, err error) *Error {
	var pe *hclparser.PosError
	if errors.As(err, &pe) {
		return &Error{Pos: Pos{File: path, Line: pe.Pos.Line, Column: pe.Pos.Column}, Msg: "syntax: " + pe.Err.Error()}
	}
	return &Error{Pos: Pos{File: path, Line: 1, Column: 1}, Msg: "syntax: " + err.Error()}
}

// normalize undoes the HCL decoder's habit of wrapping each block in a
// list: a list of one map becomes the map. A list of several maps (a block
// given twice, which the walk reports) stays a list.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = normalize(e)
		}
		return t
	case []map[string]any:
		if len(t) == 1 {
			return normalize(t[0])
		}
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = normalize(e)
		}
		return out
	case []any:
		for i, e := range t {
			t[i] = normalize(e)
		}
		return t
	}
	return v
}

// decoder turns the merged values into a Config, collecting errors and
// warnings.
type decoder struct {
	w       *walker
	o       loadOptions
	mode    fs.FileMode
	env     map[string]string // path key -> the environment variable that set it
	envErrs Errors
	warns   []warning
	secrets []string // values to scrub from every message
	// fileSecrets are the paths of secrets written in the file itself.
	fileSecrets [][]string
	leaseBad    bool // lock.lease was given but not valid
}

// warning is a warning with its place.
type warning struct{ e *Error }

func newDecoder(w *walker, o loadOptions, mode fs.FileMode) *decoder {
	return &decoder{w: w, o: o, mode: mode, env: make(map[string]string)}
}

// where returns the place of path: its environment variable if one set
// it, else the place of the nearest key of it (or of its blocks) in the
// file.
func (d *decoder) where(path []string) (Pos, string) {
	if name, ok := d.env[pathKey(path...)]; ok {
		return Pos{}, name
	}
	for n := len(path); n > 0; n-- {
		if p, ok := d.w.pos[pathKey(path[:n]...)]; ok {
			return p, ""
		}
	}
	// A block that only the environment made: name a variable in it.
	prefix := pathKey(path...) + delim
	var names []string
	for k, name := range d.env {
		if strings.HasPrefix(k, prefix) {
			names = append(names, name)
		}
	}
	if len(names) > 0 {
		slices.Sort(names)
		return Pos{}, names[0]
	}
	return Pos{}, ""
}

// inFile reports whether path was set in the file (and not overridden by
// the environment).
func (d *decoder) inFile(path ...string) bool {
	k := pathKey(path...)
	_, env := d.env[k]
	_, file := d.w.pos[k]
	return file && !env
}

// set reports whether path was set at all, in the file or the environment.
func (d *decoder) set(path ...string) bool {
	k := pathKey(path...)
	_, env := d.env[k]
	_, file := d.w.pos[k]
	return file || env
}

func (d *decoder) errAt(path []string, job, field, msg string) {
	p, env := d.where(path)
	d.w.errs = append(d.w.errs, &Error{Pos: p, Env: env, Job: job, Field: field, Msg: msg})
}

func (d *decoder) warnAt(path []string, job, field, msg string) {
	p, env := d.where(path)
	d.warns = append(d.warns, warning{&Error{Pos: p, Env: env, Job: job, Field: field, Msg: msg}})
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

// finish scrubs secrets from the messages and returns cfg, or the errors.
func (d *decoder) finish(cfg *Config) (*Config, error) {
	errs := append(d.w.errs, d.envErrs...)
	for _, e := range errs {
		e.Msg = d.scrub(e.Msg)
	}
	ws := make(Errors, len(d.warns))
	for i, w := range d.warns {
		w.e.Msg = d.scrub(w.e.Msg)
		ws[i] = w.e
	}
	sortErrors(ws)
	// The longest first: a URL before the password inside it.
	secrets := slices.Clone(d.secrets)
	slices.SortStableFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	for _, s := range secrets {
		cfg.secrets = append(cfg.secrets, NewSecret(s))
	}
	for _, w := range ws {
		cfg.Warnings = append(cfg.Warnings, w.Error())
	}
	if len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	return cfg, nil
}

// scrub replaces every secret found in msg. Messages are written not to
// hold secrets; this is the net under that rule.
func (d *decoder) scrub(msg string) string {
	for _, s := range d.secrets {
		if len(s) >= 3 {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	return msg
}
