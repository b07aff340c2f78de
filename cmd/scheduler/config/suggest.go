package config

import (
	"strings"

	"github.com/agext/levenshtein"
)

// Suggest returns the name of names closest to s, if one is near enough to
// be a misspelling of it (at most two edits, or a third for a name longer
// than eight letters), else "". It is how a misspelt flag, job name or
// calendar name gets a "did you mean".
func Suggest(s string, names []string) string {
	best, bestDist := "", 0
	for _, n := range names {
		limit := 2
		if len(n) > 8 {
			limit = 3
		}
		if d := levenshtein.Distance(strings.ToLower(s), strings.ToLower(n), nil); d <= limit && (best == "" || d < bestDist) {
			best, bestDist = n, d
		}
	}
	return best
}
