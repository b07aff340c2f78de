package daemon

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/fleet"
)

// Which replicas stand out: those whose config differs from most live
// replicas'; on a tie, from the reader's own; gone replicas do not count
// towards most, but are marked too. A report that does not decode is
// shown with its error, marked neither way.
func TestReplicasJSONMarksOtherConfigs(t *testing.T) {
	now := time.Now()
	rep := func(id, digest string, gone bool) fleet.Replica {
		r := fleet.Replica{ID: id, Seen: now, Report: fmt.Sprintf(`{"version":"v1","config_digest":%q,"jobs":["a"]}`, digest)}
		if gone {
			r.Gone = now
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		rs    []fleet.Replica
		own   string
		other string // the ids marked other_config, in order
	}{
		{"all alike", []fleet.Replica{rep("r1", "A", false), rep("r2", "A", false)}, "A", ""},
		{"one apart", []fleet.Replica{rep("r1", "A", false), rep("r2", "A", false), rep("r3", "B", false)}, "B", "r3"},
		{"tie: the reader's own is most", []fleet.Replica{rep("r1", "A", false), rep("r3", "B", false)}, "B", "r1"},
		{"tie, the reader on neither: the least", []fleet.Replica{rep("r1", "B", false), rep("r3", "A", false)}, "C", "r1"},
		{"gone ones do not count, but are marked", []fleet.Replica{rep("r1", "B", false), rep("r2", "A", true), rep("r3", "A", true)}, "A", "r2 r3"},
		{"none live: the reader's own", []fleet.Replica{rep("r1", "B", true)}, "A", "r1"},
		{"a report that does not decode", []fleet.Replica{rep("r1", "A", false), {ID: "r2", Seen: now, Report: "{"}}, "A", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var other []string
			for _, r := range replicasJSON(tc.rs, tc.own, "v1") {
				if r.OtherConfig {
					other = append(other, r.ID)
				}
				if r.OtherVersion {
					t.Errorf("%s: other_version, all run v1", r.ID)
				}
				if bad := r.ID == "r2" && strings.Contains(tc.name, "decode"); bad != (r.Error != "") {
					t.Errorf("%s: error %q", r.ID, r.Error)
				}
			}
			if got := strings.Join(other, " "); got != tc.other {
				t.Errorf("other_config: %q, want %q", got, tc.other)
			}
		})
	}
}
