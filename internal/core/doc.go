// Package core is the engine under the lock and fleet packages: the key
// layout, the Lua scripts (scripts/*.lua), the Redis and in-memory
// backends, and the one acquisition path that every Lock, TryLock and
// ledger claim goes through, with its leases and watchdogs.
//
// Package lock is its face for the lock family (its doc says what a lock
// promises and how it is kept); package fleet is its face for the
// scheduler's store (ledgers of ticks, history, membership, control
// messages). Both share one Client: fleet.New takes a lock.Client and
// reaches its engine through Ref. Nothing outside this module imports it.
package core
