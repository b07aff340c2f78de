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
// runs there), live for ttl from now on the store's clock (Redis TIME),
// and drops the reports gone for ReplicaKeep. It does not read the
// others (Replicas does): one script call that writes report and drops
// the reports due, each once, so O(log n) amortised in the n reports kept,
// whatever the fleet's size. Call it every ttl/3 or so: a replica that
// stops is gone ttl after its last report (Replica.Gone); ReportStopped
// makes it gone at once. Replica.Started is the first report of this
// process (this Store's lock.Client) under id, on the store's clock. Once
// a process has reported id stopped, its later reports of id are ignored,
// so a report delayed past the stop does not make it live again; a new
// process may report id anew.
//
// The reports live in a hash at prefix:replicas:{replicas} with a sorted
// set of when each is dropped beside it, both expiring ReplicaKeep after
// the newest report. Replicas of a Store are per process, where the
// scheduler's memberships (Heartbeat) are per group of jobs. It returns
// lock.ErrInvalid for an empty id or a ttl under a millisecond,
// lock.ErrBadKey if a key holds another type, lock.ErrClosed after Close;
// ctx bounds the call.
func (s *Store) Report(ctx context.Context, id, report string, ttl time.Duration) error {
	return s.c.ReportReplica(ctx, id, report, ttl)
}

// ReportStopped records report as the replica id's last, and the replica
// as stopped now: gone at once (Replica.Stopped). It returns the errors of
// Report.
func (s *Store) ReportStopped(ctx context.Context, id, report string) error {
	return s.c.ReplicaStopped(ctx, id, report)
}

// Replicas returns every replica's report (Report), sorted by id, without
// reporting one; the reports gone for ReplicaKeep are dropped. It reads
// the whole hash: O(n) in the reports kept and their size. It returns
// lock.ErrBadKey if a key holds another type, lock.ErrClosed after Close.
func (s *Store) Replicas(ctx context.Context) ([]Replica, error) {
	return s.c.Replicas(ctx)
}
