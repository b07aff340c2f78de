package core

import (
	"context"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
)

// A finish that paused the ledger (Record.PauseAfter), repeated after a
// lost reply, answers paused again and counts its failure once, on both
// backends; so the finisher that retries still learns it paused.
func TestFinishPausedRepeat(t *testing.T) {
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
			k := newKeys("lockcron", "streak")
			lg := ledgerRef{id: "job", key: k.lock + ":ledger:job", history: k.lock + ":ledger:job:history", keep: 10, maxAge: time.Hour}
			const owner = "me:1"
			if r, err := be.claim(ctx, k, lg.key, owner, time.Minute, 5, claimArgs{}); err != nil || r.status != claimAcquired {
				t.Fatalf("claim: %+v, %v", r, err)
			}
			f := finishArgs{done: true, outcome: "failed", tries: 1, seen: 5, streak: streakFailed, pauseAfter: 1, pauseBy: "replica:a", pauseNote: "paused after 1 failed runs in a row"}
			for i := range 2 {
				if n, err := be.finish(ctx, k, lg, owner, 1, 5, f); err != nil || n != finishPaused {
					t.Fatalf("finish %d: %d, %v; want %d (paused)", i+1, n, err, finishPaused)
				}
			}
			fields, _, err := be.ledger(ctx, k, lg.key)
			if err != nil || fields["failures"] != "1" || fields["paused"] != "1" || fields["pausedby"] != "replica:a" {
				t.Fatalf("ledger: %v, %v; want 1 failure, paused by replica:a", fields, err)
			}
		})
	}
}
