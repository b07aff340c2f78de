package core

import (
	"maps"
	"testing"
)

// A chain member carries its run's params (finish.lua's fifth field); one
// of four fields, written before, still reads, with params unknown (nil).
func TestParseChainRunParams(t *testing.T) {
	for _, c := range []struct {
		m    string
		want map[string]string
	}{
		{"5\nok\n2026-01-01T00:00:00Z\n1700000000000", nil},
		{"5\nok\n2026-01-01T00:00:00Z\n1700000000000\n", map[string]string{}},
		{"5\nok\n\n1700000000000\n{\"customer\":\"7\"}", map[string]string{"customer": "7"}},
		{"5\nok\n\n1700000000000\nnot json", nil},
		{"5\nok\n\n1700000000000\n{\"a\":\"x\ny\"}", nil}, // (a raw newline: not JSON, the member still reads)
	} {
		r, ok := parseChainRun(c.m)
		if !ok || r.Tick != 5 || r.Outcome != "ok" || (r.Params == nil) != (c.want == nil) || !maps.Equal(r.Params, c.want) {
			t.Errorf("parseChainRun(%q) = %+v, %t; want params %v", c.m, r, ok, c.want)
		}
	}
	if _, ok := parseChainRun("5\nok\n1700000000000"); ok {
		t.Error("a member of 3 fields read")
	}
}
