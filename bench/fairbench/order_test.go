package main

import "testing"

// TestAnalyzeOrder checks the order analysis on made-up journals: it must
// find inversions, jumps and barging, and nothing in an orderly run.
func TestAnalyzeOrder(t *testing.T) {
	rec := func(owner string, token int64) acqRec { return acqRec{owner: owner, token: token} }
	snap := func(token int64, q ...string) snapshot { return snapshot{token: token, queue: q} }
	tests := []struct {
		name                                string
		recs                                []acqRec // in acquisition order
		snaps                               []snapshot
		pairs, inversions, checked, jumped  int64
		barged, neverAcq, tokenDisagreement int64
	}{
		{
			name:  "in order",
			recs:  []acqRec{rec("h", 5), rec("a", 11), rec("b", 12), rec("c", 13), rec("d", 14)},
			snaps: []snapshot{snap(5, "a", "b", "c"), snap(11, "b", "c", "d")},
			pairs: 5, checked: 4,
		},
		{
			name:  "c overtakes b",
			recs:  []acqRec{rec("a", 11), rec("c", 12), rec("b", 13)},
			snaps: []snapshot{snap(10, "a", "b", "c")},
			pairs: 3, inversions: 1, checked: 3, jumped: 1,
		},
		{
			name:  "z comes later and takes the lock ahead of b",
			recs:  []acqRec{rec("a", 11), rec("z", 12), rec("b", 13)},
			snaps: []snapshot{snap(10, "a", "b")},
			pairs: 1, checked: 3, barged: 1,
		},
		{
			name:  "b leaves the queue: c may go ahead",
			recs:  []acqRec{rec("a", 11), rec("c", 12)},
			snaps: []snapshot{snap(10, "a", "b", "c")},
			pairs: 1, checked: 2, neverAcq: 1,
		},
		{
			name:    "an acquisition before the snapshot is not checked against it",
			recs:    []acqRec{rec("z", 9), rec("a", 11)},
			snaps:   []snapshot{snap(10, "a")},
			checked: 1,
		},
		{
			name:  "tokens out of recording order",
			recs:  []acqRec{rec("a", 12), rec("b", 11)},
			snaps: []snapshot{snap(10, "a", "b")},
			pairs: 1, inversions: 1, checked: 2, jumped: 1, tokenDisagreement: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := analyzeOrder(tt.recs, &sampler{snaps: tt.snaps, n: int64(len(tt.snaps))})
			got := [7]int64{o.pairs, o.inversions, o.checked, o.jumped, o.barged, int64(o.neverAcq), o.tokenDisagre}
			want := [7]int64{tt.pairs, tt.inversions, tt.checked, tt.jumped, tt.barged, tt.neverAcq, tt.tokenDisagreement}
			if got != want {
				t.Errorf("pairs, inversions, checked, jumped, barged, never acquired, token disagreements = %v, want %v (examples %q)", got, want, o.examples)
			}
			if o.outOfOrder != o.jumped+o.barged {
				t.Errorf("outOfOrder %d != jumped %d + barged %d", o.outOfOrder, o.jumped, o.barged)
			}
		})
	}
}
