// Package runerr holds what the exec and http jobs share to word their
// errors: the error of a run stopped by its ctx, and text cleaned for an
// error message.
package runerr

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Ctx returns ctx.Err() wrapped with its cause, if that is another error.
func Ctx(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || cause == err {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// Clean returns s for an error message: invalid UTF-8 and control
// characters replaced by spaces, runs of spaces squeezed, trimmed, and cut
// to at most limit bytes on a rune boundary, with "…" appended if it was cut.
func Clean(s string, limit int) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) || unicode.IsSpace(r) {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
		if b.Len() > limit {
			break
		}
	}
	out := b.String()
	if len(out) <= limit {
		return out
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return strings.TrimRight(out[:cut], " ") + "…"
}
