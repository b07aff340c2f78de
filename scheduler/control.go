package scheduler

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/lockcron/lockcron/fleet"
)

// controlTopic is the lock.Client event topic of fleet-wide requests.
const controlTopic = "control"

// manualSuffix ends the id of a job's ledger of manual runs (Trigger): a
// job's name must not end with it.
const manualSuffix = "!manual"

// Trigger asks the fleet to run the job once now, besides its schedule: it
// counts the request in the job's ledger and publishes it, and the
// replica that runs the job (Run) and is first in rank for the manual run
// claims it under the job's lock and runs it; the others hear it claimed
// and done, and claim it only if its claimant dies or does not claim it
// within their fallback delay (see the package doc, "Who claims"). A manual run waits for a run
// of the job under way, and it runs while the job is paused, as
// Kubernetes runs a Job created from a suspended CronJob. Replicas that are
// not connected when the request is published do not see it; if none is,
// nothing runs: Trigger returns how many lock Clients heard the request
// (fleet.Store.Publish), 0 then. Trigger needs no Run: a Scheduler made
// only to send requests (the scheduler command) works too. It returns
// ErrUnknownJob for a job the Scheduler does not have, and the ledger's or
// Publish's error.
func (s *Scheduler) Trigger(ctx context.Context, job string) (int64, error) {
	return s.TriggerParams(ctx, job, nil)
}

// trigger stores a manual request of e's job with its params and tells
// the fleet (Trigger).
func (s *Scheduler) trigger(ctx context.Context, e *entry, params map[string]string) (int64, error) {
	job := e.job.Name
	if len(e.job.Params) > 0 && params == nil {
		params = map[string]string{} // ordered all the same (fleet.Ledger.Trigger)
	}
	n, err := e.ledger.Trigger(ctx, e.manual, params)
	if err != nil {
		return 0, fmt.Errorf("scheduler: trigger %q: %w", job, err)
	}
	msg := strings.Join([]string{"trigger", job, strconv.FormatInt(n, 10), strconv.FormatInt(time.Now().UnixMilli(), 10)}, "\n")
	heard, err := s.store.Publish(ctx, controlTopic, msg)
	if err != nil {
		return 0, fmt.Errorf("scheduler: trigger %q: %w", job, err)
	}
	if len(params) > 0 {
		s.log.Info("job triggered", "job", job, "trigger", n, "heard_by", heard, "params", paramNames(params))
		return heard, nil
	}
	s.log.Info("job triggered", "job", job, "trigger", n, "heard_by", heard)
	return heard, nil
}

// Pause pauses the job on every replica (paused true) or resumes it, by a
// mark in the job's ledger that keeps p: who paused (By), why (Note) and
// until when (Until; zero: until a resume), and when, on the store's
// clock. While it is paused, each replica counts the job's ticks as
// paused and runs none of them; a run under way goes on. Ticks due while
// paused are not missed: resuming does not run them. A pause with an
// Until lifts itself then, on every replica, with no resume: the store's
// clock decides (a claim goes through from then on), and each replica
// stops taking the job for paused at Until on its own clock. A resume
// also sets the job's failed runs in a row (Job.PauseAfterFailures) back
// to 0. The fleet hears of it in a message, and replicas record a paused
// job's ticks without claiming them; a replica that missed the message
// learns it from its next claim, and every 10 seconds a paused job's tick
// is claimed again, so that a lost resume message delays the resume by
// that much at most. It needs no Run. It returns ErrUnknownJob for a job
// the Scheduler does not have, and the ledger's error: one wrapping
// lock.ErrInvalid, with nothing changed, for a note longer than
// fleet.MaxPauseNote or an Until not after the store's clock.
func (s *Scheduler) Pause(ctx context.Context, job string, paused bool, p fleet.PauseInfo) error {
	e, err := s.entry(job)
	if err != nil {
		return err
	}
	if err := e.ledger.Pause(ctx, paused, p); err != nil {
		return fmt.Errorf("scheduler: pause %q: %w", job, err)
	}
	word, msg := "resume", "resume\n"+job
	var until time.Time
	if paused {
		word, msg, until = "pause", "pause\n"+job, p.Until
		if !until.IsZero() {
			msg += "\n" + strconv.FormatInt(until.UnixMilli(), 10)
		}
	}
	e.setPaused(paused, until) // this replica knows at once; the others hear it
	// Tell the fleet, so that each replica stops claiming the job's ticks
	// (or starts again) and says so in its log; the mark in the ledger is
	// what counts, so a lost message costs claims, or a resume up to
	// pauseRecheck late, and the line.
	heard, err := s.store.Publish(ctx, controlTopic, msg)
	if err != nil {
		s.log.Warn("job "+word+"d; the fleet was not told (its logs will not say so)", "job", job, "error", err)
		return nil
	}
	s.log.Info("job "+word+"d", "job", job, "heard_by", heard)
	return nil
}

// pauseRecheck is how long a replica takes a job for paused, after it
// heard the pause or a claim found it, without claiming its ticks: then a
// tick is claimed again, which learns a resume whose message was lost.
const pauseRecheck = 10 * time.Second

// setPaused records what this replica learnt of the job's pause, and
// until when it lasts (zero: until a resume): from a pause or resume
// message of the fleet, or from a claim's answer.
func (e *entry) setPaused(paused bool, until time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pausedAt, e.pausedUntil = time.Time{}, time.Time{}
	if paused {
		e.pausedAt, e.pausedUntil = time.Now(), until
	}
}

// paused reports whether the job is taken for paused: its ticks are
// recorded paused without a claim, until pauseRecheck has passed since
// the replica learnt it, or the pause's end on this replica's clock
// (then a claim asks the store, whose clock decides). e.mu is held.
func (e *entry) paused() bool {
	now := time.Now()
	return !e.pausedAt.IsZero() && now.Sub(e.pausedAt) < pauseRecheck && (e.pausedUntil.IsZero() || now.Before(e.pausedUntil))
}

// Running reports whether Run has started, no stop has begun, and the
// store has confirmed the replica's subscriptions (the fleet's requests,
// and the announcements of the jobs' claims and finishes): what a
// readiness probe asks. A Trigger sent once every replica is running
// reaches every one of them.
func (s *Scheduler) Running() bool {
	s.mu.Lock()
	running := s.started && !s.closing
	s.mu.Unlock()
	return running && s.store.Subscribed()
}

func (s *Scheduler) entry(job string) (*entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[job]
	if e == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownJob, job)
	}
	return e, nil
}

// listen subscribes to the fleet's requests while Run runs; the stop it
// returns ends the subscription.
func (s *Scheduler) listen() func() {
	stop, err := s.store.Subscribe(controlTopic, s.control)
	if err != nil {
		s.log.Warn("fleet requests not heard: trigger will not reach this replica", "error", err)
		return func() {}
	}
	return stop
}

// control handles one fleet request, on the lock Client's dispatcher: it
// must not block.
func (s *Scheduler) control(payload string) {
	parts := strings.Split(payload, "\n")
	if payload == "freezes" {
		s.rereadFreezes()
		return
	}
	if payload == "backfills" {
		s.rereadBackfills()
		return
	}
	// "pause\n<job>[\n<until, ms>]" or "resume\n<job>".
	if (len(parts) == 2 || len(parts) == 3 && parts[0] == "pause") && (parts[0] == "pause" || parts[0] == "resume") {
		var until time.Time
		if len(parts) == 3 {
			ms, err := strconv.ParseInt(parts[2], 10, 64)
			if err != nil || ms <= 0 {
				s.log.Warn("malformed pause ignored", "request", payload)
				return
			}
			until = time.UnixMilli(ms)
		}
		s.mu.Lock()
		e := s.entries[parts[1]]
		s.mu.Unlock()
		if e != nil {
			e.setPaused(parts[0] == "pause", until)
			if until.IsZero() {
				s.log.Info("heard: job "+parts[0]+"d fleet-wide", "job", parts[1])
			} else {
				s.log.Info("heard: job paused fleet-wide", "job", parts[1], "until", until.UTC().Format(time.RFC3339))
			}
		}
		return
	}
	if len(parts) != 4 || parts[0] != "trigger" {
		s.log.Warn("unknown fleet request ignored", "request", payload)
		return
	}
	n, err1 := strconv.ParseInt(parts[2], 10, 64)
	ms, err2 := strconv.ParseInt(parts[3], 10, 64)
	if err1 != nil || err2 != nil || n < 1 {
		s.log.Warn("malformed trigger ignored", "request", payload)
		return
	}
	s.mu.Lock()
	e := s.entries[parts[1]]
	s.mu.Unlock()
	if e == nil {
		return // a job of another program
	}
	s.log.Info("heard: manual run requested", "job", parts[1], "trigger", n)
	s.fireManual(e, n, time.UnixMilli(ms))
}

// fireManual handles manual run n. One goroutine per job and replica
// claims manual runs, one after the other: a trigger that comes while it
// claims or runs one is claimed next (several such are merged into the
// latest, as they would all run at about the same time).
func (s *Scheduler) fireManual(e *entry, n int64, at time.Time) {
	e.mu.Lock()
	if n > e.pending {
		e.pending, e.pendingAt = n, at
	}
	e.request(n, at)
	busy := e.manuals > 0
	if !busy {
		e.manuals++
	}
	e.mu.Unlock()
	if busy {
		return // the goroutine under way claims it next
	}
	s.mu.Lock()
	if s.closing || !s.started {
		s.mu.Unlock()
		e.mu.Lock()
		e.manuals--
		e.mu.Unlock()
		return
	}
	s.wg.Add(1) // under s.mu, before beginStop's Wait can start
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		var done int64
		for {
			e.mu.Lock()
			n, at := e.pending, e.pendingAt
			if len(e.job.Params) > 0 {
				n, at = e.nextRequested(done) // each with its own parameters: none merged
			}
			if n <= done || e.cancelled() {
				e.manuals--
				e.mu.Unlock()
				e.retireIfIdle()
				return
			}
			e.mu.Unlock()
			if s.claimsManual(e, n) {
				s.handleClaim(e, at, claimSpec{ledger: e.manualLedger(), tick: n, queue: true, manual: true})
			}
			done = n
		}
	}()
}

// manualHeard is what a replica heard of a job's manual runs from the
// fleet's announcements (fleet.Ledger.Watch of its ledger of manual runs).
// e.mu guards it.
type manualHeard struct {
	done      int64         // the latest run heard done
	claimed   int64         // the latest run heard claimed
	claimedAt time.Time     // when
	lease     time.Duration // that claim's lease time
	backs     uint64        // give-backs heard
	ch        chan struct{} // closed at the next announcement
}

// heardManual is the Watch of e's ledger of manual runs.
func (e *entry) heardManual(ev fleet.TickEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	h := &e.manualHeard
	switch {
	case ev.Claimed:
		h.claimed, h.claimedAt, h.lease = max(h.claimed, ev.Tick), time.Now(), ev.Lease
	case ev.Done:
		h.done = max(h.done, ev.Tick)
	case !ev.Busy:
		h.backs++
	}
	if h.ch != nil {
		close(h.ch)
		h.ch = nil
	}
}

// claimsManual reports whether this replica claims manual run n: at once
// when it is first in rank for it (ranked as the job's ticks are, on the
// run's number), else when the fallback delay of its rank ends and the run
// was not heard done, or at once when it is heard given back. While
// another replica's claim of the run was heard less than its lease ago,
// and not its finish, the wait goes on until the lease has passed: the run
// is under way, and the claims of the others would only queue behind it.
// So one replica claims a manual run, unless its claimant dies or the run
// outlasts the lease. It returns false when the Scheduler stops
// meanwhile.
func (s *Scheduler) claimsManual(e *entry, n int64) bool {
	if s.opt.fallback <= 0 || s.members == nil || e.job.everyReplica() {
		return true
	}
	rank, ok := s.members.rank(e.job.Name+manualSuffix, manualRankKey(e, n), 0)
	if !ok || rank == 0 {
		return true
	}
	delay := time.Duration(rank) * s.opt.fallback
	e.mu.Lock()
	backs := e.manualHeard.backs
	e.mu.Unlock()
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		e.mu.Lock()
		h := &e.manualHeard
		done, back := h.done >= n, h.backs != backs
		if h.ch == nil {
			h.ch = make(chan struct{})
		}
		ch := h.ch
		e.mu.Unlock()
		switch {
		case done:
			s.tel.claimed(e.job.Name, claimSpared)
			return false
		case back:
			s.tel.claimed(e.job.Name, claimGivenBack)
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			e.mu.Lock()
			h := e.manualHeard
			e.mu.Unlock()
			if until := h.claimedAt.Add(h.lease); h.claimed >= n && time.Now().Before(until) {
				t.Reset(time.Until(until))
				continue
			}
			s.tel.claimed(e.job.Name, claimFallback)
			return true
		case <-s.stopping:
			return false
		}
	}
}

// A JobView is what the fleet and this replica know of one job: its
// schedule, its ledger, and its local status.
type JobView struct {
	Status
	// NextTicks are the job's next three ticks from now that will run:
	// those its calendars (Job.Exclude) and the fleet's freezes exclude
	// are left out, and listed in Skipped.
	NextTicks []time.Time
	// Skipped are the ticks before the last of NextTicks that will not
	// run, each with why: the first three, where a freeze, or a calendar
	// that says its End, counts once, by the first tick it holds.
	Skipped []Skip
	// NoneBefore is, when NextTicks has fewer than three ticks because no
	// more will run within NextHorizon of now or of the last of them
	// (calendars and freezes applied), the end of that span; it is zero
	// when NextTicks is short because the schedule has no further tick.
	NoneBefore time.Time
	// Ledger is the job's ledger: the latest tick done, the last outcome,
	// the claim under way, whether it is paused and whether its lock is
	// held.
	Ledger fleet.LedgerState
	// LedgerErr is why the ledger could not be read, if it could not.
	LedgerErr error
	// RunningLong is when the job's run under way went past the job's
	// AlertAfter, if it has; else zero. A run on this replica says so
	// itself, when it is announced (WithOnRunningLong); a run on another
	// replica is known from the ledger: its claim's time, on the store's
	// clock, plus AlertAfter, once this replica's clock is past that.
	RunningLong time.Time
	// PerReplica is, for a job that runs on every replica (Job.Replicas
	// ReplicasAll), the last entry of each replica in the job's latest
	// history entries (DefaultHistoryKeep), by replica id: its last
	// outcome there. Nil for other jobs, and when the history could not
	// be read.
	PerReplica []Run
	// Replicas is the job's Job.Replicas: which replicas run each tick.
	Replicas Replicas
	// Parents are the jobs this one follows (Job.After), with When;
	// Children the jobs of this Scheduler that follow it.
	Parents  []string
	When     When
	Children []string
}

// Jobs returns a view of every job, in the order they were added, reading
// the fleet's freezes and each job's ledger (one round trip each). ctx bounds the reads. It
// needs no Run.
func (s *Scheduler) Jobs(ctx context.Context) []JobView {
	return s.views(ctx, s.ordered())
}

// Job returns the view of the job name, as Jobs, reading only its ledger
// and the freezes; ok is false if there is no such job.
func (s *Scheduler) Job(ctx context.Context, name string) (v JobView, ok bool) {
	s.mu.Lock()
	e := s.entries[name]
	s.mu.Unlock()
	if e == nil {
		return JobView{}, false
	}
	return s.views(ctx, []*entry{e})[0], true
}

// views returns the views of the jobs of entries, in their order.
func (s *Scheduler) views(ctx context.Context, entries []*entry) []JobView {
	status := s.Status()
	out := make([]JobView, len(entries))
	now := s.opt.clock.Now()
	runs := s.localRuns()
	fs, err := s.Freezes(ctx) // this Scheduler may not run, and read none
	if err != nil {
		fs = s.knownFreezes()
	}
	for i, e := range entries {
		v := JobView{}
		for _, st := range status {
			if st.Job == e.job.Name {
				v.Status = st
			}
		}
		v.NextTicks, v.Skipped, v.NoneBefore = upcoming(e, now, 3, fs)
		v.Ledger, v.LedgerErr = e.ledger.State(ctx)
		since := v.Ledger.Since // of the run holding the lock
		if v.LedgerErr == nil && v.Ledger.Held && v.Ledger.Running == 0 {
			// Perhaps a manual run holds the lock: name its owner.
			since = time.Time{}
			if m, err := e.manual.State(ctx); err == nil && m.Running != 0 {
				v.Ledger.Owner, since = m.Owner, m.Since
			}
		}
		if d := e.job.AlertAfter; d > 0 {
			if r, ok := runs[e.job.Name]; ok {
				v.RunningLong = r.long
			} else if v.LedgerErr == nil && v.Ledger.Held && !since.IsZero() && !time.Now().Before(since.Add(d)) {
				v.RunningLong = since.Add(d)
			}
		}
		v.Replicas = e.job.Replicas
		if e.job.everyReplica() {
			if runs, err := s.History(ctx, e.job.Name, DefaultHistoryKeep, ""); err == nil {
				v.PerReplica = lastPerReplica(runs)
			}
		}
		v.Parents, v.When, v.Children = e.job.After, e.job.When, s.children(e.job.Name)
		out[i] = v
	}
	return out
}
