package core

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ReplicaKeep is how long a replica's report is kept once the replica is
// gone (it said it stopped, or its report ran out): it shows that long as
// gone, with when it was last seen, then it is dropped.
const ReplicaKeep = time.Hour

// replicaBackend keeps the fleet's replica reports (ReportReplica,
// Replicas).
type replicaBackend interface {
	// replicas runs replicas.lua on the hash at key: with id "" it only
	// reads; else it records id's report, live for ttl (0: stopped now).
	// It drops the reports gone for keep, and returns the others.
	replicas(ctx context.Context, key, id, report string, ttl, keep time.Duration) ([]ReplicaReport, error)
}

// A ReplicaReport is what a replica of the fleet last said of itself
// (ReportReplica), as the store keeps it.
type ReplicaReport struct {
	ID     string    // the replica's id
	Report string    // its report, as it gave it
	Seen   time.Time // when it last reported, on the store's clock
	// Gone is when it stopped counting as live, on the store's clock: when
	// it said it stopped (Stopped; then Seen), or when its last report ran
	// out. Zero while it is live.
	Gone    time.Time
	Stopped bool // it said it stopped (ReplicaStopped)
}

// replicasKey is where the reports live: one hash, outside every lock's
// hash tag.
func (c *Client) replicasKey() string { return c.opt.prefix + ":replicas" }

// ReportReplica records report as what the replica id says of itself, live
// for ttl from now on the store's clock (Redis TIME: the replicas' clocks
// do not matter), and returns every replica's report, sorted by id, its
// own included. A replica that stops reporting is gone ttl after its last
// report; ReplicaStopped makes it gone at once. A report gone for
// ReplicaKeep is dropped, in the same step.
//
// The reports live in one hash at prefix:replicas, which expires
// ReplicaKeep after its newest report. It returns ErrInvalid for an empty
// id or a ttl under a millisecond; ErrBadKey if the key holds another type;
// ErrClosed after Close.
func (c *Client) ReportReplica(ctx context.Context, id, report string, ttl time.Duration) ([]ReplicaReport, error) {
	switch {
	case id == "":
		return nil, fmt.Errorf("lock: replica report: empty replica id: %w", ErrInvalid)
	case ttl < time.Millisecond:
		return nil, fmt.Errorf("lock: replica %q: report live for %v: under a millisecond: %w", id, ttl, ErrInvalid)
	}
	return c.replicas(ctx, id, report, ttl)
}

// ReplicaStopped records report as the replica id's last, and the replica
// as stopped now: gone at once. It returns the errors of ReportReplica.
func (c *Client) ReplicaStopped(ctx context.Context, id, report string) error {
	if id == "" {
		return fmt.Errorf("lock: replica report: empty replica id: %w", ErrInvalid)
	}
	_, err := c.replicas(ctx, id, report, 0)
	return err
}

// Replicas returns every replica's report, sorted by id, dropping those
// gone for ReplicaKeep. It returns ErrBadKey if the key holds another type,
// ErrClosed after Close.
func (c *Client) Replicas(ctx context.Context) ([]ReplicaReport, error) {
	return c.replicas(ctx, "", "", 0)
}

func (c *Client) replicas(ctx context.Context, id, report string, ttl time.Duration) ([]ReplicaReport, error) {
	what := "replicas"
	if id != "" {
		what = fmt.Sprintf("replica %q", id)
	}
	if c.isClosed() {
		return nil, fmt.Errorf("lock: %s: %w", what, ErrClosed)
	}
	key := c.replicasKey()
	rs, err := c.be.replicas(ctx, key, id, report, ttl, ReplicaKeep)
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, fmt.Errorf("lock: %s: key %q holds another type, not the replicas' hash: %w", what, key, ErrBadKey)
		}
		return nil, fmt.Errorf("lock: %s: %w", what, err)
	}
	slices.SortFunc(rs, func(a, b ReplicaReport) int { return strings.Compare(a.ID, b.ID) })
	return rs, nil
}

// parseReplica reads a report as replicas.lua keeps it, "<seen> <until>
// <report>" (ms), at the store's time now.
func parseReplica(id, v string, now time.Time) (ReplicaReport, bool) {
	seen, rest, ok1 := strings.Cut(v, " ")
	until, report, ok2 := strings.Cut(rest, " ")
	s, err1 := strconv.ParseInt(seen, 10, 64)
	u, err2 := strconv.ParseInt(until, 10, 64)
	if !ok1 || !ok2 || err1 != nil || err2 != nil {
		return ReplicaReport{}, false
	}
	return replicaReport(id, report, time.UnixMilli(s), time.UnixMilli(u), now), true
}

// replicaReport is the report of id, seen at seen and live until until,
// at the store's time now.
func replicaReport(id, report string, seen, until, now time.Time) ReplicaReport {
	r := ReplicaReport{ID: id, Report: report, Seen: seen, Stopped: until.Equal(seen)}
	if !now.Before(until) {
		r.Gone = until
	}
	return r
}
