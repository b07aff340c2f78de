package core

import "testing"

// hashSlot agrees with Redis Cluster (CLUSTER KEYSLOT): the slots that
// MOVED replies named for these keys, and Redis's documented example.
func TestHashSlot(t *testing.T) {
	for key, want := range map[string]int{
		"foo":                          12182,
		"lockcron:{job-0000}":          555,
		"lockcron:{job-0031}:ledger:j": 1881,
		"lockcron:{job-0125}":          988,
		"x{job-0093}y{z}":              2256,
	} {
		if got := hashSlot(key); got != want {
			t.Errorf("hashSlot(%q) = %d, want %d", key, got, want)
		}
	}
}
