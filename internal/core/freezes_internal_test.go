package core

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
)

// An add of a freeze repeated with its nonce (what go-redis sends again
// after a lost reply) makes no second freeze and answers the first's id
// and start; a del repeated so answers success, not "no such freeze"; a
// new call (another nonce) is a call of its own. On both backends.
func TestFreezeRepeatAnsweredAsFirst(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	backends := map[string]backend{
		"redis":  newRedisBackend(srv.Client(), func(string) {}, func(string) {}, nil, "me:", nil),
		"memory": &memoryBackend{s: NewMemoryStore(), wake: func(string) {}},
	}
	for name, be := range backends {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			key := "lockcron:freezes:{freezes}"
			k := freezeKeys{key: key, seq: key + ":seq", reqs: key + ":requests"}
			until := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
			var first []string
			for i := range 2 {
				st, _, rest, err := be.freezes(ctx, k, "add", "n1", until, "report-*", "release")
				if err != nil || st != 1 || len(rest) != 2 {
					t.Fatalf("add %d: %d %q %v", i+1, st, rest, err)
				}
				if i == 0 {
					first = rest
				} else if rest[0] != first[0] || rest[1] != first[1] {
					t.Errorf("repeated add answered %q, want the first's %q", rest, first)
				}
			}
			if _, _, rest, err := be.freezes(ctx, k, "list", ""); err != nil || len(rest) != 2 {
				t.Fatalf("list after a repeated add: %q, %v; want one freeze", rest, err)
			}
			if st, _, rest, err := be.freezes(ctx, k, "add", "n2", until, "other", "incident"); err != nil || st != 1 || rest[0] == first[0] {
				t.Fatalf("another add: %d %q %v; want a freeze of its own", st, rest, err)
			}
			for i := range 2 {
				if st, _, _, err := be.freezes(ctx, k, "del", "n3", first[0]); err != nil || st != 1 {
					t.Errorf("del %d of %s: %d, %v; want 1", i+1, first[0], st, err)
				}
			}
			if st, _, _, err := be.freezes(ctx, k, "del", "n4", first[0]); err != nil || st != 0 {
				t.Errorf("a new del of %s, ended: %d, %v; want 0", first[0], st, err)
			}
			if _, _, rest, err := be.freezes(ctx, k, "list", ""); err != nil || len(rest) != 2 {
				t.Errorf("list at the end: %q, %v; want the other freeze alone", rest, err)
			}
		})
	}
}
