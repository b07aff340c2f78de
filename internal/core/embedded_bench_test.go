package core_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/lock"
)

// BenchmarkEmbeddedJobTick is the embedded default's cost per job-tick:
// on lock.NewMemory, one Ledger.Claim of a new tick and its Finish with
// a history entry, through the public API, as the scheduler does per
// run.
func BenchmarkEmbeddedJobTick(b *testing.B) {
	locks, err := lock.NewMemory()
	if err != nil {
		b.Fatal(err)
	}
	defer locks.Close()
	g, err := fleet.New(locks).Ledger("job", "job")
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var tick int64
	b.ReportAllocs()
	for b.Loop() {
		tick++
		cl, err := g.Claim(ctx, tick, false)
		if err != nil {
			b.Fatal(err)
		}
		err = cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1,
			Entry: map[string]string{"tick": strconv.FormatInt(tick, 10), "outcome": "ran"}})
		if err != nil {
			b.Fatal(err)
		}
	}
}
