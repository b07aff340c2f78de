package config

import (
	"fmt"
	"log/slog"
)

// redacted is what a Secret prints.
const redacted = "[redacted]"

// Secret holds a password or a token. Every way of printing it (String,
// GoString, fmt with any verb, JSON, text marshalling, slog) gives
// "[redacted]"; only Value returns the secret. The zero Secret is empty. A
// Secret is safe for concurrent use.
type Secret struct {
	// p points at the value, so that even a printer that reads struct
	// fields by reflection, bypassing the methods, shows an address.
	p *string
}

// NewSecret returns a Secret holding v.
func NewSecret(v string) Secret {
	if v == "" {
		return Secret{}
	}
	return Secret{p: &v}
}

// Value returns the secret itself. Pass it to what needs it, never to a log.
func (s Secret) Value() string {
	if s.p == nil {
		return ""
	}
	return *s.p
}

// IsSet reports whether s holds a non-empty value.
func (s Secret) IsSet() bool { return s.p != nil && *s.p != "" }

// String returns "[redacted]", or "" for an empty Secret.
func (s Secret) String() string {
	if !s.IsSet() {
		return ""
	}
	return redacted
}

// GoString returns "[redacted]", for %#v.
func (s Secret) GoString() string { return `config.Secret("` + s.String() + `")` }

// Format prints String for every verb, so that %x or %q cannot reveal the
// value either.
func (s Secret) Format(f fmt.State, verb rune) {
	switch verb {
	case 'v':
		if f.Flag('#') {
			fmt.Fprint(f, s.GoString())
			return
		}
	case 'q':
		fmt.Fprintf(f, "%q", s.String())
		return
	}
	fmt.Fprint(f, s.String())
}

// MarshalJSON returns "[redacted]" (or "" for an empty Secret) as a JSON
// string.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + s.String() + `"`), nil }

// MarshalText returns "[redacted]" (or "" for an empty Secret).
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// LogValue gives slog "[redacted]" (or "" for an empty Secret).
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }
