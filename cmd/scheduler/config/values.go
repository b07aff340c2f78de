package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// obj is a block of decoded values (koanf's, file and environment merged)
// at a path, with typed getters that report what is wrong with a value at
// its place in the file, or under the environment variable that set it.
// A getter returns ok only for a value that is present and valid.
type obj struct {
	d    *decoder
	m    map[string]any
	path []string // full path: "redis", or "job", index, ...
	job  string   // the job's name, inside a job
	rel  int      // where the path shown in errors starts
}

func (o obj) full(key string) []string { return append(slices.Clone(o.path), key) }

func (o obj) field(key string) string { return strings.Join(o.full(key)[o.rel:], ".") }

// has reports whether key is present, whether or not its value is valid,
// unless a structural error about it was reported already.
func (o obj) has(key string) bool {
	_, ok := o.get(key)
	return ok
}

func (o obj) get(key string) (any, bool) {
	if o.m == nil || o.d.w.bad[pathKey(o.full(key)...)] {
		return nil, false
	}
	v, ok := o.m[key]
	return v, ok
}

// env returns the environment variable that set key, if one did.
func (o obj) env(key string) (string, bool) {
	name, ok := o.d.env[pathKey(o.full(key)...)]
	return name, ok
}

// missing reports that key, which is required, is absent; unless an
// unknown key was reported as a likely typo of it.
func (o obj) missing(key, format string, args ...any) {
	if o.d.w.suggested[pathKey(o.full(key)...)] {
		return
	}
	o.errf(key, "missing: "+format, args...)
}

// errf reports an error about key.
func (o obj) errf(key, format string, args ...any) {
	o.d.errAt(o.full(key), o.job, o.field(key), fmt.Sprintf(format, args...))
}

// warnf records a warning about key.
func (o obj) warnf(key, format string, args ...any) {
	o.d.warnAt(o.full(key), o.job, o.field(key), fmt.Sprintf(format, args...))
}

// describe names the type of a value that has the wrong one.
func describe(v any) string {
	switch t := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", t)
	case int, int64:
		return fmt.Sprintf("the number %v", t)
	case float64:
		return fmt.Sprintf("the number %v", t)
	case bool:
		return fmt.Sprintf("%v", t)
	case []any:
		return "a list"
	case map[string]any:
		return "a block"
	}
	return fmt.Sprintf("a %T", v)
}

func (o obj) str(key string) (string, bool) {
	v, ok := o.get(key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		o.errf(key, "must be a string, not %s", describe(v))
		return "", false
	}
	return s, true
}

// secret is str for values never to be shown.
func (o obj) secret(key string) (string, bool) {
	v, ok := o.get(key)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		o.errf(key, "must be a string")
		return "", false
	}
	return s, true
}

// dur reads a positive duration, written as a string: "30s", "1m30s".
func (o obj) dur(key string) (time.Duration, bool) {
	v, ok := o.get(key)
	if !ok {
		return 0, false
	}
	s, ok := v.(string)
	if !ok {
		o.errf(key, "must be a duration such as \"30s\", not %s", describe(v))
		return 0, false
	}
	d, err := time.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		o.errf(key, "%q is not a duration (write it as \"500ms\", \"30s\", \"5m\" or \"1h30m\")", s)
		return 0, false
	case d < 0:
		o.errf(key, "%q is negative: must be positive", s)
		return 0, false
	case d == 0:
		o.errf(key, "%q is zero: must be positive (leave the key out for the default)", s)
		return 0, false
	}
	return d, true
}

// int reads a whole number; from the environment, in decimal.
func (o obj) int(key string) (int, bool) {
	v, ok := o.get(key)
	if !ok {
		return 0, false
	}
	switch t := v.(type) {
	case int:
		return t, true
	case int64:
		return int(t), true
	case string:
		if _, isEnv := o.env(key); isEnv {
			n, err := strconv.Atoi(strings.TrimSpace(t))
			if err != nil {
				o.errf(key, "%q is not a whole number", t)
				return 0, false
			}
			return n, true
		}
	}
	o.errf(key, "must be a whole number, not %s", describe(v))
	return 0, false
}

// bool reads true or false; from the environment, as strconv.ParseBool.
func (o obj) bool(key string) (bool, bool) {
	v, ok := o.get(key)
	if !ok {
		return false, false
	}
	switch t := v.(type) {
	case bool:
		return t, true
	case string:
		if _, isEnv := o.env(key); isEnv {
			b, err := strconv.ParseBool(strings.TrimSpace(t))
			if err != nil {
				o.errf(key, "%q is not true or false", t)
				return false, false
			}
			return b, true
		}
	}
	o.errf(key, "must be true or false, not %s", describe(v))
	return false, false
}

// strs reads a list of strings; from the environment, comma-separated.
func (o obj) strs(key string) ([]string, bool) {
	v, ok := o.get(key)
	if !ok {
		return nil, false
	}
	switch t := v.(type) {
	case []any:
		out := make([]string, 0, len(t))
		for i, e := range t {
			s, ok := e.(string)
			if !ok {
				o.errf(key, "item %d must be a string, not %s", i, describe(e))
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	case string:
		if _, isEnv := o.env(key); isEnv {
			var out []string
			for s := range strings.SplitSeq(t, ",") {
				if s = strings.TrimSpace(s); s != "" {
					out = append(out, s)
				}
			}
			return out, true
		}
	}
	o.errf(key, "must be a list of strings such as [\"a\", \"b\"], not %s", describe(v))
	return nil, false
}

// ints reads a list of whole numbers.
func (o obj) ints(key string) ([]int, bool) {
	v, ok := o.get(key)
	if !ok {
		return nil, false
	}
	t, ok := v.([]any)
	if !ok {
		o.errf(key, "must be a list of numbers such as [200, 204], not %s", describe(v))
		return nil, false
	}
	out := make([]int, 0, len(t))
	for i, e := range t {
		switch n := e.(type) {
		case int:
			out = append(out, n)
		case int64:
			out = append(out, int(n))
		default:
			o.errf(key, "item %d must be a whole number, not %s", i, describe(e))
			return nil, false
		}
	}
	return out, true
}

// strMap reads a map of names to strings: { NAME = "value" }. Whole numbers
// and bools are taken as their text.
func (o obj) strMap(key string) (map[string]string, bool) {
	v, ok := o.get(key)
	if !ok {
		return nil, false
	}
	t, ok := v.(map[string]any)
	if !ok {
		o.errf(key, "must be a map such as { NAME = \"value\" }, not %s", describe(v))
		return nil, false
	}
	out := make(map[string]string, len(t))
	good := true
	for _, k := range slices.Sorted(maps.Keys(t)) {
		switch e := t[k].(type) {
		case string:
			out[k] = e
		case int, int64, bool:
			out[k] = fmt.Sprint(e)
		default:
			o.errf(key, "%q must be a string, not %s", k, describe(e))
			good = false
		}
	}
	return out, good
}

// block returns the block at key, if it is present and is a block.
func (o obj) block(key string) (obj, bool) {
	v, ok := o.get(key)
	if !ok {
		return obj{}, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		o.errf(key, "must be a block: %s { ... }, not %s", key, describe(v))
		return obj{}, false
	}
	return obj{d: o.d, m: m, path: o.full(key), job: o.job, rel: o.rel}, true
}

// oneOf reads a string that must be one of choices; it returns it
// lower-cased.
func (o obj) oneOf(key string, choices ...string) (string, bool) {
	s, ok := o.str(key)
	if !ok {
		return "", false
	}
	l := strings.ToLower(strings.TrimSpace(s))
	if !slices.Contains(choices, l) {
		o.errf(key, "%q is not one of %s", s, quoteAll(choices))
		return "", false
	}
	return l, true
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
