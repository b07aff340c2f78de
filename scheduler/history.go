package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/lockcron/lockcron/fleet"
)

// Defaults of the run history's retention (WithHistory, Job.HistoryKeep,
// Job.HistoryMaxAge).
const (
	DefaultHistoryKeep   = 100
	DefaultHistoryMaxAge = 30 * 24 * time.Hour
)

// MaxErrorTail is how much of a failed run's error its history entry keeps:
// the last MaxErrorTail bytes, after redaction (WithRedact).
const MaxErrorTail = 512

// A Run is one entry of a job's run history: a finished run, recorded once
// across the fleet by the replica that finished it, in the same step as its
// outcome and the release of its lock (a tick that missed its start
// deadline too, by the replica whose claim found it late); or the ticks
// found missed while every replica was down (Outcome OutcomeMissed).
type Run struct {
	// ID is the entry's id in the history, growing with each entry: pass
	// it to History as before to read the entries older than this one.
	// The store assigns it as it appends the entry, so the Run that
	// WithOnRun hears has none: tell runs apart there by Job, Tick and
	// Trigger.
	ID string `json:"id,omitempty"`
	// Job is the job's name.
	Job string `json:"job"`
	// Tick is the tick run (RFC 3339 in the history), or for a missed
	// entry the latest tick missed. A manual run reports the time it was
	// requested.
	Tick time.Time `json:"tick"`
	// Trigger is a manual run's number (Trigger); 0 for a scheduled tick.
	Trigger int64 `json:"trigger,omitempty"`
	// Replica is the replica that ran it (WithReplicaID), or that found
	// the ticks missed.
	Replica string `json:"replica"`
	// Attempt is the last try's number: 1, more after retries or a
	// takeover of an interrupted run; 0 for a tick recorded
	// deadline_missed before any try.
	Attempt int `json:"attempt,omitempty"`
	// Start and End bound the run on the replica's clock: from the claim
	// to the finish. Duration is End - Start, measured on its monotonic
	// clock.
	Start    time.Time     `json:"start"`
	End      time.Time     `json:"end"`
	Duration time.Duration `json:"duration_ns"`
	// Outcome is what became of the run.
	Outcome Outcome `json:"outcome"`
	// Token is the run's fencing token.
	Token int64 `json:"token,omitempty"`
	// TraceID is the run's trace, hex, if it was sampled.
	TraceID string `json:"trace_id,omitempty"`
	// Error is the tail of the run's error, at most MaxErrorTail bytes,
	// with secrets redacted. Reason says why a tick was not run, for an
	// operator to read: the lock's holder (skipped_busy), the pause, the
	// start deadline; or why a run was ended: the tick that replaced it
	// (replaced).
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Missed is, for an OutcomeMissed entry, how many ticks were missed,
	// up to Tick.
	Missed int64 `json:"missed,omitempty"`
	// Count is, for an entry of ticks skipped (skipped_busy, paused,
	// deadline_missed, excluded), how many consecutive ticks of one cause
	// it stands for, from First to Tick: the history coalesces them into
	// one entry (see the package doc, "Every tick leaves a trace"). 0 for
	// one tick.
	Count int64 `json:"count,omitempty"`
	// First is the first tick of such an entry (Tick is the last); zero
	// for one tick.
	First time.Time `json:"first,omitzero"`
	// Backfill is the id of the backfill whose run this is (Backfill); ""
	// for the others.
	Backfill string `json:"backfill,omitempty"`
	// Params are a manual run's parameters (TriggerParams); nil if none.
	// A run that follows a parent's manual run keeps all the params of the
	// request it follows (it got those its job declares, jobs.Info.Params).
	Params map[string]string `json:"params,omitempty"`
	// Parent is, for a run of a job that follows others (Job.After), the
	// parent run that started it: "job@tick" (jobs.Info.Parent).
	Parent string `json:"parent,omitempty"`

	// skip is the cause of a skipped tick (recordSkip), which coalesces
	// the entry with the history's newest of the same cause and outcome.
	skip string
}

// History returns the job's latest runs, newest first: at most limit
// (DefaultHistoryKeep when limit <= 0), and only those older than the
// entry whose ID is before, when before is not "". The history is kept in
// the lock store beside the job's ledger (fleet.Ledger.History), so every
// replica reads the same. It needs no Run. It returns ErrUnknownJob for a
// job the Scheduler does not have, ErrInvalid for a malformed before, and
// the store's error.
func (s *Scheduler) History(ctx context.Context, job string, limit int, before string) ([]Run, error) {
	e, err := s.entry(job)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultHistoryKeep
	}
	if before != "" && !fleet.ValidEntryID(before) {
		return nil, fmt.Errorf("scheduler: history %q: before %q is not an entry id: %w", job, before, ErrInvalid)
	}
	ents, err := e.ledger.History(ctx, limit, before)
	if err != nil {
		return nil, fmt.Errorf("scheduler: history %q: %w", job, err)
	}
	out := make([]Run, 0, len(ents))
	for _, ent := range ents {
		out = append(out, runFromEntry(job, ent))
	}
	return out, nil
}

// Fields of a history entry.
const (
	hTick     = "tick"
	hTrigger  = "trigger"
	hReplica  = "replica"
	hAttempt  = "attempt"
	hStart    = "start"
	hEnd      = "end"
	hDuration = "duration_ms"
	hOutcome  = "outcome"
	hToken    = "token"
	hTrace    = "trace"
	hError    = "error"
	hReason   = "reason"
	hMissed   = "missed"
	hSkip     = "skip"  // the cause of a skipped tick: the store coalesces by it (fleet.Ledger.Pass)
	hCount    = "count" // written by the store as it coalesces
	hFirst    = "first" // likewise: the first tick's hTick
	hBackfill = "backfill"
	hParent   = "parent"
)

// fields is r as a history entry's fields.
func (r Run) fields() map[string]string {
	f := map[string]string{
		hTick:     fmtTick(r.Tick),
		hReplica:  r.Replica,
		hOutcome:  string(r.Outcome),
		hStart:    r.Start.UTC().Format(time.RFC3339Nano),
		hEnd:      r.End.UTC().Format(time.RFC3339Nano),
		hDuration: strconv.FormatFloat(float64(r.Duration)/float64(time.Millisecond), 'f', 3, 64),
	}
	put := func(k string, v int64) {
		if v != 0 {
			f[k] = strconv.FormatInt(v, 10)
		}
	}
	put(hTrigger, r.Trigger)
	put(hAttempt, int64(r.Attempt))
	put(hToken, r.Token)
	put(hMissed, r.Missed)
	if r.TraceID != "" {
		f[hTrace] = r.TraceID
	}
	if r.Error != "" {
		f[hError] = r.Error
	}
	if r.Reason != "" {
		f[hReason] = r.Reason
	}
	if r.skip != "" {
		f[hSkip] = r.skip
	}
	if r.Backfill != "" {
		f[hBackfill] = r.Backfill
	}
	if len(r.Params) > 0 {
		b, _ := json.Marshal(r.Params) // a map of strings always marshals
		f[hParams] = string(b)
	}
	if r.Parent != "" {
		f[hParent] = r.Parent
	}
	return f
}

// runFromEntry reads a history entry; a field that is missing or malformed
// reads as its zero value.
func runFromEntry(job string, ent fleet.Entry) Run {
	f := ent.Fields
	num := func(k string) int64 { n, _ := strconv.ParseInt(f[k], 10, 64); return n }
	at := func(k string) time.Time { t, _ := time.Parse(time.RFC3339Nano, f[k]); return t }
	ms, _ := strconv.ParseFloat(f[hDuration], 64)
	var params map[string]string
	if js := f[hParams]; js != "" {
		_ = json.Unmarshal([]byte(js), &params) // malformed: none, as the other fields
	}
	return Run{
		ID: ent.ID, Job: job, Tick: at(hTick), Trigger: num(hTrigger), Replica: f[hReplica],
		Attempt: int(num(hAttempt)), Start: at(hStart), End: at(hEnd),
		Duration: time.Duration(ms * float64(time.Millisecond)), Outcome: Outcome(f[hOutcome]),
		Token: num(hToken), TraceID: f[hTrace], Error: f[hError], Reason: f[hReason], Missed: num(hMissed),
		Count: num(hCount), First: at(hFirst), Backfill: f[hBackfill], Params: params, Parent: f[hParent],
	}
}

// errorTail is the last MaxErrorTail bytes of err's text after redact,
// cut at a rune boundary and marked with "…" where it was cut.
func errorTail(err error, redact func(string) string) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	if redact != nil {
		msg = redact(msg)
	}
	if len(msg) <= MaxErrorTail {
		return msg
	}
	const mark = "…"
	cut := len(msg) - (MaxErrorTail - len(mark))
	for cut < len(msg) && !utf8.RuneStart(msg[cut]) {
		cut++
	}
	return mark + msg[cut:]
}
