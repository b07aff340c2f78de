// Package core is the engine under the lock and fleet packages: the key
// layout, the Lua scripts (scripts/*.lua), the Redis and in-memory
// backends, and the one acquisition path that every Lock, TryLock and
// ledger claim goes through, with its leases and the renewer that keeps
// them.
//
// Package lock is its face for the lock family (its doc says what a lock
// promises and how it is kept); package fleet is its face for the
// scheduler's store (ledgers of ticks, history, membership, replicas'
// reports, control messages). Both share one Client: fleet.New takes a lock.Client and
// reaches its engine through Ref. Nothing outside this module imports it.
//
// # Files
//
// The seam to a store is the backend interface (client.go), one method per
// store operation (most run one script), in parts by kind (fairBackend, rwBackend, semBackend,
// ledgerBackend, eventBackend, inspectBackend, memberBackend, replicaBackend, each beside
// its front-end); its methods take plain values (keys, owner ids, numbers,
// a ledgerRef and finishArgs), never the front-end's types. The Redis
// backend lives in redis*.go, the in-memory one (MemoryStore) in
// memory*.go; the other files are the front-end: kinds, acquisition,
// leases, ledgers, inspection.
//
// # Backfills
//
// A job's backfills are one hash beside its ledger (backfill.lua, at
// prefix:{n}:backfills:id): per backfill, "<id>/<field>" fields (range,
// rate, total, state, done, last, next). The add refuses a range that
// overlaps a running backfill's in its step; the cancel pauses the
// backfill's own ledger (prefix:{n}:ledger:<job>!backfill:<id>, its second
// key) in its step. The fleet's index of running backfills is a hash of
// its own (backfillindex.lua, prefix:backfills:{backfills}). A backfill's
// claims carry owner ids ending "/backfill" (BackfillOwnerTag), which
// claim.lua reads in the lock's hash to make a claim that finds one
// holding the lock wait for it.
//
// # One source of truth for each script
//
// The memory backend is the embedded default (the command with no Redis,
// and lock.NewMemory), so it re-implements each script in Go: a twin that
// must answer exactly as the script does. TestBackendsAgree
// (differential_test.go) keeps them so: the same random sequence of
// operations goes to a real redis-server and to a MemoryStore, and every
// answer must be equal (fencing tokens, TTLs and times as distances);
// each run calls every script and meets every reply both backends can give
// (diffReplies: all but the replies about keys of another type, which a
// MemoryStore cannot hold and the Redis tests meet). No divergence is
// tolerated, none is listed as known.
//
// The alternative, running the very same Lua in-process, was measured and
// rejected (bench/README.md, "The embedded default", bench/jobtick_test.go):
// one job-tick (a Ledger.Claim and its Finish with a history entry) costs
// 5.9 to 8.3 µs, 4.0 KB and 56 allocations on the Go twins, against 0.39
// to 0.55 ms, 543 KB and 2,253 allocations with the scripts run by
// miniredis v2.40.0 (gopher-lua v1.1.1 behind RESP, on a net.Pipe through
// go-redis's Dialer: no port), about 65 times as much (load average 2.5 to
// 3.4 on 2 cores). miniredis builds a Lua state per EVAL, and its TTLs do
// not run down with the clock unless ClockTTL is set. It would add five
// modules to the library's graph (miniredis, gopher-lua, whose last
// release is of 2023, and three chzyer modules that gopher-lua's go.mod
// requires; 26 to 31 in `go list -m all` of a module that imports lock and
// scheduler) and about 0.5 MB to its binaries, against a library meant to
// stay lean. A command set of our own under gopher-lua would still pay the
// interpreter and bring gopher-lua. So the twins stay, and the
// differential test is their contract.
package core
