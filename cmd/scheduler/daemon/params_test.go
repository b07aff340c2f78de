package daemon

import (
	"strings"
	"testing"
)

// `scheduler history` shows a parameter's value in its TICK column cut
// to paramCell characters: a 4 kB value does not fill the screen.
func TestParamsTextCut(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 4096)
	got := paramsText(map[string]string{"customer": "42", "note": long, "tab": "a\tb"})
	want := " customer=42 note=" + strings.Repeat("é", paramCell-1) + "…" + ` tab=a\tb`
	if got != want {
		t.Errorf("paramsText = %q\nwant %q", got, want)
	}
}
