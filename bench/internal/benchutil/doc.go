// Package benchutil holds the helpers that the two benchmark programs of
// this module, bench (the lock comparison) and schedbench (the scheduler at
// fleet scale), share: latency percentiles, INFO commandstats deltas and
// their rendering, duration formatting, the Markdown table writer, the
// target verdicts, the server's version and the load average, and the
// clean-up that kills the throwaway redis-server when a program gives up.
//
// Where the two programs print something differently, the helper takes a
// parameter (FormatCounts' precision, WriteMarkdown's left-aligned columns)
// or leaves the difference to the caller (ServerVersion's ErrNoVersion,
// FmtDur's zero), so that each program's output stays as it was.
package benchutil
