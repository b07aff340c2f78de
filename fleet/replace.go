package fleet

import "time"

// LeaseTime is the lease time of the claims of the Store's ledgers (the
// lock.Client's lock.WithLeaseTime): a claim's lock is kept that long after
// its last renewal, and renewed every third of it.
func (s *Store) LeaseTime() time.Duration { return s.c.LeaseTime() }
