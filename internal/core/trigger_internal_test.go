package core

import (
	"context"
	"fmt"
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

// A ledger whose done does not move (a job on every replica claims its
// manual runs in ledgers of its own) keeps the records of the latest
// requests only: those more than reqsKept before the newest go.
func TestTriggerKeepsLatestRecords(t *testing.T) {
	t.Parallel()
	bothBackends(t, func(t *testing.T, be backend) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		const key = "{job}:ledger"
		for i := range reqsKept + 3 {
			if _, err := be.ledgerTrigger(ctx, key, key, fmt.Sprint("r", i), "{}"); err != nil {
				t.Fatal(err)
			}
		}
		for n, want := range map[int64]bool{1: false, 2: false, 3: true, reqsKept + 3: true} {
			if rec, err := be.ledgerParams(ctx, key, n); err != nil || (rec != "") != want {
				t.Errorf("request %d's record %q, %v; kept %v wanted", n, rec, err, want)
			}
		}
	})
}
