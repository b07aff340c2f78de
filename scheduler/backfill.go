package scheduler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/lock"
)

// Limits and defaults of a backfill (Backfill).
const (
	// DefaultBackfillRate is a backfill's rate when none is given: one
	// tick a second, gentle on what the job talks to.
	DefaultBackfillRate = 1.0
	// MaxBackfillRate is the highest rate a backfill may ask for.
	MaxBackfillRate = 1000.0
	// MinBackfillRate is the lowest: one tick a day (slower rates would
	// not fit a time.Duration's interval).
	MinBackfillRate = 1.0 / 86400
	// MaxBackfillTicks is how many ticks a backfill may hold without
	// BackfillOptions.Force.
	MaxBackfillTicks = 100_000
	// MaxForcedBackfillTicks is how many it may hold with Force: a
	// ceiling on the work of counting them, and on the backfill.
	MaxForcedBackfillTicks = 10 * MaxBackfillTicks
	// MaxBackfillListed is how many ticks a dry run lists (BackfillTicks):
	// the first ones; it counts them all.
	MaxBackfillListed = 10_000
)

// backfillSuffix joins a job's name and a backfill's id in the id of the
// backfill's own ledger (beside the job's lock) and in its carrier lock.
const backfillSuffix = "!backfill:"

// backfillPoll is how often each running Scheduler reads the fleet's index
// of running backfills (one EVALSHA per replica), and the backfills of each
// job of its own that the index names (one per such job), to take on one
// that no replica carries (its carrier died or stopped). A new backfill,
// and a carrier's stop, are also told on the control topic, which makes
// the replicas that hear it read them at once.
const backfillPoll = 5 * time.Second

// backfillIndexGrace is how long an index entry whose backfill is not in
// its job's backfills is kept: its add may be under way (the index is
// written first).
const backfillIndexGrace = time.Minute

// backfillIndexRenew is how old an index entry of a running backfill may
// grow before a reader adds it again, renewing the index's lifetime
// (fleet.LedgerTTL after its last add): a backfill may run for longer.
const backfillIndexRenew = 24 * time.Hour

// ErrUnknownBackfill: CancelBackfill of an id that names no backfill of
// the Scheduler's jobs (or one dropped fleet.BackfillKeep after it ended).
var ErrUnknownBackfill = errors.New("scheduler: no such backfill")

// ErrBackfillEnded: CancelBackfill of a backfill that has finished.
var ErrBackfillEnded = errors.New("scheduler: backfill has finished")

// ErrBackfillOverlap: Backfill of a range that overlaps the range of a
// running backfill of the job (the error names it): each would run the
// ticks they share.
var ErrBackfillOverlap = errors.New("scheduler: the range overlaps a running backfill of the job")

// BackfillOptions say what a backfill runs (Backfill, BackfillTicks).
type BackfillOptions struct {
	// From and To bound the ticks run, both included.
	From, To time.Time
	// OnlyMissing skips the ticks known done: see the package doc,
	// "Backfill".
	OnlyMissing bool
	// Rate is how many ticks a second may start, at most. Default
	// DefaultBackfillRate; at most MaxBackfillRate.
	Rate float64
	// Force allows more than MaxBackfillTicks ticks.
	Force bool
	// By says who asked for it (an operator, a token), for the record.
	By string
}

// A Backfill is a run of a job's past ticks (Scheduler.Backfill), as the
// store keeps it.
type Backfill struct {
	ID          string    `json:"id"`
	Job         string    `json:"job"`
	From        time.Time `json:"from"`
	To          time.Time `json:"to"`
	Rate        float64   `json:"rate"`
	OnlyMissing bool      `json:"only_missing"`
	By          string    `json:"by,omitempty"`
	// Total is how many ticks the range holds (calendars and freezes
	// applied); Done how many of them have been handled: run, or skipped
	// as done already (OnlyMissing, or by an earlier carrier); Last the
	// latest tick handled (zero before the first).
	Total int64     `json:"total"`
	Done  int64     `json:"done"`
	Last  time.Time `json:"last,omitzero"`
	// State is "running", "cancelled" or "finished".
	State       string    `json:"state"`
	Created     time.Time `json:"created"`
	Ended       time.Time `json:"ended,omitzero"`
	CancelledBy string    `json:"cancelled_by,omitempty"`
	// startIn is how long, when it was read, until its next tick may
	// start (the store's next, against the store's clock).
	startIn time.Duration
}

// Running reports whether b is still running.
func (b Backfill) Running() bool { return b.State == fleet.BackfillRunning }

// BackfillTicks returns the ticks a Backfill of job with o would run, in
// order, without changing anything (a dry run): the job's ticks in
// [o.From, o.To], its calendars and the freezes applied, and with
// o.OnlyMissing those known done left out; the first MaxBackfillListed of
// them, and how many there are. It returns the errors of Backfill.
func (s *Scheduler) BackfillTicks(ctx context.Context, job string, o BackfillOptions) ([]time.Time, int, error) {
	e, _, fs, err := s.checkBackfill(ctx, job, &o)
	if err != nil {
		return nil, 0, err
	}
	var done map[int64]bool
	if o.OnlyMissing {
		if done, err = s.doneTicks(ctx, e); err != nil {
			return nil, 0, err
		}
	}
	var ticks []time.Time
	n := 0
	for t := range backfillRange(e, o.From, o.To, fs) {
		if done[t.UnixMilli()] {
			continue
		}
		if n++; n <= MaxBackfillListed {
			ticks = append(ticks, t)
		}
	}
	return ticks, n, nil
}

// Backfill records a backfill of job's past ticks in the lock store and
// tells the fleet; a replica that runs the job (Run) takes it on and runs
// each tick once across the fleet, oldest first, at most o.Rate a second,
// under the job's lock (see the package doc, "Backfill"). It needs no Run.
// It returns the backfill with its id; ErrUnknownJob; ErrInvalid, with
// nothing recorded, for From after To, To in the future, a range with no
// tick, more than MaxBackfillTicks ticks without Force, or a bad Rate;
// ErrBackfillOverlap, nothing recorded, for a range that overlaps a
// running backfill of the job (checked in the store, in the add's step);
// and the store's error.
func (s *Scheduler) Backfill(ctx context.Context, job string, o BackfillOptions) (Backfill, error) {
	e, total, _, err := s.checkBackfill(ctx, job, &o)
	if err != nil {
		return Backfill{}, err
	}
	id := "bf-" + randomHex(4)
	// The fleet's index first: a backfill is never running unindexed (an
	// entry whose add failed is dropped, here or by its readers).
	if err := s.store.IndexBackfill(ctx, id, job); err != nil {
		return Backfill{}, fmt.Errorf("scheduler: backfill %q: %w", job, err)
	}
	f := map[string]string{
		"job": job, "from": strconv.FormatInt(o.From.UnixMilli(), 10), "to": strconv.FormatInt(o.To.UnixMilli(), 10),
		"rate": strconv.FormatFloat(o.Rate, 'g', -1, 64), "total": strconv.Itoa(total), "by": o.By,
	}
	if o.OnlyMissing {
		f["only_missing"] = "1"
	}
	if err := e.ledger.AddBackfill(ctx, id, f); err != nil {
		s.unindexBackfill(id)
		if oe := (*fleet.BackfillOverlapError)(nil); errors.As(err, &oe) {
			return Backfill{}, fmt.Errorf("scheduler: backfill %q: the range from %s to %s overlaps that of backfill %s, running: "+
				"cancel it (scheduler backfill -cancel %s) or wait for it to end: %w", job, fmtTick(o.From), fmtTick(o.To), oe.Running, oe.Running, ErrBackfillOverlap)
		}
		return Backfill{}, fmt.Errorf("scheduler: backfill %q: %w", job, err)
	}
	s.tellBackfills(ctx)
	s.log.Info("backfill requested", "job", job, "backfill", id, "from", fmtTick(o.From), "to", fmtTick(o.To),
		"ticks", total, "rate", o.Rate, "only_missing", o.OnlyMissing, "by", o.By)
	bs, err := s.backfillsOf(ctx, e)
	if err == nil {
		for _, b := range bs {
			if b.ID == id {
				return b, nil
			}
		}
	}
	return Backfill{ID: id, Job: job, From: o.From, To: o.To, Rate: o.Rate, OnlyMissing: o.OnlyMissing, By: o.By,
		Total: int64(total), State: fleet.BackfillRunning, Created: time.Now()}, nil
}

// checkBackfill checks a backfill of job, fills in o's defaults, and
// returns the job's entry, the count of the range's ticks, and the
// freezes applied.
func (s *Scheduler) checkBackfill(ctx context.Context, job string, o *BackfillOptions) (*entry, int, []Freeze, error) {
	e, err := s.entry(job)
	if err != nil {
		return nil, 0, nil, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("scheduler: backfill %q: "+format+": %w", append([]any{job}, append(a, ErrInvalid)...)...)
	}
	switch {
	case e.job.everyReplica():
		return nil, 0, nil, bad("job has replicas %q: a backfill runs each tick once across the fleet, and such a job runs on every replica", ReplicasAll)
	case len(e.job.After) > 0:
		return nil, 0, nil, bad("the job follows %s (after) and has no ticks of its own: backfill its parent%s (a backfill's runs start no runs of the jobs that follow it)",
			strings.Join(e.job.After, ", "), strings.Repeat("s", min(len(e.job.After)-1, 1)))
	case o.From.IsZero() || o.To.IsZero():
		return nil, 0, nil, bad("from and to: both are needed")
	case o.From.After(o.To):
		return nil, 0, nil, bad("from %s is after to %s", fmtTick(o.From), fmtTick(o.To))
	case o.To.After(s.opt.clock.Now()):
		return nil, 0, nil, bad("to %s is in the future: a backfill runs past ticks only", fmtTick(o.To))
	case o.Rate < 0 || o.Rate > MaxBackfillRate || o.Rate != o.Rate || o.Rate != 0 && o.Rate < MinBackfillRate:
		return nil, 0, nil, bad("rate %v: must be at least one tick a day (%v a second) and at most %v ticks a second", o.Rate, MinBackfillRate, MaxBackfillRate)
	case strings.ContainsFunc(o.By, func(r rune) bool { return r < ' ' }):
		return nil, 0, nil, bad("by %q has control characters", o.By)
	}
	if o.Rate == 0 {
		o.Rate = DefaultBackfillRate
	}
	fs, err := s.Freezes(ctx)
	if err != nil {
		fs = s.knownFreezes()
	}
	n := 0
	for range backfillRange(e, o.From, o.To, fs) {
		switch {
		case n == MaxBackfillTicks && !o.Force:
			return nil, 0, nil, bad("the range from %s to %s holds more than %d ticks: narrow it, or force it",
				fmtTick(o.From), fmtTick(o.To), MaxBackfillTicks)
		case n == MaxForcedBackfillTicks:
			return nil, 0, nil, bad("the range from %s to %s holds more than %d ticks, the most a forced backfill may hold: narrow it",
				fmtTick(o.From), fmtTick(o.To), MaxForcedBackfillTicks)
		}
		n++
	}
	if n == 0 {
		return nil, 0, nil, bad("the range from %s to %s holds no tick of the job (calendars and freezes applied)", fmtTick(o.From), fmtTick(o.To))
	}
	return e, n, fs, nil
}

// backfillRange yields e's ticks in [from, to], oldest first, but those its
// calendars or fs exclude.
func backfillRange(e *entry, from, to time.Time, fs []Freeze) func(yield func(time.Time) bool) {
	return func(yield func(time.Time) bool) {
		for t := e.sched.Next(from.Add(-time.Nanosecond)); !t.IsZero() && !t.After(to); t = e.sched.Next(t) {
			if _, _, _, ok := excludedBy(e, t, fs); ok {
				continue
			}
			if !yield(t) {
				return
			}
		}
	}
}

// doneTicks returns the ticks of e known done, in ms: those of its history
// entries of a run (ran or failed: scheduled, or a backfill's; not a
// manual run's), and the latest tick its ledger records done with such an
// outcome. Entries past the history's retention are not known.
func (s *Scheduler) doneTicks(ctx context.Context, e *entry) (map[int64]bool, error) {
	done := make(map[int64]bool)
	ran := func(o string) bool { return o == string(OutcomeRan) || o == string(OutcomeFailed) }
	st, err := e.ledger.State(ctx)
	if err != nil {
		return nil, fmt.Errorf("scheduler: backfill %q: %w", e.job.Name, err)
	}
	if st.Done > 0 && ran(st.Outcome) && st.Running == 0 {
		done[st.Done] = true
	}
	before := ""
	for {
		ents, err := e.ledger.History(ctx, 1000, before)
		if err != nil {
			return nil, fmt.Errorf("scheduler: backfill %q: history: %w", e.job.Name, err)
		}
		for _, ent := range ents {
			r := runFromEntry(e.job.Name, ent)
			if r.Trigger == 0 && ran(string(r.Outcome)) {
				done[r.Tick.UnixMilli()] = true
			}
		}
		if len(ents) < 1000 {
			return done, nil
		}
		before = ents[len(ents)-1].ID
	}
}

// Backfills returns the backfills of job, or of every job of the
// Scheduler if job is "", running and ended (kept fleet.BackfillKeep), job
// by job in the order they were added, oldest first: one round trip per
// job. It needs no Run. It returns ErrUnknownJob, and the store's error.
func (s *Scheduler) Backfills(ctx context.Context, job string) ([]Backfill, error) {
	entries := s.ordered()
	if job != "" {
		e, err := s.entry(job)
		if err != nil {
			return nil, err
		}
		entries = []*entry{e}
	}
	var out []Backfill
	for _, e := range entries {
		bs, err := s.backfillsOf(ctx, e)
		if err != nil {
			return nil, err
		}
		out = append(out, bs...)
	}
	return out, nil
}

// backfillsOf returns e's backfills, oldest first.
func (s *Scheduler) backfillsOf(ctx context.Context, e *entry) ([]Backfill, error) {
	bs, now, err := e.ledger.Backfills(ctx)
	if err != nil {
		return nil, fmt.Errorf("scheduler: backfills of %q: %w", e.job.Name, err)
	}
	out := make([]Backfill, 0, len(bs))
	for _, b := range bs {
		num := func(k string) int64 { n, _ := strconv.ParseInt(b.Fields[k], 10, 64); return n }
		rate, _ := strconv.ParseFloat(b.Fields["rate"], 64)
		v := Backfill{
			ID: b.ID, Job: e.job.Name, From: time.UnixMilli(num("from")), To: time.UnixMilli(num("to")), Rate: rate,
			OnlyMissing: b.Fields["only_missing"] == "1", By: b.Fields["by"], Total: num("total"), Done: b.Done,
			State: b.State, Created: b.Created, Ended: b.Ended, CancelledBy: b.CancelledBy,
		}
		if b.Next > 0 {
			v.startIn = time.UnixMilli(b.Next).Sub(now)
		}
		if b.Last > 0 {
			v.Last = time.UnixMilli(b.Last)
		}
		out = append(out, v)
	}
	return out, nil
}

// unindexBackfill drops id from the fleet's index of running backfills
// (it ended, or its add failed); a failure leaves it to the readers.
func (s *Scheduler) unindexBackfill(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
	defer cancel()
	if err := s.store.UnindexBackfill(ctx, id); err != nil {
		s.log.Debug("backfill left in the index", "backfill", id, "error", err)
	}
}

// CancelBackfill cancels the backfill id, by by: no tick of it starts once
// the cancel has returned (it pauses the backfill's own ledger in the same
// step, so that a claim of its that waits for the job's lock is refused),
// and the run under way ends as it would. It needs no Run. It returns the backfill,
// ErrUnknownBackfill, ErrBackfillEnded for one that finished (a cancelled
// one is cancelled again without error), and the store's error.
func (s *Scheduler) CancelBackfill(ctx context.Context, id, by string) (Backfill, error) {
	entries := s.ordered()
	// A running one is in the fleet's index: its job's backfills alone are
	// read. (An ended one is looked for in every job's.)
	if idx, _, err := s.store.BackfillIndex(ctx); err == nil {
		if e, err := s.entry(idx[id].Job); err == nil {
			entries = append([]*entry{e}, entries...)
		}
	}
	for _, e := range entries {
		bs, err := s.backfillsOf(ctx, e)
		if err != nil {
			return Backfill{}, err
		}
		for _, b := range bs {
			if b.ID != id {
				continue
			}
			if err := e.ledger.CancelBackfill(ctx, id, by, e.job.Name+backfillSuffix+id); err != nil {
				if errors.Is(err, fleet.ErrBackfillEnded) {
					return b, fmt.Errorf("%w: %q", ErrBackfillEnded, id)
				}
				return b, fmt.Errorf("scheduler: cancel backfill %q: %w", id, err)
			}
			s.unindexBackfill(id)
			s.tellBackfills(ctx)
			s.log.Info("backfill cancelled", "job", e.job.Name, "backfill", id, "by", by)
			if b.Running() {
				b.State, b.CancelledBy, b.Ended = fleet.BackfillCancelled, by, time.Now()
			}
			return b, nil
		}
	}
	return Backfill{}, fmt.Errorf("%w: %q", ErrUnknownBackfill, id)
}

// tellBackfills tells the fleet, and this replica, to read the backfills
// again.
func (s *Scheduler) tellBackfills(ctx context.Context) {
	s.rereadBackfills()
	if _, err := s.store.Publish(ctx, controlTopic, "backfills"); err != nil {
		s.log.Warn("the fleet was not told of the backfill: replicas read it within seconds", "error", err)
	}
}

// rereadBackfills makes the reader of the backfills read them now.
func (s *Scheduler) rereadBackfills() {
	select {
	case s.backfillNow <- struct{}{}:
	default:
	}
}

// readBackfills reads the fleet's index of running backfills every
// backfillPoll, and at once when told to (rereadBackfills), then the
// backfills of each job of its own that the index names, and takes on each
// running one that no replica carries, until the Scheduler stops. Its
// first read is of every job's backfills, which puts back in the index a
// running one missing from it.
func (s *Scheduler) readBackfills() {
	t := time.NewTicker(backfillPoll)
	defer t.Stop()
	warned := false
	warn := func(msg string, args ...any) {
		if !warned && s.stopCtx.Err() == nil {
			s.log.Warn(msg, args...)
			warned = true
		}
	}
	all := true
	for {
		ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
		idx, now, err := s.store.BackfillIndex(ctx)
		cancel()
		if err != nil {
			warn("the fleet's index of backfills is unreadable", "error", err)
		} else {
			s.readIndexed(idx, now, all, warn)
			all = false
		}
		select {
		case <-s.stopping:
			return
		case <-s.backfillNow:
		case <-t.C:
		}
	}
}

// readIndexed reads the backfills of the jobs idx names (of every job if
// all), takes on the running ones, and drops from the index the entries
// of backfills that ended, or that are missing past backfillIndexGrace.
func (s *Scheduler) readIndexed(idx map[string]fleet.BackfillIndexEntry, now time.Time, all bool, warn func(string, ...any)) {
	byJob := make(map[string][]string)
	for id, x := range idx {
		byJob[x.Job] = append(byJob[x.Job], id)
	}
	for _, e := range s.ordered() {
		ids := byJob[e.job.Name]
		if len(ids) == 0 && !all {
			continue
		}
		ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
		bs, err := s.backfillsOf(ctx, e)
		cancel()
		if err != nil {
			warn("backfills unreadable", "job", e.job.Name, "error", err)
			continue
		}
		seen := make(map[string]bool, len(bs))
		for _, b := range bs {
			seen[b.ID] = true
			_, indexed := idx[b.ID]
			switch {
			case b.Running() && (!indexed || now.Sub(idx[b.ID].At) > backfillIndexRenew):
				// (Again once a day: the add renews the index's lifetime,
				// which a backfill running for longer would outlive.)
				ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
				_ = s.store.IndexBackfill(ctx, b.ID, e.job.Name)
				cancel()
				s.takeOn(e, b)
			case b.Running():
				s.takeOn(e, b)
			case indexed:
				s.unindexBackfill(b.ID) // ended
			}
		}
		for _, id := range ids {
			if !seen[id] && now.Sub(idx[id].At) > backfillIndexGrace {
				s.unindexBackfill(id) // its add failed, or it was dropped
			}
		}
	}
}

// takeOn carries b on here if no replica does: it takes the backfill's
// carrier lock (one try) and starts its carrier.
func (s *Scheduler) takeOn(e *entry, b Backfill) {
	s.mu.Lock()
	if s.closing || s.carried[b.ID] || s.entries[e.job.Name] != e {
		s.mu.Unlock()
		return
	}
	s.carried[b.ID] = true
	s.mu.Unlock()
	lease, err := s.locks.Mutex(e.job.LockName + backfillSuffix + b.ID).TryLock(e.ctx)
	s.mu.Lock()
	if err != nil || s.closing {
		delete(s.carried, b.ID)
		s.mu.Unlock()
		if err == nil {
			s.unlockCarrier(lease)
		} else if !errors.Is(err, lock.ErrLocked) && e.ctx.Err() == nil {
			s.log.Warn("backfill not taken on", "job", e.job.Name, "backfill", b.ID, "error", err)
		}
		return
	}
	s.wg.Add(1) // under s.mu, before beginStop's Wait can start
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.unlockCarrier(lease)
			s.mu.Lock()
			delete(s.carried, b.ID)
			s.mu.Unlock()
			if s.stopCtx.Err() != nil {
				// Stopped: another replica takes it on at once, if it is
				// not over. (A carrier that failed leaves it to the next
				// poll, rather than have the fleet retry at once.)
				ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
				defer cancel()
				_, _ = s.store.Publish(ctx, controlTopic, "backfills")
			}
		}()
		s.carry(e, b, lease)
	}()
}

func (s *Scheduler) unlockCarrier(lease *lock.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
	defer cancel()
	_ = lease.Unlock(ctx)
}

// carry runs the ticks of b after its Last, while this replica holds its
// carrier lock (lease), and records its progress after each.
func (s *Scheduler) carry(e *entry, b Backfill, lease *lock.Lease) {
	ctx := lease.Context()
	log := s.log.With("job", e.job.Name, "backfill", b.ID)
	// Read again under the lock: a carrier that ended just before may have
	// moved it on, or it may be over.
	bs, err := s.backfillsOf(ctx, e)
	if b, err = findRunning(bs, b.ID, err); err != nil {
		return
	}
	keep, age := s.historyOf(e.job)
	g, err := s.ledgerOf(e.job)(e.job.LockName, e.job.Name+backfillSuffix+b.ID, fleet.WithHistory(keep, age), fleet.WithSharedHistory(e.job.Name),
		fleet.WithDefinition(e.digest), fleet.WithBackfillClaims())
	if err != nil {
		log.Error("backfill not carried on", "error", err)
		return
	}
	var done map[int64]bool
	if b.OnlyMissing {
		if done, err = s.doneTicks(ctx, e); err != nil {
			log.Warn("backfill paused here: the ticks done could not be read", "error", err)
			return
		}
	}
	// No tick is decided on before the fleet's freezes are read; each is
	// checked against the freezes known when it comes.
	if !s.awaitFreezes(e, b.From) {
		return
	}
	log.Info("backfill carried on", "done", b.Done, "total", b.Total, "from", fmtTick(b.From), "to", fmtTick(b.To))
	interval := time.Duration(float64(time.Second) / max(b.Rate, MinBackfillRate))
	// The rate holds across carriers: the store keeps the earliest start
	// of the next tick (next), on its clock.
	count, last, next := b.Done, b.Last, time.Now().Add(min(b.startIn, interval))
	progress := func(finished bool) (string, error) {
		pctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
		defer cancel()
		return e.ledger.BackfillProgress(pctx, b.ID, count, last.UnixMilli(), finished, time.Until(next))
	}
	// handled records t handled (run, or not to be run), and reports
	// whether the backfill is still running (a cancel ends it here).
	handled := func(t time.Time) bool {
		count, last = count+1, t
		state, err := progress(false)
		if err != nil {
			log.Warn("backfill progress not recorded", "error", err)
		} else if state != fleet.BackfillRunning {
			log.Info("backfill ends here", "state", state, "done", count)
			return false
		}
		return true
	}
	from := b.From
	if !last.IsZero() {
		from = last.Add(time.Nanosecond)
	}
	for t := range backfillRange(e, from, b.To, s.knownFreezes()) {
		ms := t.UnixMilli()
		if done[ms] {
			if !handled(t) {
				return
			}
			continue
		}
		timer := time.NewTimer(time.Until(next))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return
		}
		if !s.backfillLive(ctx, e, b.ID, log) {
			return
		}
		if _, reason, _, ok := excludedBy(e, t, s.knownFreezes()); ok {
			// A freeze the range was built without (read since) holds the
			// tick: it is handled, not run.
			log.Info("backfill tick not run", "tick", fmtTick(t), "why", reason)
			if !handled(t) {
				return
			}
			continue
		}
		next = time.Now().Add(interval)
		if !s.runBackfillTick(ctx, e, g, b.ID, t, interval) || !handled(t) {
			return
		}
	}
	if ctx.Err() != nil {
		return
	}
	if _, err := progress(true); err != nil {
		log.Warn("backfill end not recorded", "error", err)
		return
	}
	s.unindexBackfill(b.ID)
	log.Info("backfill finished", "done", count, "total", b.Total)
}

// findRunning returns the backfill id of bs if it is running, else an
// error.
func findRunning(bs []Backfill, id string, err error) (Backfill, error) {
	if err != nil {
		return Backfill{}, err
	}
	for _, b := range bs {
		if b.ID == id {
			if !b.Running() {
				return b, fmt.Errorf("scheduler: backfill %q: %s", id, b.State)
			}
			return b, nil
		}
	}
	return Backfill{}, fmt.Errorf("%w: %q", ErrUnknownBackfill, id)
}

// backfillLive reads whether the backfill id is still running (not
// cancelled), just before one of its ticks starts.
func (s *Scheduler) backfillLive(ctx context.Context, e *entry, id string, log hclog.Logger) bool {
	bs, err := s.backfillsOf(ctx, e)
	if _, err := findRunning(bs, id, err); err != nil {
		if ctx.Err() == nil && (errors.Is(err, ErrUnknownBackfill) || len(bs) > 0) {
			log.Info("backfill ends here", "why", err)
			return false
		}
		return ctx.Err() == nil // unreadable: the claim finds out, or the next read
	}
	return true
}

// runBackfillTick claims tick t in the backfill's ledger g and runs it
// under the job's lock, until the ledger records it done (run, or found
// done); it reports false if ctx ended first.
func (s *Scheduler) runBackfillTick(ctx context.Context, e *entry, g *fleet.Ledger, id string, t time.Time, pause time.Duration) bool {
	ms := t.UnixMilli()
	for {
		s.handleClaim(e, t, claimSpec{ledger: g, tick: ms, queue: true, backfill: id})
		sctx, cancel := context.WithTimeout(ctx, finishTimeout)
		st, err := g.State(sctx)
		cancel()
		if err == nil && st.Done >= ms {
			return true
		}
		if err == nil && st.Paused {
			// Cancelled: the cancel paused the backfill's ledger, and its
			// claim was refused.
			return false
		}
		// Given back (the stop, a lost lock) or not reached: again, unless
		// the carrier stops.
		timer := time.NewTimer(max(pause, 100*time.Millisecond))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return false
		}
	}
}

// ledgerOf is how j's ledgers are made: fair ones for LockFair.
func (s *Scheduler) ledgerOf(j Job) func(lockName, id string, opts ...fleet.LedgerOption) (*fleet.Ledger, error) {
	if j.LockKind == LockFair {
		return s.store.FairLedger
	}
	return s.store.Ledger
}

// historyOf is j's history retention, its own or the Scheduler's.
func (s *Scheduler) historyOf(j Job) (int, time.Duration) {
	keep, age := j.HistoryKeep, j.HistoryMaxAge
	if keep == 0 {
		keep = s.opt.historyKeep
	}
	if age == 0 {
		age = s.opt.historyMaxAge
	}
	return keep, age
}

// scheduled reports whether r is a scheduled tick's run: neither a manual
// run nor a backfill's.
func (r *run) scheduled() bool { return !r.manual && r.backfill == "" }

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
