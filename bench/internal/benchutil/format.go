package benchutil

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// FmtDur prints a duration with three significant digits ("850µs",
// "1.25ms", "12.5ms", "125ms", "12.5s"), and "-" for d ≤ 0 (not measured).
func FmtDur(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/1e6)
	case d < 10*time.Second:
		return fmt.Sprintf("%.0fms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
}

// WriteMarkdown writes header and rows to w as a Markdown table with its
// columns padded to their widest cell: the first left columns
// left-aligned, the others right-aligned. Every row must have at most as
// many cells as header.
func WriteMarkdown(w io.Writer, header []string, rows [][]string, left int) {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = utf8.RuneCountInString(h)
	}
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i < left {
				b.WriteString(" " + c + pad + " |")
			} else {
				b.WriteString(" " + pad + c + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(header)
	sep := make([]string, len(header))
	for i := range sep {
		if i < left {
			sep[i] = strings.Repeat("-", width[i])
		} else {
			sep[i] = strings.Repeat("-", width[i]-1) + ":"
		}
	}
	line(sep)
	for _, row := range rows {
		line(row)
	}
}

// Verdict is "PASS" if a target was met, else "MISS".
func Verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// MetricTable is a table with a row per metric and a column per result
// (of type T), the metrics' names in the first column.
type MetricTable[T any] struct {
	results []T
	header  []string
	rows    [][]string
}

// NewMetricTable starts a table for results whose header is corner, then
// name of each result.
func NewMetricTable[T any](corner string, results []T, name func(T) string) *MetricTable[T] {
	t := &MetricTable[T]{results: results, header: []string{corner}}
	for _, r := range results {
		t.header = append(t.header, name(r))
	}
	return t
}

// Row adds the row of the metric label: f of each result.
func (t *MetricTable[T]) Row(label string, f func(T) string) {
	cells := []string{label}
	for _, r := range t.results {
		cells = append(cells, f(r))
	}
	t.rows = append(t.rows, cells)
}

// Write writes the table to w with WriteMarkdown, the metrics' names
// left-aligned and the results right-aligned.
func (t *MetricTable[T]) Write(w io.Writer) {
	WriteMarkdown(w, t.header, t.rows, 1)
}
