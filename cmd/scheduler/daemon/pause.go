package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/scheduler"
)

// A pause with a reason and an end: `scheduler pause JOB -note TEXT
// [-until TIME|DURATION]` and POST /api/jobs/{name}/pause with the JSON
// body {"note": ..., "until": ...}. The note is required (at most
// fleet.MaxPauseNote bytes, 1000: a sentence or two, as Temporal's
// schedule notes; a longer text belongs in a ticket the note names; one
// line of text: no control characters, which could break the command's
// tables or drive a terminal);
// until is optional: a time in RFC 3339 or a Go duration from now, in the
// future. The ledger keeps them with who paused (the actor, as the audit
// trail names it: the token's name, "loopback", or "cli:" and the OS user)
// and when (the store's clock); the pause lifts itself at until on every
// replica. Bad input is refused before anything is sent: nothing changes.

// PauseRequest is the JSON body of POST /api/jobs/{name}/pause.
type PauseRequest struct {
	Note  string `json:"note"`            // why: required
	Until string `json:"until,omitempty"` // when it lifts itself: RFC 3339, or a Go duration from now; "" until a resume
}

// PauseJSON is a job's pause in force, in the admin API and `scheduler
// jobs -json`.
type PauseJSON struct {
	By    string     `json:"by,omitzero"`     // who paused: the actor, or "replica:" and the id of the replica whose finish paused the job (pause_after_failures); absent if unknown (a pause an older version wrote)
	At    time.Time  `json:"at,omitzero"`     // when, on the store's clock; absent if unknown, as By
	Note  string     `json:"note"`            // why; "" if unknown, as By
	Until *time.Time `json:"until,omitempty"` // when it lifts itself; absent: at a resume
}

// maxPauseBody bounds the body of a pause request: a note of the longest
// kind fits many times over.
const maxPauseBody = 64 << 10

// info checks p and returns the pause it asks for, by who, at now. The
// error names what is at fault; nothing has been changed.
func (p PauseRequest) info(by string, now time.Time) (fleet.PauseInfo, error) {
	note := strings.TrimSpace(p.Note)
	switch {
	case note == "":
		return fleet.PauseInfo{}, errors.New("note: missing: say why the job is paused (it is shown with the pause, and in the audit trail)")
	case len(p.Note) > fleet.MaxPauseNote:
		return fleet.PauseInfo{}, fmt.Errorf("note: %d bytes, at most %d: name a ticket or a page instead of pasting it", len(p.Note), fleet.MaxPauseNote)
	case strings.ContainsFunc(p.Note, unicode.IsControl):
		return fleet.PauseInfo{}, fmt.Errorf("note: %q has a control character (a line break, a tab, an escape): write it on one line of plain text", p.Note)
	}
	info := fleet.PauseInfo{By: by, Note: p.Note}
	if p.Until != "" {
		until, err := parseUntil(p.Until, now)
		if err != nil {
			return fleet.PauseInfo{}, err
		}
		info.Until = until
	}
	return info, nil
}

// parseUntil reads the end of a pause or a freeze: a time in RFC 3339, or
// a Go duration from now; it must be in the future.
func parseUntil(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New(`until: missing: give a time in RFC 3339 (such as 2026-12-01T09:00:00Z) or a duration from now (such as 2h30m)`)
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		d, derr := time.ParseDuration(s)
		if derr != nil {
			return time.Time{}, fmt.Errorf("until %q: neither a time in RFC 3339 (such as 2026-12-01T09:00:00Z) nor a duration from now (such as 2h30m)", s)
		}
		t = now.Add(d)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("until %q: %s is not in the future", s, t.UTC().Format(time.RFC3339))
	}
	return t, nil
}

// auditNote is the note of a pause's audit entry: its note, and its end.
func auditNote(p fleet.PauseInfo) string {
	if p.Until.IsZero() {
		return p.Note
	}
	return p.Note + " (until " + p.Until.UTC().Format(time.RFC3339) + ")"
}

// printable is a note (or any text an operator wrote) as the command's
// tables print it: each control character (a line break, a tab, a
// terminal escape: unicode.IsControl, U+0000-U+001F, U+007F-U+009F) as Go
// quotes it (\n, \t, \x1b, \u0085), the rest as it is, so that a note
// can neither break a table nor drive the terminal. The daemon refuses
// such notes; older ones, and entries written by other means, may hold
// them.
func printable(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// pauseText is p as `scheduler jobs` prints it in its PAUSED column: until
// when, by whom, since when (without an end), and the note, each left out
// when unknown (a pause an older version wrote has a note alone, or
// nothing: "no note").
func pauseText(p *PauseJSON) string {
	var head []string
	if p.Until != nil {
		head = append(head, "until "+fmtTime(p.Until))
	}
	if p.By != "" {
		head = append(head, "by "+printable(p.By))
	}
	if p.Until == nil && !p.At.IsZero() {
		head = append(head, "at "+fmtTime(&p.At))
	}
	if len(head) == 0 {
		head = append(head, "paused")
	}
	note := "no note"
	if p.Note != "" {
		note = printable(p.Note)
	}
	return strings.Join(head, " ") + ": " + note
}

// pauseJSON is st's pause in force, if any.
func pauseJSON(st fleet.LedgerState) *PauseJSON {
	if !st.Paused {
		return nil
	}
	p := &PauseJSON{By: st.Pause.By, Note: st.Pause.Note}
	if !st.Pause.At.IsZero() {
		p.At = st.Pause.At.UTC()
	}
	if !st.Pause.Until.IsZero() {
		t := st.Pause.Until.UTC()
		p.Until = &t
	}
	return p
}

// pauseBody reads and checks the body of POST /api/jobs/{name}/pause.
func pauseBody(r *http.Request) (fleet.PauseInfo, error) {
	var p PauseRequest
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxPauseBody))
	if err != nil {
		return fleet.PauseInfo{}, fmt.Errorf("body: %w (at most %d bytes)", err, maxPauseBody)
	}
	if len(strings.TrimSpace(string(b))) > 0 {
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return fleet.PauseInfo{}, fmt.Errorf("body: not a pause request, {\"note\": \"why\", \"until\": \"2h\"}: %w", err)
		}
	}
	return p.info(actor(r.Context()), time.Now())
}

// autoPaused appends the audit entry of a pause that a finish set
// (pause_after_failures, the run r of scheduler.OutcomeAutoPaused): the
// action pause, by the actor "replica:" and the id of the replica whose
// finish set it, from no address, with the pause's note; within
// auditTimeout, or until ctx ends. A failure is logged. It blocks: the
// daemon calls it from autoPauses' goroutine.
func (a *audit) autoPaused(ctx context.Context, r scheduler.Run, warn func(msg string, args ...any)) {
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	if err := a.append(ctx, "pause", r.Job, "replica:"+r.Replica, "", r.Error); err != nil {
		warn("audit entry not appended", "action", "pause", "target", r.Job, "error", err)
	}
}
