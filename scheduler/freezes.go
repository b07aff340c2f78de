package scheduler

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"
	"unicode"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/lock"
)

// A Freeze stops, fleet-wide, the ticks of the jobs whose names match its
// Jobs pattern (path.Match) from its Created until its Until, both on the
// lock store's clock: such a tick (by its scheduled time, so that every
// replica decides the same) is not claimed, and it is recorded once across
// the fleet as OutcomeExcluded, with the reason "freeze ID: NOTE".
type Freeze = fleet.Freeze

// MaxFreezeNote is the longest note of a freeze, in bytes: a sentence or
// a paragraph, as a pause's; it travels in each excluded tick's history
// entry.
const MaxFreezeNote = 1000

// freezeRead is how often each running Scheduler reads the fleet's
// freezes: one EVALSHA of a small hash per replica per second. A Freeze or
// Unfreeze also tells the fleet on the control topic, which makes the
// replicas that hear it read them at once.
const freezeRead = time.Second

// ErrUnknownFreeze: Unfreeze of an id that names no freeze, or one that has
// ended.
var ErrUnknownFreeze = errors.New("scheduler: no such freeze")

// Freeze stops the ticks of the jobs whose names match pattern (path.Match;
// "" is every job) on every replica, from now until until, with note
// saying why; it returns the freeze with its id. It is kept in the lock
// store, so replicas that start later honour it too, and it ends at until
// by itself. Running replicas honour it within a second. It needs no Run.
// It returns ErrInvalid, nothing changed, for a note that is empty, over
// MaxFreezeNote bytes or holds a control character (unicode.IsControl: a
// line break, a tab, a terminal escape), a malformed pattern or one that matches none of the
// Scheduler's jobs, and an until that is not after the store's time; and
// the store's error.
func (s *Scheduler) Freeze(ctx context.Context, pattern string, until time.Time, note string) (Freeze, error) {
	if pattern == "" {
		pattern = "*"
	}
	if err := s.checkFreeze(pattern, note); err != nil {
		return Freeze{}, err
	}
	f, err := s.store.AddFreeze(ctx, pattern, until, note)
	if err != nil {
		if errors.Is(err, lock.ErrInvalid) {
			return Freeze{}, fmt.Errorf("scheduler: freeze: until %s is not in the future (the store's time is the judge): %w",
				until.UTC().Format(time.RFC3339), ErrInvalid)
		}
		return Freeze{}, fmt.Errorf("scheduler: freeze: %w", err)
	}
	s.heardFreezes()
	s.log.Info("jobs frozen", "freeze", f.ID, "jobs", f.Jobs, "until", fmtTick(f.Until))
	return f, nil
}

// checkFreeze checks a freeze's pattern and note.
func (s *Scheduler) checkFreeze(pattern, note string) error {
	switch {
	case strings.TrimSpace(note) == "":
		return fmt.Errorf("scheduler: freeze: note: missing: say why the jobs are frozen: %w", ErrInvalid)
	case len(note) > MaxFreezeNote:
		return fmt.Errorf("scheduler: freeze: note: %d bytes, over the %d a note may have: %w", len(note), MaxFreezeNote, ErrInvalid)
	case strings.ContainsFunc(note, unicode.IsControl):
		return fmt.Errorf("scheduler: freeze: note: %q has a control character (a line break, a tab, an escape): write it on one line of plain text: %w",
			note, ErrInvalid)
	case strings.ContainsFunc(pattern, unicode.IsControl):
		return fmt.Errorf("scheduler: freeze: jobs: %q has control characters: %w", pattern, ErrInvalid)
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return fmt.Errorf("scheduler: freeze: jobs: %q is not a pattern (path.Match): %v: %w", pattern, err, ErrInvalid)
	}
	var names []string
	for _, e := range s.ordered() {
		if ok, _ := path.Match(pattern, e.job.Name); ok {
			return nil
		}
		names = append(names, e.job.Name)
	}
	return fmt.Errorf("scheduler: freeze: jobs: %q matches no job (the jobs are %s): %w", pattern, strings.Join(names, ", "), ErrInvalid)
}

// Unfreeze ends the freeze id on every replica (within a second). It needs
// no Run. It returns ErrUnknownFreeze for an id that names no freeze (or
// one that has ended), and the store's error.
func (s *Scheduler) Unfreeze(ctx context.Context, id string) error {
	if err := s.store.DeleteFreeze(ctx, id); err != nil {
		if errors.Is(err, fleet.ErrNoFreeze) {
			return fmt.Errorf("%w: %q", ErrUnknownFreeze, id)
		}
		return fmt.Errorf("scheduler: unfreeze %q: %w", id, err)
	}
	s.heardFreezes()
	s.log.Info("freeze ended", "freeze", id)
	return nil
}

// Freezes returns the freezes that have not ended, in the order they were
// made, from the store. It needs no Run.
func (s *Scheduler) Freezes(ctx context.Context) ([]Freeze, error) {
	fs, _, err := s.store.Freezes(ctx)
	if err != nil {
		return nil, fmt.Errorf("scheduler: freezes: %w", err)
	}
	return fs, nil
}

// heardFreezes tells the fleet, and this replica, to read the freezes
// again.
func (s *Scheduler) heardFreezes() {
	s.rereadFreezes()
	ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
	defer cancel()
	if _, err := s.store.Publish(ctx, controlTopic, "freezes"); err != nil {
		s.log.Warn("the fleet was not told of the freeze: replicas read it within a second", "error", err)
	}
}

// rereadFreezes makes the reader of the freezes read them now.
func (s *Scheduler) rereadFreezes() {
	select {
	case s.freezeNow <- struct{}{}:
	default:
	}
}

// readFreezes reads the fleet's freezes every freezeRead, and at once when
// told to (rereadFreezes), until the Scheduler stops; the first read that
// succeeds closes freezesRead. A read that fails keeps the freezes known.
func (s *Scheduler) readFreezes() {
	t := time.NewTicker(freezeRead)
	defer t.Stop()
	warned, read := false, false
	for {
		ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
		fs, _, err := s.store.Freezes(ctx)
		cancel()
		switch {
		case err == nil:
			s.freezeMu.Lock()
			s.freezes = fs
			s.freezeMu.Unlock()
			if !read {
				close(s.freezesRead)
				read = true
			}
			warned = false
		case !warned && s.stopCtx.Err() == nil:
			s.log.Warn("freezes unreadable: the last ones read hold", "error", err)
			warned = true
		}
		select {
		case <-s.stopping:
			return
		case <-s.freezeNow:
		case <-t.C:
		}
	}
}

// knownFreezes returns the freezes as last read here (readFreezes): a
// slice that is replaced, never changed.
func (s *Scheduler) knownFreezes() []Freeze {
	s.freezeMu.Lock()
	defer s.freezeMu.Unlock()
	return s.freezes
}

// covers reports whether f covers tick of job.
func covers(f Freeze, job string, tick time.Time) bool {
	ok, _ := path.Match(f.Jobs, job)
	return ok && !tick.Before(f.Created) && tick.Before(f.Until)
}
