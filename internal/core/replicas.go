package core

import (
	"context"
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
// Replicas) in the hash at key, with when each is dropped in drop.
type replicaBackend interface {
	// reportReplica runs replicareport.lua: it drops the reports gone for
	// keep, then records id's report, of the process nonce, live for ttl
	// (0: stopped now), unless that process is recorded as stopped and ttl
	// is not 0.
	reportReplica(ctx context.Context, key, drop, id, nonce, report string, ttl, keep time.Duration) error
	// replicas runs replicas.lua: it drops the reports due, and returns the
	// others.
	replicas(ctx context.Context, key, drop string) ([]ReplicaReport, error)
}

// A ReplicaReport is what a replica of the fleet last said of itself
// (ReportReplica), as the store keeps it.
type ReplicaReport struct {
	ID     string    // the replica's id
	Report string    // its report, as it gave it
	Seen   time.Time // when it last reported, on the store's clock
	// Started is when its process (its Client) first reported under this
	// id, on the store's clock.
	Started time.Time
	// Gone is when it stopped counting as live, on the store's clock: when
	// it said it stopped (Stopped; then Seen), or when its last report ran
	// out. Zero while it is live.
	Gone    time.Time
	Stopped bool // it said it stopped (ReplicaStopped)
}

// replicasKey is where the reports live, and when each is dropped: in a
// hash slot of their own.
func (c *Client) replicasKey() (string, string) {
	k := c.opt.prefix + ":replicas:{replicas}"
	return k, k + ":drop"
}

// instance is what tells this Client's reports from those of another
// process with the same replica id: the random part of its owner ids.
func (c *Client) instance() string { return c.owner[strings.LastIndexByte(c.owner, ':')+1:] }

// ReportReplica records report as what the replica id says of itself, live
// for ttl from now on the store's clock (Redis TIME), and drops the
// reports gone for ReplicaKeep. It neither reads nor returns the others
// (Replicas does): a call costs O(log n) in the number n of reports kept,
// amortised, and the size of report. A replica that stops reporting is
// gone ttl after its last report; ReplicaStopped makes it gone at once.
// Once a Client has said id stopped, its later reports of id are ignored:
// one sent before the stop and run by the store after it does not make
// the replica live again. Another Client (a new process) may report id
// again; its Started is its own first report.
//
// The reports live in a hash at prefix:replicas:{replicas}, with a sorted
// set of when each is dropped beside it; both expire ReplicaKeep after the
// newest report. It returns ErrInvalid for an empty id or a ttl under a
// millisecond; ErrBadKey if a key holds another type; ErrClosed after
// Close.
func (c *Client) ReportReplica(ctx context.Context, id, report string, ttl time.Duration) error {
	switch {
	case id == "":
		return fmt.Errorf("lock: replica report: empty replica id: %w", ErrInvalid)
	case ttl < time.Millisecond:
		return fmt.Errorf("lock: replica %q: report live for %v: under a millisecond: %w", id, ttl, ErrInvalid)
	}
	return c.reportReplica(ctx, id, report, ttl)
}

// ReplicaStopped records report as the replica id's last, and the replica
// as stopped now: gone at once. It returns the errors of ReportReplica.
func (c *Client) ReplicaStopped(ctx context.Context, id, report string) error {
	if id == "" {
		return fmt.Errorf("lock: replica report: empty replica id: %w", ErrInvalid)
	}
	return c.reportReplica(ctx, id, report, 0)
}

func (c *Client) reportReplica(ctx context.Context, id, report string, ttl time.Duration) error {
	what := fmt.Sprintf("replica %q", id)
	if c.isClosed() {
		return fmt.Errorf("lock: %s: %w", what, ErrClosed)
	}
	key, drop := c.replicasKey()
	return c.replicasError(what, key, c.be.reportReplica(ctx, key, drop, id, c.instance(), report, ttl, ReplicaKeep))
}

// Replicas returns every replica's report, sorted by id, dropping those
// gone for ReplicaKeep. It reads the whole hash: O(n) in the reports kept
// and their size. It returns ErrBadKey if a key holds another type,
// ErrClosed after Close.
func (c *Client) Replicas(ctx context.Context) ([]ReplicaReport, error) {
	if c.isClosed() {
		return nil, fmt.Errorf("lock: replicas: %w", ErrClosed)
	}
	key, drop := c.replicasKey()
	rs, err := c.be.replicas(ctx, key, drop)
	if err := c.replicasError("replicas", key, err); err != nil {
		return nil, err
	}
	slices.SortFunc(rs, func(a, b ReplicaReport) int { return strings.Compare(a.ID, b.ID) })
	return rs, nil
}

// replicasError is err of a call on the reports at key, for what.
func (c *Client) replicasError(what, key string, err error) error {
	switch {
	case err == nil:
		return nil
	case strings.HasPrefix(err.Error(), "WRONGTYPE"):
		return fmt.Errorf("lock: %s: key %q or its :drop holds another type, not the replicas' hash and sorted set: %w", what, key, ErrBadKey)
	}
	return fmt.Errorf("lock: %s: %w", what, err)
}

// parseReplica reads a report as replicareport.lua keeps it, "<seen>
// <until> <first> <nonce> <report>" (ms), at the store's time now.
func parseReplica(id, v string, now time.Time) (ReplicaReport, bool) {
	var ms [3]int64
	rest := v
	for i := range ms {
		f, r, ok := strings.Cut(rest, " ")
		n, err := strconv.ParseInt(f, 10, 64)
		if !ok || err != nil {
			return ReplicaReport{}, false
		}
		ms[i], rest = n, r
	}
	_, report, ok := strings.Cut(rest, " ")
	if !ok {
		return ReplicaReport{}, false
	}
	return replicaReport(id, report, time.UnixMilli(ms[0]), time.UnixMilli(ms[1]), time.UnixMilli(ms[2]), now), true
}

// replicaReport is the report of id, seen at seen, live until until, first
// seen at first, at the store's time now.
func replicaReport(id, report string, seen, until, first, now time.Time) ReplicaReport {
	r := ReplicaReport{ID: id, Report: report, Seen: seen, Started: first, Stopped: until.Equal(seen)}
	if !now.Before(until) {
		r.Gone = until
	}
	return r
}
