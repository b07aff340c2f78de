package core

import (
	"context"
	"testing"
	"time"
)

// A retry of a request (its id again, after a lost reply) counts nothing
// again, though other requests were counted since; its record keeps its
// params, and the claim of a later request reads them.
func TestTriggerRetryByID(t *testing.T) {
	t.Parallel()
	bothBackends(t, func(t *testing.T, be backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		const key, runs = "{job}:ledger", "{job}:manual"
		for i, id := range []string{"a", "b", "a", "c", "b"} {
			n, err := be.ledgerTrigger(ctx, key, runs, id, `{"customer":"`+id+`"}`)
			want := map[string]int64{"a": 1, "b": 2, "c": 3}[id]
			if err != nil || n != want {
				t.Fatalf("trigger %d, id %s = %d, %v; want %d", i, id, n, err, want)
			}
		}
		rec, err := be.ledgerParams(ctx, runs, 2)
		if p, _ := requestParams(rec); err != nil || p["customer"] != "b" || !requestOrdered(rec) {
			t.Fatalf("request 2's record %q, %v; want customer b, ordered", rec, err)
		}
		if rec, err := be.ledgerParams(ctx, runs, 4); err != nil || rec != "" {
			t.Fatalf("request 4's record %q, %v; want none", rec, err)
		}
	})
}
