package config_test

import (
	"slices"
	"strings"
	"testing"
)

// params: the names a manual run accepts; a bad or repeated name is
// refused with its place.
func TestParams(t *testing.T) {
	t.Parallel()
	report := func(extra string) string {
		return `
job "report" {
  schedule = "@daily"
  ` + extra + `
  exec {
    command = ["true"]
  }
}
`
	}
	if p := mustLoad(t, report("")).Jobs[0].Params; p != nil {
		t.Errorf("no params: Params %q, want none", p)
	}
	if p := mustLoad(t, report(`params = ["customer", "date"]`)).Jobs[0].Params; !slices.Equal(p, []string{"customer", "date"}) {
		t.Errorf("Params %q, want [customer date]", p)
	}
	for _, c := range []struct{ extra, want string }{
		{`params = ["customer", "Date"]`, `:4:3: job "report": params: name 1, "Date": not made of a-z, 0-9 and _`},
		{`params = ["a", "a"]`, `params: name 1, "a": declared twice`},
		{`params = "customer"`, "params"},
	} {
		_, _, err := load(t, report(c.extra))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.extra, err, c.want)
		}
	}
}
