// Package benchutil holds the helpers that the three benchmark programs of
// this module, bench (the lock comparison), schedbench (the scheduler at
// fleet scale) and fairbench (the fair lock), share: latency percentiles,
// INFO commandstats and cpu snapshots with the process's and the machine's
// CPU time, their deltas and their rendering, Jain's index, the error
// counts, duration formatting, the Markdown table writers, the target
// verdicts, the server's version and the load average, the throwaway
// redis-server with its control client, the program's entry point (signals,
// the CPU profile), and the clean-up that kills the redis-server when a
// program gives up.
//
// Where the programs print something differently, the helper takes a
// parameter (FormatCounts' precision, WriteMarkdown's left-aligned columns,
// WaitOrAbort's message) or leaves the difference to the caller
// (ServerVersion's ErrNoVersion, which ServerVersionOr turns into a
// default, FmtDur's zero), so that each program's output stays as it was.
package benchutil
