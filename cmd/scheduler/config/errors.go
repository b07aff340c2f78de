package config

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Pos is a place in a config file. The zero Pos is no place: the setting
// came from the environment or from a default.
type Pos struct {
	File   string // the path given to Load
	Line   int    // 1-based
	Column int    // 1-based, in bytes
}

// IsValid reports whether p is a place in a file.
func (p Pos) IsValid() bool { return p.Line > 0 }

// String returns "file:line:col", or "" for the zero Pos.
func (p Pos) String() string {
	if !p.IsValid() {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column)
}

// Error is one thing wrong with a config: where it is (a place in the file,
// or the environment variable that set the value), the job it is about (if
// any), the setting at fault and what is wrong. It never holds the value of
// a secret. Find it with errors.As; Load returns every Error at once, as
// Errors.
type Error struct {
	Pos Pos // where in the file; zero if Env is set, or if the setting was not in the file
	// Env names the environment variable that set the value, if one did.
	Env string
	// Job is the name of the job the error is about, or "".
	Job string
	// Field is the setting at fault, as a dotted path: "redis.url",
	// "lock.lease"; within a job, relative to it: "schedule",
	// "exec.command". An unknown key is given as written.
	Field string
	// Msg says what is wrong.
	Msg string

	// subject is the place in file, for WriteText.
	subject *hcl.Range
	file    *hcl.File
}

// Error formats e on one line:
//
//	config.hcl:12:3: job "backup": schedule: expected 5 to 6 fields, found 3: "* * *"
//	env LOCKCRON_LOG__LEVEL: log.level: "loud" is not one of trace, debug, info, warn, error
//	config.hcl:13:3: job "backup": scheduel: Unsupported argument: An argument named "scheduel" is not expected here. Did you mean "schedule"?
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.Env != "":
		b.WriteString("env " + e.Env + ": ")
	case e.Pos.IsValid():
		b.WriteString(e.Pos.String() + ": ")
	}
	if e.Job != "" {
		fmt.Fprintf(&b, "job %q: ", e.Job)
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every Error found in a config, sorted: the file's in the order
// of their places, then those from the environment. Load returns it as its
// error (never empty). It is not safe for concurrent modification.
type Errors []*Error

// Error prints one Error a line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// WriteText writes es for a person, with HCL's diagnostic writer: each
// Error on its line, then the lines of the file it is about, unless they
// set a secret (a password, a token or a URL, which may hold one).
func (es Errors) WriteText(w io.Writer) error {
	for _, e := range es {
		d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: e.Error()}
		if e.file != nil && !secretLine.Match(linesOf(e.file.Bytes, *e.subject)) {
			d.Subject = e.subject
		}
		if err := hcl.NewDiagnosticTextWriter(w, map[string]*hcl.File{e.Pos.File: e.file}, 0, false).WriteDiagnostic(d); err != nil {
			return err
		}
	}
	return nil
}

// secretLine matches the text of a setting that holds a secret.
var secretLine = regexp.MustCompile(`\b(password|token|url)\s*=`)

// linesOf returns the lines of src that r is on.
func linesOf(src []byte, r hcl.Range) []byte {
	start := bytes.LastIndexByte(src[:min(r.Start.Byte, len(src))], '\n') + 1
	end := bytes.IndexByte(src[min(r.End.Byte, len(src)):], '\n')
	if end < 0 {
		return src[start:]
	}
	return src[start : min(r.End.Byte, len(src))+end]
}

// Unwrap returns each Error, for errors.As and errors.Is.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sortErrors orders errors by place: the file's by line and column, then
// those without a place, then the environment's by variable name. Errors at
// the same place keep their order.
func sortErrors(es Errors) {
	rank := func(e *Error) int { return min(len(e.Env), 1) - min(e.Pos.Line, 1) }
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(
			cmp.Compare(rank(a), rank(b)),
			cmp.Compare(a.Env, b.Env),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Column, b.Pos.Column),
		)
	})
}
