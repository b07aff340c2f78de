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
// counts the request in the job's ledger and publishes it, and every
// replica that runs the job (Run) claims the manual run under the job's
// lock; one runs it, the others find it done. A manual run waits for a run
// of the job under way, and it runs while the job is paused, as
// Kubernetes runs a Job created from a suspended CronJob. Replicas that are
// not connected when the request is published do not see it; if none is,
// nothing runs: Trigger returns how many lock Clients heard the request
// (fleet.Store.Publish), 0 then. Trigger needs no Run: a Scheduler made
// only to send requests (the scheduler command) works too. It returns
// ErrUnknownJob for a job the Scheduler does not have, and the ledger's or
// Publish's error.
func (s *Scheduler) Trigger(ctx context.Context, job string) (int64, error) {
	e, err := s.entry(job)
	if err != nil {
		return 0, err
	}
	n, err := e.ledger.Trigger(ctx)
	if err != nil {
		return 0, fmt.Errorf("scheduler: trigger %q: %w", job, err)
	}
	msg := strings.Join([]string{"trigger", job, strconv.FormatInt(n, 10), strconv.FormatInt(time.Now().UnixMilli(), 10)}, "\n")
	heard, err := s.store.Publish(ctx, controlTopic, msg)
	if err != nil {
		return 0, fmt.Errorf("scheduler: trigger %q: %w", job, err)
	}
	s.log.Info("job triggered", "job", job, "trigger", n, "heard_by", heard)
	return heard, nil
}

// Pause pauses the job on every replica (paused true) or resumes it, by a
// mark in the job's ledger: while it is paused, each replica counts the
// job's ticks as paused and runs none of them; a run under way goes on.
// Ticks due while paused are not missed: resuming does not run them. It
// needs no Run. It returns ErrUnknownJob for a job the Scheduler does not
// have, and the ledger's error.
func (s *Scheduler) Pause(ctx context.Context, job string, paused bool) error {
	e, err := s.entry(job)
	if err != nil {
		return err
	}
	if err := e.ledger.Pause(ctx, paused); err != nil {
		return fmt.Errorf("scheduler: pause %q: %w", job, err)
	}
	word := "resume"
	if paused {
		word = "pause"
	}
	// Tell the fleet, so that each replica says so in its log; the mark
	// in the ledger is what counts, so a lost message loses only the line.
	heard, err := s.store.Publish(ctx, controlTopic, word+"\n"+job)
	if err != nil {
		s.log.Warn("job "+word+"d; the fleet was not told (its logs will not say so)", "job", job, "error", err)
		return nil
	}
	s.log.Info("job "+word+"d", "job", job, "heard_by", heard)
	return nil
}

// Running reports whether Run has started and no stop has begun: what a
// readiness probe asks.
func (s *Scheduler) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started && !s.closing
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
	if len(parts) == 2 && (parts[0] == "pause" || parts[0] == "resume") {
		s.mu.Lock()
		e := s.entries[parts[1]]
		s.mu.Unlock()
		if e != nil {
			s.log.Info("heard: job "+parts[0]+"d fleet-wide", "job", parts[1])
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
			if n <= done || e.cancelled() {
				e.manuals--
				e.mu.Unlock()
				e.retireIfIdle()
				return
			}
			e.mu.Unlock()
			s.handleClaim(e, at, claimSpec{ledger: e.manual, tick: n, queue: true, manual: true})
			done = n
		}
	}()
}

// A JobView is what the fleet and this replica know of one job: its
// schedule, its ledger, and its local status.
type JobView struct {
	Status
	// NextTicks are the job's next three ticks from now.
	NextTicks []time.Time
	// Ledger is the job's ledger: the latest tick done, the last outcome,
	// the claim under way, whether it is paused and whether its lock is
	// held.
	Ledger fleet.LedgerState
	// LedgerErr is why the ledger could not be read, if it could not.
	LedgerErr error
}

// Jobs returns a view of every job, in the order they were added, reading
// each job's ledger (one round trip per job). ctx bounds the reads. It
// needs no Run.
func (s *Scheduler) Jobs(ctx context.Context) []JobView {
	order := s.ordered()
	status := s.Status()
	out := make([]JobView, len(order))
	now := s.opt.clock.Now()
	for i, e := range order {
		v := JobView{Status: status[i]}
		for t := now; len(v.NextTicks) < 3; {
			t = e.sched.Next(t)
			if t.IsZero() {
				break
			}
			v.NextTicks = append(v.NextTicks, t)
		}
		v.Ledger, v.LedgerErr = e.ledger.State(ctx)
		if v.LedgerErr == nil && v.Ledger.Held && v.Ledger.Running == 0 {
			// Perhaps a manual run holds the lock: name its owner.
			if m, err := e.manual.State(ctx); err == nil && m.Running != 0 {
				v.Ledger.Owner = m.Owner
			}
		}
		out[i] = v
	}
	return out
}
