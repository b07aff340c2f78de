package scheduler

import (
	"testing"
	"time"
)

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestParseSchedule(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no zone database:", err)
	}
	for _, tc := range []struct {
		name, spec string
		loc        *time.Location
		after      string
		want       string
	}{
		{"every second, from mid-second", "@every 1s", time.UTC, "2026-01-01T12:00:00.3Z", "2026-01-01T12:00:01Z"},
		{"every 30s aligned to the epoch", "@every 30s", time.UTC, "2026-01-01T00:00:45Z", "2026-01-01T00:01:00Z"},
		{"every 7s aligned to the epoch", "@every 7s", time.UTC, "1970-01-01T00:00:13Z", "1970-01-01T00:00:14Z"},
		{"every, zone prefix ignored", "CRON_TZ=Europe/Berlin @every 1m", time.UTC, "2026-01-01T00:00:45Z", "2026-01-01T00:01:00Z"},
		{"six fields with seconds", "*/5 * * * * *", time.UTC, "2026-01-01T12:00:03Z", "2026-01-01T12:00:05Z"},
		{"five fields in UTC", "0 6 * * *", time.UTC, "2026-01-01T07:00:00Z", "2026-01-02T06:00:00Z"},
		{"five fields in the job's zone", "0 6 * * *", berlin, "2026-01-01T07:00:00Z", "2026-01-02T05:00:00Z"},
		{"CRON_TZ wins over the job's zone", "CRON_TZ=UTC 0 6 * * *", berlin, "2026-01-01T07:00:00Z", "2026-01-02T06:00:00Z"},
		{"descriptor", "@hourly", time.UTC, "2026-01-01T07:30:00Z", "2026-01-01T08:00:00Z"},
		{"summer time in the zone", "30 2 * * *", berlin, "2026-03-29T00:00:00Z", "2026-03-30T00:30:00Z"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseSchedule(tc.spec, tc.loc)
			if err != nil {
				t.Fatal(err)
			}
			got := s.Next(mustTime(t, tc.after))
			if want := mustTime(t, tc.want); !got.Equal(want) {
				t.Fatalf("Next(%s) = %s, want %s", tc.after, got.UTC().Format(time.RFC3339Nano), tc.want)
			}
		})
	}
}

func TestParseScheduleErrors(t *testing.T) {
	t.Parallel()
	for _, spec := range []string{"", "61 * * * *", "* * *", "@every 500ms", "@every 1500ms", "CRON_TZ=Nowhere/Land @every 1m", "@every soon", "@yearly-ish", "CRON_TZ=Nowhere/Land 0 6 * * *"} {
		t.Run(spec, func(t *testing.T) {
			if _, err := parseSchedule(spec, time.UTC); err == nil {
				t.Fatalf("parseSchedule(%q) accepted", spec)
			}
		})
	}
}

// Replicas that compute the next tick from different moments, in the same
// period, agree on it.
func TestEveryAgreesAcrossReplicas(t *testing.T) {
	t.Parallel()
	s, err := parseSchedule("@every 10s", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	base := mustTime(t, "2026-06-01T10:00:00Z")
	want := s.Next(base)
	for _, off := range []time.Duration{time.Millisecond, 3 * time.Second, 9999 * time.Millisecond} {
		if got := s.Next(base.Add(off)); !got.Equal(want) {
			t.Fatalf("Next from +%v = %s, want %s", off, got, want)
		}
	}
}
