package jobs

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// maxSuggestions is how many known names a not-found error lists.
const maxSuggestions = 10

// Registry maps names to Funcs, so that config files can refer to Go code
// by name. Names are case-sensitive. The zero value is an empty Registry
// ready to use, like NewRegistry's. A Registry is safe for concurrent use;
// it must not be copied after first use.
type Registry struct {
	mu    sync.RWMutex
	funcs map[string]Func
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{funcs: make(map[string]Func)}
}

// Register adds f under name. It returns an error wrapping ErrInvalid if
// name is empty, is not valid UTF-8, or has whitespace or control
// characters, or if f is nil; and one wrapping ErrDuplicate if name is
// already registered, in which case the Func registered first stays. The
// errors name the name. Register never panics. It is safe for concurrent
// use.
func (r *Registry) Register(name string, f Func) error {
	if bad := checkName(name); bad != "" {
		return fmt.Errorf("func %q: %w: %s", name, ErrInvalid, bad)
	}
	if f == nil {
		return fmt.Errorf("func %q: %w: nil Func", name, ErrInvalid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.funcs[name]; ok {
		return fmt.Errorf("func %q: %w", name, ErrDuplicate)
	}
	if r.funcs == nil {
		r.funcs = make(map[string]Func)
	}
	r.funcs[name] = f
	return nil
}

// checkName returns what is wrong with a name, or "" if nothing is.
func checkName(name string) string {
	switch {
	case name == "":
		return "empty name"
	case !utf8.ValidString(name):
		return "name is not valid UTF-8"
	case strings.IndexFunc(name, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) >= 0:
		return "name has whitespace or control characters"
	}
	return ""
}

// Lookup returns the Func registered under name. If there is none, it
// returns an error wrapping ErrNotFound whose message names the name and
// lists up to 10 known names, sorted, to help spot a typo: all of them, or,
// if there are more, the 10 closest to name. It is safe for concurrent use.
func (r *Registry) Lookup(name string) (Func, error) {
	r.mu.RLock()
	f, ok := r.funcs[name]
	r.mu.RUnlock()
	if ok {
		return f, nil
	}
	return nil, fmt.Errorf("func %q: %w (%s)", name, ErrNotFound, suggest(name, r.Names()))
}

// Names returns the registered names, sorted; none gives an empty slice. It
// is safe for concurrent use.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := slices.Sorted(maps.Keys(r.funcs))
	if names == nil {
		names = []string{}
	}
	return names
}

// suggest returns the known names a not-found error lists: all of known
// (sorted) if there are at most maxSuggestions, or else the maxSuggestions
// closest to name by edit distance, sorted.
func suggest(name string, known []string) string {
	switch {
	case len(known) == 0:
		return "none registered"
	case len(known) <= maxSuggestions:
		return "known: " + strings.Join(known, ", ")
	}
	type scored struct {
		name string
		dist int
	}
	s := make([]scored, len(known))
	for i, k := range known {
		s[i] = scored{k, editDistance(name, k)}
	}
	slices.SortFunc(s, func(a, b scored) int {
		return cmp.Or(cmp.Compare(a.dist, b.dist), strings.Compare(a.name, b.name))
	})
	closest := make([]string, maxSuggestions)
	for i := range closest {
		closest[i] = s[i].name
	}
	slices.Sort(closest)
	return fmt.Sprintf("closest of %d known: %s", len(known), strings.Join(closest, ", "))
}

// editDistance returns the Levenshtein distance between a and b, in runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			sub := prev[j-1]
			if ra[i-1] != rb[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// DefaultRegistry is the Registry that the package-level Register and
// Lookup use. It is safe for concurrent use.
var DefaultRegistry = NewRegistry()

// Register adds f under name to DefaultRegistry; see Registry.Register for
// the errors (ErrInvalid, ErrDuplicate). It never panics, and is safe for
// concurrent use.
func Register(name string, f Func) error {
	return DefaultRegistry.Register(name, f)
}

// Lookup returns the Func registered under name in DefaultRegistry, or an
// error wrapping ErrNotFound; see Registry.Lookup. It is safe for
// concurrent use.
func Lookup(name string) (Func, error) {
	return DefaultRegistry.Lookup(name)
}
