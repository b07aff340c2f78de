package scheduler

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/lockcron/lockcron/fleet"
)

// Every tick leaves a trace: a tick that is not run because it was skipped
// (busy, paused, excluded, past its start deadline) is recorded in the
// job's history once across the fleet, and consecutive skips of one cause
// make one entry (Run.Count, Run.First). See the package doc.

// recordSkip records that tick of e was not run, for cause, the key that
// coalesces consecutive skips into one history entry ("busy:<holder
// replica>", "paused", "calendar:<name>", "freeze:<id>", "deadline"), and
// reason, the words an operator reads (Run.Reason): once across the fleet
// (fleet.Ledger.Pass: of several replicas that record the same tick, one
// writes), as an entry that the store coalesces with the history's newest
// when that one has the same outcome and cause. It sends two commands at
// most (a State read for a busy tick's holder is the caller's); it logs
// the skip once across the fleet, by the replica that wrote it, and passes
// it to WithOnRun.
//
// A skip is a fact already decided on this replica (a claim's answer, a
// pause, a calendar), not a guess that the fleet may still claim the tick,
// so Pass is given a negative settled: the store's clock may be up to one
// period of the job behind this replica's (the clock skew the scheduler
// tolerates, DESIGN's "up to the period"). A replica whose clock runs
// ahead fires early, and its skip is recorded all the same; only a tick
// more than a period ahead of the store is refused.
func (s *Scheduler) recordSkip(e *entry, tick time.Time, outcome Outcome, cause, reason string) {
	now := time.Now()
	r := Run{Job: e.job.Name, Tick: tick, Replica: s.opt.replica, Start: now, End: now, Outcome: outcome, Reason: reason, skip: cause}
	skew := time.Duration(0)
	if next := e.sched.Next(tick); !next.IsZero() {
		skew = next.Sub(tick)
	}
	ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
	ledger := e.runLedger()
	if e.job.everyReplica() {
		ledger = s.ownSkip(ctx, e, tick, skew, outcome, &r)
	}
	first, err := ledger.Pass(ctx, tick.UnixMilli(), -skew, r.fields())
	cancel()
	log := s.runLog(e, tick)
	switch {
	case err != nil:
		if s.stopCtx.Err() == nil {
			log.Warn("skipped tick not recorded in the history", "outcome", string(outcome), "reason", reason, "error", err)
		}
	case !first:
		// Another replica recorded it (or this one, before a lost reply).
	default:
		if outcome == OutcomePaused || outcome == OutcomeExcluded {
			// Expected, by a pause or a calendar/freeze an operator set:
			// at INFO, a minutely job's weekend calendar would say so 2,880
			// times; the history has them, coalesced.
			log.Debug("tick not run: recorded in the history", "outcome", string(outcome), "reason", reason)
		} else {
			log.Info("tick not run: recorded in the history", "outcome", string(outcome), "reason", reason)
		}
		if s.opt.onRun != nil {
			s.opt.onRun(r)
		}
	}
}

// skipLater runs f, a recording of a skipped tick, on a goroutine of its
// own that the stop waits for: the trigger loop does not wait on the
// store. The caller holds a count of s.wg (the loop's).
func (s *Scheduler) skipLater(f func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f()
	}()
}

// recordBusy records tick of e skipped_busy: the job's lock was held by a
// run of an earlier tick (overlap skip). It reads the ledger for the
// holder, names it in the cause (busy:<replica>, so that the ticks skipped
// for one holder coalesce) and in the reason, with what the membership
// says of it.
func (s *Scheduler) recordBusy(e *entry, tick time.Time) {
	ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
	defer cancel()
	st, err := e.runLedger().State(ctx)
	what := ""
	if err == nil && st.Held && st.Running == 0 {
		// Perhaps a manual run holds the lock.
		if m, merr := e.manualLedger().State(ctx); merr == nil && m.Running != 0 {
			st.Owner, st.Since = m.Owner, m.Since
			what = fmt.Sprintf("manual run #%d", m.Running)
		}
	} else if err == nil && st.Running != 0 {
		what = "run of " + time.UnixMilli(st.Running).UTC().Format(time.RFC3339)
	}
	if err != nil || what == "" || st.Owner == "" {
		// The holder is gone by now (its run ended since the claim), or
		// the ledger is unreadable: the cause still coalesces.
		s.recordSkip(e, tick, OutcomeSkippedBusy, "busy", "lock held by a run of an earlier tick")
		return
	}
	holder := holderReplica(st.Owner)
	if !st.Since.IsZero() {
		what += " since " + st.Since.UTC().Format(time.RFC3339)
	}
	reason := "lock held by " + holder + " (" + what + ")"
	if live, goneAt, known := s.members.holderState(holder); known && !live {
		if goneAt.IsZero() {
			reason = "lock held by " + holder + ", not a live member of the fleet (" + what + "); it is free once its lease ends"
		} else {
			reason = "lock held by " + holder + ", whose membership expired at " + goneAt.UTC().Format(time.RFC3339) +
				" (" + what + "); it is free once its lease ends"
		}
	}
	s.recordSkip(e, tick, OutcomeSkippedBusy, "busy:"+holder, reason)
}

// recordPaused records tick of e paused. check: the tick was skipped
// without a claim, on what this replica heard of the pause, which the
// ledger must still say (a resume whose message is on its way: the tick
// runs elsewhere); else a claim found the ledger paused.
func (s *Scheduler) recordPaused(e *entry, tick time.Time, check bool) {
	ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
	st, err := e.ledger.State(ctx)
	cancel()
	if check && (err != nil || !st.Paused) {
		return
	}
	reason := "the job is paused fleet-wide"
	if err == nil && st.Paused {
		reason = pauseReason(st.Pause)
	}
	s.recordSkip(e, tick, OutcomePaused, "paused", reason)
}

// pauseReason is the reason of a paused tick's history entry: who paused
// the job, why, and until when.
func pauseReason(p fleet.PauseInfo) string {
	reason := "the job is paused fleet-wide"
	if p.By != "" {
		reason += " by " + p.By
	}
	if p.Note != "" {
		reason += ": " + p.Note
	}
	if !p.Until.IsZero() {
		reason += " (until " + p.Until.UTC().Format(time.RFC3339) + ")"
	}
	return reason
}

// firstFor reports whether this replica records a tick of e that it skips
// without a claim (a paused job's, or one that comes while this replica
// runs an earlier tick): the first in rank for it, or any replica while the
// membership is unknown or off (the store writes one entry of several).
// The others may skip it without a claim too, so the first in rank records
// it whether or not another's claim finds the lock held and records it as
// well.
func (s *Scheduler) firstFor(e *entry, tick time.Time) bool { return s.rankedFor(e, tick, 0) }

// rankedFor reports whether this replica is among the first n+1 in rank for
// tick of e, or the membership is unknown or off.
func (s *Scheduler) rankedFor(e *entry, tick time.Time, n int) bool {
	if s.opt.fallback <= 0 || s.members == nil || e.job.everyReplica() {
		return true
	}
	ms := tick.UnixMilli()
	rank, ok := s.members.rank(e.job.Name, ms, ms)
	return !ok || rank <= n
}

// waitsFor reports whether this replica records a tick of e that it skips
// without a claim because its claim of an earlier tick waits for another
// replica's run of it: every replica may wait so, and the first in rank
// may be dead and still a member, so the first two in rank record it (the
// store writes one entry), not every replica: a run longer than the
// period would cost the store two commands per replica per tick.
func (s *Scheduler) waitsFor(e *entry, tick time.Time) bool {
	return s.rankedFor(e, tick, 1) && !s.runsHere(e)
}

// runsHere reports whether a run of e's job is under way on this replica
// (not only a claim that waits for another replica's run).
func (s *Scheduler) runsHere(e *entry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for r := range s.active {
		if r.e.job.Name == e.job.Name {
			return true
		}
	}
	return false
}

// holderReplica is the replica of a claim's owner id (clientID:instance:n):
// the lock Client's ID, which the scheduler sets to the replica id.
func holderReplica(owner string) string {
	parts := strings.Split(owner, ":")
	if len(parts) < 3 {
		return owner
	}
	return strings.Join(parts[:len(parts)-2], ":")
}

// memberReplica is the replica id of a member name (replica#random@start,
// memberName).
func memberReplica(member string) string {
	if i := strings.LastIndexByte(member, '#'); i >= 0 {
		return member[:i]
	}
	return member
}

// goneKeep is how long the membership remembers when a replica left it.
const goneKeep = time.Hour

// noteGone records the replicas of the members of the last heartbeat that
// are not in members, the live ones now: found gone at sent, by when their
// membership had expired (or they left). m.mu is held.
func (m *membership) noteGone(members []string, sent time.Time) {
	live := make(map[string]bool, len(members))
	for _, o := range members {
		live[memberReplica(o)] = true
	}
	for r, at := range m.gone {
		if live[r] || sent.Sub(at) > goneKeep {
			delete(m.gone, r)
		}
	}
	for _, o := range m.members {
		if r := memberReplica(o); !live[r] {
			if m.gone == nil {
				m.gone = make(map[string]time.Time)
			}
			if _, ok := m.gone[r]; !ok {
				m.gone[r] = sent
			}
		}
	}
}

// holderState tells what the membership says of replica: live, or not,
// and when this replica found it gone (zero if it never saw it); known is
// false when the membership is off, unknown or stale. m may be nil.
func (m *membership) holderState(replica string) (live bool, goneAt time.Time, known bool) {
	if m == nil {
		return false, time.Time{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.at.IsZero() || time.Since(m.at) >= m.ttl {
		return false, time.Time{}, false
	}
	for _, o := range m.members {
		if memberReplica(o) == replica {
			return true, time.Time{}, true
		}
	}
	return false, m.gone[replica], true
}
