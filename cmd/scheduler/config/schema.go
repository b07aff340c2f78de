package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/hashicorp/hcl/hcl/ast"
	"github.com/hashicorp/hcl/hcl/token"
)

// shape is what a key holds.
type shape int

const (
	leafShape    shape = iota // a string, number, bool or list
	blockShape                // a block of known keys
	mapShape                  // a map of free keys to strings: exec.env, http.headers
	labeledShape              // blocks with a name: job "name" { ... }
)

// spec describes a key: its shape and, for blocks, the keys it knows.
type spec struct {
	shape shape
	keys  map[string]*spec
}

func leaf() *spec                         { return &spec{shape: leafShape} }
func block(keys map[string]*spec) *spec   { return &spec{shape: blockShape, keys: keys} }
func freeMap() *spec                      { return &spec{shape: mapShape} }
func labeled(body map[string]*spec) *spec { return &spec{shape: labeledShape, keys: body} }

// names returns the keys s knows, sorted.
func (s *spec) names() []string { return slices.Sorted(maps.Keys(s.keys)) }

// schema is every key a config file may hold.
var schema = block(map[string]*spec{
	"replica_id":       leaf(),
	"shutdown_timeout": leaf(),
	"watch":            leaf(),
	"fleet": block(map[string]*spec{
		"ranking":        leaf(),
		"claim_fallback": leaf(),
		"member_ttl":     leaf(),
	}),
	"redis": block(map[string]*spec{
		"url":             leaf(),
		"addrs":           leaf(),
		"master_name":     leaf(),
		"username":        leaf(),
		"password":        leaf(),
		"password_env":    leaf(),
		"db":              leaf(),
		"key_prefix":      leaf(),
		"timeout":         leaf(),
		"connect_timeout": leaf(),
		"tls": block(map[string]*spec{
			"enabled":              leaf(),
			"ca_file":              leaf(),
			"cert_file":            leaf(),
			"key_file":             leaf(),
			"server_name":          leaf(),
			"insecure_skip_verify": leaf(),
		}),
	}),
	"lock": block(map[string]*spec{
		"lease":      leaf(),
		"waiter_ttl": leaf(),
		"replica_ack": block(map[string]*spec{
			"replicas": leaf(),
			"timeout":  leaf(),
		}),
	}),
	"admin": block(map[string]*spec{
		"listen":    leaf(),
		"token":     leaf(),
		"token_env": leaf(),
	}),
	"telemetry": block(map[string]*spec{
		"traces":        leaf(),
		"metrics":       leaf(),
		"otlp_endpoint": leaf(),
	}),
	"log": block(map[string]*spec{
		"level": leaf(),
		"json":  leaf(),
	}),
	"history": block(map[string]*spec{
		"keep":    leaf(),
		"max_age": leaf(),
	}),
	"notify": labeled(map[string]*spec{
		"url":     leaf(),
		"url_env": leaf(),
		"format":  leaf(),
		"on":      leaf(),
		"jobs":    leaf(),
		"timeout": leaf(),
		"retries": leaf(),
	}),
	"job": labeled(map[string]*spec{
		"schedule":          leaf(),
		"time_zone":         leaf(),
		"jitter":            leaf(),
		"lock":              leaf(),
		"lock_name":         leaf(),
		"timeout":           leaf(),
		"overlap":           leaf(),
		"misfire":           leaf(),
		"misfire_grace":     leaf(),
		"retries":           leaf(),
		"backoff":           leaf(),
		"on_shutdown":       leaf(),
		"max_concurrency":   leaf(),
		"concurrency_group": leaf(),
		"history_keep":      leaf(),
		"history_max_age":   leaf(),
		"exec": block(map[string]*spec{
			"command": leaf(),
			"env":     freeMap(),
			"dir":     leaf(),
			"grace":   leaf(),
		}),
		"http": block(map[string]*spec{
			"url":           leaf(),
			"method":        leaf(),
			"headers":       freeMap(),
			"body":          leaf(),
			"expect_status": leaf(),
		}),
		"func": leaf(),
	}),
})

// delim separates the levels of a key path, in koanf and in the position
// index. It cannot appear in a file's keys or job names (control characters
// are refused), so a job named "db.backup" stays one level.
const delim = "\x1f"

// pathKey joins a path for the position index.
func pathKey(path ...string) string { return strings.Join(path, delim) }

// jobItem is one job block, as the walk found it.
type jobItem struct {
	name string
	pos  Pos  // where the block starts (its "job" keyword)
	ok   bool // it has one name and a body: its values can be decoded
}

// walker walks the HCL syntax tree of a config file: it records where each
// key is, and reports unknown keys, keys set twice and malformed blocks,
// which the decoded values (koanf's) no longer show.
type walker struct {
	file string
	pos  map[string]Pos  // path key -> place of the key
	bad  map[string]bool // paths whose value must not be decoded: already reported
	// suggested are the paths that an unknown key was taken to be a typo
	// of: their absence is not reported again.
	suggested map[string]bool
	jobs      []jobItem
	// named are the labeled blocks other than jobs, by keyword ("notify"),
	// in the file's order; their keys are at path keyword, label.
	named map[string][]jobItem
	errs  Errors
}

func newWalker(file string) *walker {
	return &walker{file: file, pos: make(map[string]Pos), bad: make(map[string]bool), suggested: make(map[string]bool), named: make(map[string][]jobItem)}
}

func (w *walker) at(p token.Pos) Pos {
	return Pos{File: w.file, Line: p.Line, Column: p.Column}
}

// keyText returns a key as written, unquoted.
func keyText(k *ast.ObjectKey) (s string) {
	defer func() {
		if recover() != nil {
			s = k.Token.Text
		}
	}()
	if v, ok := k.Token.Value().(string); ok {
		return v
	}
	return k.Token.Text
}

// walkFile walks a whole file.
func (w *walker) walkFile(f *ast.File) {
	list, ok := f.Node.(*ast.ObjectList)
	if !ok {
		return
	}
	w.walkList(list, schema, nil, "", 0)
}

// walkList walks the items of a block described by s, at path. job is the
// name of the job the block belongs to, if any, and rel is where the path
// shown in errors starts (after "job", index).
func (w *walker) walkList(list *ast.ObjectList, s *spec, path []string, job string, rel int) {
	seen := make(map[string]Pos)
	for _, item := range list.Items {
		if len(item.Keys) == 0 {
			continue
		}
		name := keyText(item.Keys[0])
		p := w.at(item.Keys[0].Pos())
		full := append(slices.Clone(path), name)
		field := strings.Join(full[rel:], ".")
		child := s.keys[name]
		if child == nil {
			w.bad[pathKey(full...)] = true
			w.errs = append(w.errs, &Error{Pos: p, Job: job, Field: field, Msg: unknownKey(name, s.names(), where(path[rel:], job)), whole: true})
			if sug := suggest(name, s.names()); sug != "" {
				w.suggested[pathKey(append(slices.Clone(path), sug)...)] = true
			}
			continue
		}
		if child.shape == labeledShape {
			if name == "job" {
				w.walkJob(item, child, p)
			} else {
				w.walkNamed(name, item, child, p)
			}
			continue
		}
		if len(item.Keys) > 1 {
			w.bad[pathKey(full...)] = true
			w.errs = append(w.errs, &Error{Pos: p, Job: job, Field: field,
				Msg: fmt.Sprintf("takes no name: write %s { ... }", name)})
			continue
		}
		if first, dup := seen[name]; dup {
			w.bad[pathKey(full...)] = true
			w.errs = append(w.errs, &Error{Pos: p, Job: job, Field: field,
				Msg: fmt.Sprintf("set twice (first at line %d)", first.Line)})
			continue
		}
		seen[name] = p
		w.pos[pathKey(full...)] = p
		if child.shape == blockShape {
			if ot, ok := item.Val.(*ast.ObjectType); ok {
				w.walkList(ot.List, child, full, job, rel)
			}
		}
	}
}

// walkJob walks one job block: job "name" { ... }.
func (w *walker) walkJob(item *ast.ObjectItem, s *spec, p Pos) {
	i := len(w.jobs)
	path := []string{"job", strconv.Itoa(i)}
	w.pos[pathKey(path...)] = p
	switch {
	case len(item.Keys) == 1:
		w.jobs = append(w.jobs, jobItem{pos: p})
		w.errs = append(w.errs, &Error{Pos: p, Field: "job", Msg: `a job needs a name: job "name" { ... }`})
		return
	case len(item.Keys) > 2:
		name := keyText(item.Keys[1])
		w.jobs = append(w.jobs, jobItem{name: name, pos: p})
		w.errs = append(w.errs, &Error{Pos: w.at(item.Keys[2].Pos()), Job: name, Field: "name",
			Msg: fmt.Sprintf("a job has one name; %q is one too many (write job %q { ... })", keyText(item.Keys[2]), name)})
		return
	}
	name := keyText(item.Keys[1])
	ot, ok := item.Val.(*ast.ObjectType)
	if !ok {
		w.jobs = append(w.jobs, jobItem{name: name, pos: p})
		w.errs = append(w.errs, &Error{Pos: p, Job: name, Msg: fmt.Sprintf("must be a block: job %q { ... }", name)})
		return
	}
	w.jobs = append(w.jobs, jobItem{name: name, pos: p, ok: true})
	w.walkList(ot.List, s, path, name, 2)
}

// walkNamed walks a labeled block other than a job, such as
// notify "name" { ... }: its keys are at path kind, name (so its fields
// read "notify.ops.url"). A second block of the same name is an error.
func (w *walker) walkNamed(kind string, item *ast.ObjectItem, s *spec, p Pos) {
	if len(item.Keys) != 2 {
		w.errs = append(w.errs, &Error{Pos: p, Field: kind, Msg: fmt.Sprintf("needs one name: %s \"name\" { ... }", kind)})
		return
	}
	name := keyText(item.Keys[1])
	path := []string{kind, name}
	field := kind + "." + name
	ot, ok := item.Val.(*ast.ObjectType)
	switch {
	case name == "" || strings.ContainsFunc(name, unicode.IsControl):
		w.errs = append(w.errs, &Error{Pos: p, Field: field, Msg: fmt.Sprintf("%q is not a name: give each %s block a plain name", name, kind)})
		return
	case !ok:
		w.errs = append(w.errs, &Error{Pos: p, Field: field, Msg: fmt.Sprintf("must be a block: %s %q { ... }", kind, name)})
		return
	}
	if first, dup := w.pos[pathKey(path...)]; dup {
		w.errs = append(w.errs, &Error{Pos: p, Field: field, Msg: fmt.Sprintf("a %s block %q is at line %d already: give each its own name", kind, name, first.Line)})
		return
	}
	w.pos[pathKey(path...)] = p
	w.named[kind] = append(w.named[kind], jobItem{name: name, pos: p, ok: true})
	w.walkList(ot.List, s, path, "", 0)
}

// where names the block a key is in, for an unknown key's message.
func where(path []string, job string) string {
	switch {
	case len(path) > 0 && job != "":
		return fmt.Sprintf(" in %s of job %q", strings.Join(path, "."), job)
	case job != "":
		return fmt.Sprintf(" in job %q", job)
	case len(path) > 0:
		return " in " + strings.Join(path, ".")
	}
	return ""
}

// unknownKey is the message for a key that is not in known: it suggests
// the closest known key, if one is close enough to be a typo.
func unknownKey(key string, known []string, in string) string {
	msg := fmt.Sprintf("unknown key %q%s", key, in)
	if s := suggest(key, known); s != "" {
		return msg + fmt.Sprintf("; did you mean %q?", s)
	}
	return msg + "; known keys: " + strings.Join(known, ", ")
}

// suggest returns the known name closest to name, if it is within a typo's
// distance (half its length, at least 2 edits), or "".
func suggest(name string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		d := typoDistance(strings.ToLower(name), k)
		if bestD < 0 || d < bestD || d == bestD && cmp.Less(k, best) {
			best, bestD = k, d
		}
	}
	if bestD >= 0 && bestD <= max(2, len(best)/2) && bestD < len(best) {
		return best
	}
	return ""
}

// typoDistance is the optimal string alignment distance between a and b:
// edits, where swapping two neighbours counts as one.
func typoDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
