package fleet

import (
	"context"
	"time"

	"github.com/lockcron/lockcron/internal/core"
)

// ReplicaKeep is how long a gone replica's report is kept (shown as gone,
// with when it was last seen) before it is dropped: an hour.
const ReplicaKeep = core.ReplicaKeep

// A Replica is what a replica of the fleet last said of itself
// (Store.Report): its id, its report, when it was last seen and, once it
// is gone, since when.
type Replica = core.ReplicaReport

// Report records report as what the replica id says of itself (the
// scheduler command's daemon puts its version, config digest, jobs and
// runs there), live for ttl from now on the store's clock (Redis TIME:
// the replicas' clocks do not matter), and returns every replica's
// report, sorted by id, its own included. Call it every ttl/3 or so: a
// replica that stops is gone ttl after its last report (Replica.Gone);
// ReportStopped makes it gone at once. A report gone for ReplicaKeep is
// dropped, in the same step. One round trip (one script).
//
// The reports live in one hash at prefix:replicas, expiring ReplicaKeep
// after the newest. Replicas of a Store are per process, where the
// scheduler's memberships (Heartbeat) are per group of jobs. It returns
// lock.ErrInvalid for an empty id or a ttl under a millisecond,
// lock.ErrBadKey if the key holds another type, lock.ErrClosed after
// Close; ctx bounds the call.
func (s *Store) Report(ctx context.Context, id, report string, ttl time.Duration) ([]Replica, error) {
	return s.c.ReportReplica(ctx, id, report, ttl)
}

// ReportStopped records report as the replica id's last, and the replica
// as stopped now: gone at once (Replica.Stopped). It returns the errors of
// Report.
func (s *Store) ReportStopped(ctx context.Context, id, report string) error {
	return s.c.ReplicaStopped(ctx, id, report)
}

// Replicas returns every replica's report (Report), sorted by id, without
// reporting one; the reports gone for ReplicaKeep are dropped. It returns
// lock.ErrBadKey if the key holds another type, lock.ErrClosed after Close.
func (s *Store) Replicas(ctx context.Context) ([]Replica, error) {
	return s.c.Replicas(ctx)
}
