package scheduler

import "testing"

func TestOwnerClientID(t *testing.T) {
	for owner, want := range map[string]string{
		"r1:0a1b2c:7":        "r1",
		"host:9090:0a1b2c:7": "host:9090", // a Client ID with a colon
		"r1:7":               "r1",
		"r1":                 "r1",
		"":                   "",
	} {
		if got := ownerClientID(owner); got != want {
			t.Errorf("ownerClientID(%q) = %q, want %q", owner, got, want)
		}
	}
}
