// Package chaos is lockcron's fault suite: it runs a fleet of scheduler
// replicas against real Redis, injects faults on a seeded schedule, and
// checks what ran against an oracle that does not trust the system under
// test. It has no API; its test, TestChaos, is the suite.
//
//	go test ./chaos                                   # the quick scenarios (also in make test)
//	go test -v -timeout 20m ./chaos -args -chaos.full # every scenario (make chaos)
//	  -chaos.seed=N   replay a fault schedule (the seed is printed first)
//	  -chaos.run=STR  only the scenarios whose name contains STR (or one of A|B)
//	  -chaos.table=F  write the table of figures to F as well
//	go test -v -timeout 24h -run 'TestSoak$' ./chaos -args -chaos.soak=30m  # make soak
//
// # The fleet
//
// Each scenario starts its own redis-server (or a primary, a replica and
// three redis-sentinel processes), optionally behind the fault proxy of
// internal/faultproxy, and five replicas: processes of the scheduler
// command built from cmd/scheduler (or, for clock skew, of
// chaos/internal/skewed: the same daemon on a shifted clock). The jobs are
// exec jobs running chaos/internal/worker and http jobs answered by the
// suite, every second, overlap "queue", on_shutdown "handoff", no retries,
// with a 2s lease.
//
// # The oracle
//
// A separate redis-server, never faulted, holds the oracle
// (chaos/internal/oracle). Every run writes to it through one Lua script: a
// Start, a write every 50ms while it runs, and an End with its outcome,
// each with its job, tick, trigger, replica, fencing token and a reading of
// CLOCK_MONOTONIC, which every process on the machine shares. The same
// script is a fenced resource: it accepts a write only if its token is at
// least the job's highest accepted one, and orders every write.
//
// A run is effective when it ran its course with every write accepted. The
// checker asserts, for every scenario that is meant to survive its faults:
//
//   - no tick started twice: at most one effective run per job and tick;
//   - no two runs of one job overlapping while both are accepted by the
//     fence;
//   - tokens never going backwards: a run started later has a token at
//     least as large;
//   - every tick scheduled while a replica and Redis were up has an
//     effective run (ticks within a second before, more on a slow network,
//     and lease + 1s after, a window in which Redis was unreachable by every
//     replica are excused, and so are ticks the overlap policy let go: due
//     while an earlier tick was in hand, being claimed or run);
//   - every interrupted tick (its replica killed, stopped, paused or its
//     lock lost) in that span was run again whole;
//   - nothing leaked: no replica's goroutines more than doubled (and grew
//     by more than 100) over the fault phase, no key of the Redis under
//     test is left without a TTL, no exec job outlived its SIGKILLed
//     daemon by 10s.
//
// A scenario with NotSurvived set (an empty restart without persistence, a
// failover without replica acknowledgement) is known to break some of these:
// its violations are printed as figures and do not fail the test.
//
// # The soak
//
// TestSoak (make soak) keeps one world for -chaos.soak: the fault suite's
// survived faults that one standalone Redis behind the fault proxy can take
// (soakFaults), drawn at random from the seed, one after another, each
// followed by a quiet gap, on one fleet that is kept at five replicas. The
// checker judges the whole history with every fault window, and the
// resources sampled every 10s (each replica's goroutines, sockets and RSS;
// the Redis under test's clients, Pub/Sub channels and keys) must be flat
// (flatBounds). chaos/README.md says what it leaves out and why.
package chaos
