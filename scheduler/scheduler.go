package scheduler

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/lock"
)

// maxCatchUp bounds how many missed ticks are counted one by one.
const maxCatchUp = 1_000_000

// A Scheduler runs jobs at their ticks, each tick once across every
// replica that shares its lock backend. Create it with New, Add jobs, then
// Run it; stop it with Shutdown (graceful) or Close (at once), or by ending
// Run's ctx. A Scheduler is safe for concurrent use, and cannot be started
// again once stopped.
type Scheduler struct {
	locks   *lock.Client
	store   *fleet.Store // the ledgers, members and control messages, on locks
	opt     options
	log     hclog.Logger
	tel     *telemetry
	members *membership // nil when WithClaimFallback turned the ranking off

	// stopCtx is the parent of every claim and run: beginStop cancels it
	// with cause ErrClosed.
	stopCtx  context.Context
	stop     context.CancelCauseFunc
	stopping chan struct{} // closed by beginStop: trigger loops return
	drained  chan struct{} // closed when every loop and run has returned, after beginStop
	stopped  chan struct{} // closed when the stop is complete: Run returns
	closed   chan struct{} // closed by Close: a Shutdown waiting for its runs returns

	changeMu sync.Mutex // serialises Update and Remove

	// The fleet's freezes as last read (readFreezes); freezeNow asks for a
	// read at once; freezesRead is closed by the first read that succeeds:
	// no tick is decided on before (awaitFreezes).
	freezeMu    sync.Mutex
	freezes     []Freeze
	freezeNow   chan struct{}
	freezesRead chan struct{}

	// The waits of every job (claimsNow), so that a stop settles them;
	// waitsClosed once it has.
	waitMu      sync.Mutex
	waiting     map[*wait]struct{}
	waitsClosed bool

	mu      sync.Mutex
	entries map[string]*entry
	order   []*entry
	started bool
	closing bool
	active  map[*run]struct{}

	wg          sync.WaitGroup // trigger loops and tick goroutines
	stopOnce    sync.Once
	closeOnce   sync.Once
	stoppedOnce sync.Once

	// Backfills (readBackfills): backfillNow asks for a read at once;
	// carried are the backfills this replica carries on, by id (s.mu).
	backfillNow chan struct{}
	carried     map[string]bool
}

// entry is one added job, one definition of it: Update replaces the entry,
// whose runs under way keep it.
type entry struct {
	job    Job
	sched  schedule
	ledger *fleet.Ledger
	manual *fleet.Ledger // manual runs (Trigger), numbered by the ledger's trigger count
	runner jobs.Runner   // job.Run with Recover and Timeout
	digest string        // of the definition (Job.digest), recorded by each claim

	loc *time.Location // the zone the job's ticks are read in (jobLocation): its calendars get them in it

	// ctx is the parent of the entry's claims and runs: a child of the
	// Scheduler's stopCtx that Remove's CancelRuns cancels (ErrRemoved).
	ctx    context.Context
	cancel context.CancelCauseFunc
	// The trigger loop: started (under s.mu) once, quit closed by Update
	// or Remove to end it, done closed when it has returned. It fires the
	// ticks after from, the Scheduler's clock when it was started: never
	// after this replica's start in its membership group (memberName).
	started bool
	from    time.Time
	quit    chan struct{}
	done    chan struct{}
	// prev is the definition whose loop this entry's took over from
	// (Update), whose first tick not fired was resume. prev (and its prev,
	// if it was replaced before it started) is dropped once its undecided
	// ticks are decided; the loop reads it, and Update sets it before.
	prev   *entry
	resume time.Time

	mu          sync.Mutex
	inflight    int       // ticks of this replica being claimed or run
	manuals     int       // manual runs of this replica being claimed or run (0 or 1)
	pending     int64     // the latest manual run requested (Trigger)
	pendingAt   time.Time // when it was requested
	next        time.Time
	lastTick    time.Time
	lastOutcome Outcome
	heard       heard                   // announcements of the fleet's claims and finishes (heardTick)
	manualHeard manualHeard             // the same of the manual runs (heardManual)
	pausedAt    time.Time               // when this replica last learnt the job is paused, zero if it is not (setPaused)
	pausedUntil time.Time               // when that pause ends by itself; zero if it does not (setPaused)
	waits       map[int64]*wait         // ticks (ms) fired here that wait for their fallback (claimsNow)
	held        int                     // of them, those held off by a claim heard elsewhere: not in hand here
	undecided   map[int64]chan struct{} // ticks (ms) fired here and not yet decided on (awaitEarlier)
	otherDigest string                  // another definition's digest, found by a claim of this replica (checkDefinition)
	otherAt     time.Time               // when a claim last found it

	// The ledgers of this replica's own runs of a job that runs on every
	// replica (Job.Replicas ReplicasAll; ownLedgers), nil otherwise.
	mine, mineManual *fleet.Ledger
	// requested are, for a job with Params, the manual runs heard and not
	// yet claimed here, with when each was requested (fireManual).
	requested map[int64]time.Time
	chain     chan struct{} // a job that follows others (Job.After): pokes its chain loop to read its parents' runs
	// triggers is, for a job that runs on every replica, the count of its
	// manual requests (fleet.LedgerState.Triggers) up to which this
	// replica has handled them or they came before it started; triggersKnown
	// says it was read (missedTriggers).
	triggers      int64
	triggersKnown bool
	chainIdle     chan struct{} // closed when its chain loop's readings and claims are over (chainLoop); e.mu guards the field
}

// run is a claimed tick, from its claim to its Finish.
type run struct {
	e      *entry
	cl     *fleet.Claim
	tick   time.Time
	manual bool // a manual run (Trigger), in e.manual
	start  time.Time
	trace  string // the run's trace id, if sampled
	// startBy is when, on this replica's monotonic clock, the job's start
	// deadline passes for the tick (from the claim's time on the store's
	// clock): a try that could start only later is not made. Zero: no
	// deadline.
	startBy time.Time
	// params are a manual run's parameters (TriggerParams), read with its
	// claim; nil for none.
	params map[string]string
	// followed, for a run that follows a parent's manual run, are the
	// params of the request it follows, all of them (params: those its job
	// declares): its history entry keeps them, and so its chain record
	// passes them on to the runs that follow it (followParams).
	followed map[string]string

	mu      sync.Mutex
	long    time.Time // when the run went past its job's AlertAfter, once it is announced; zero before
	tries   int       // tries of the tick so far, counting earlier claims
	reason  string    // why a tick ending deadline_missed was not run (Run.Reason)
	state   runState  // moved by to
	outcome Outcome   // the outcome finish recorded, once state is finished

	// poke wakes the watch of a run of a replace job (watchReplace); nil
	// for other runs. replacedBy is the tick whose request ended the run,
	// zero if none did (under mu).
	poke       chan struct{}
	replacedBy time.Time
	// backfill is the id of the backfill whose run this is, in its own
	// ledger (Backfill); "" for the others.
	backfill string
	parent   string // the job whose run started this one (Job.After), else ""
}

// New returns a Scheduler whose runs take their locks from locks (Redis, or
// lock.NewMemory for one process). The Scheduler does not close locks;
// close it after the Scheduler has stopped. New returns ErrInvalid for bad
// options.
func New(locks *lock.Client, opts ...Option) (*Scheduler, error) {
	if locks == nil {
		return nil, fmt.Errorf("scheduler: New: nil lock client: %w", ErrInvalid)
	}
	o, err := buildOptions(opts)
	if err != nil {
		return nil, err
	}
	if o.replica == "" {
		o.replica = locks.ID()
	}
	s := &Scheduler{
		locks:    locks,
		store:    fleet.New(locks),
		opt:      o,
		log:      o.logger.Named("scheduler"),
		stopping: make(chan struct{}),
		drained:  make(chan struct{}),
		stopped:  make(chan struct{}),
		closed:   make(chan struct{}),
		entries:  make(map[string]*entry),
		active:   make(map[*run]struct{}),

		freezeNow:   make(chan struct{}, 1),
		freezesRead: make(chan struct{}),

		backfillNow: make(chan struct{}, 1),
		carried:     make(map[string]bool),
	}
	s.tel = newTelemetry(o, s.log)
	if o.fallback > 0 {
		s.members = newMembership(s.store, o.replica, o.memberTTL)
	}
	s.stopCtx, s.stop = context.WithCancelCause(context.Background())
	return s, nil
}

// Add validates j, fills in its defaults and adds it. A job added while the
// Scheduler runs starts at once: its misfire policy, then its next tick. Add returns ErrInvalid, naming the
// job and the field at fault, for a bad job or a name already taken, and
// ErrClosed once the Scheduler is stopping.
func (s *Scheduler) Add(j Job) error {
	e, err := s.newEntry(j)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closing:
		return fmt.Errorf("scheduler: add job %q: %w", j.Name, ErrClosed)
	case s.entries[j.Name] != nil:
		return fmt.Errorf("scheduler: job %q: name: already taken: %w", j.Name, ErrInvalid)
	}
	if err := s.kindConflict(e.job, nil); err != nil {
		return err
	}
	if err := s.checkChainAdd(e.job, nil); err != nil {
		return err
	}
	s.entries[j.Name] = e
	s.order = append(s.order, e)
	s.tel.perReplica(j.Name, e.job.everyReplica())
	s.tel.zero(j.Name)
	if s.started {
		s.startLoop(e)
		if s.members != nil {
			s.members.changed() // its group is the jobs'
		}
	}
	return nil
}

// newEntry validates j, fills in its defaults, and makes its entry.
func (s *Scheduler) newEntry(j Job) (*entry, error) {
	sched, err := j.validate(s.opt.location)
	if err != nil {
		return nil, err
	}
	ledger := s.ledgerOf(j)
	keep, age := s.historyOf(j)
	digest := j.digest()
	g, err := ledger(j.LockName, j.Name, append([]fleet.LedgerOption{fleet.WithHistory(keep, age), fleet.WithDefinition(digest)}, j.replaceOption()...)...)
	if err != nil {
		return nil, fmt.Errorf("scheduler: job %q: %w: %w", j.Name, ErrInvalid, err)
	}
	manual, err := ledger(j.LockName, j.Name+manualSuffix, fleet.WithHistory(keep, age), fleet.WithSharedHistory(j.Name), fleet.WithDefinition(digest))
	if err != nil {
		return nil, fmt.Errorf("scheduler: job %q: %w: %w", j.Name, ErrInvalid, err)
	}
	e := &entry{job: j, sched: sched, ledger: g, manual: manual, digest: digest, loc: jobLocation(&j),
		runner: jobs.Chain(j.Run, jobs.Recover(), jobs.Timeout(j.Timeout)),
		quit:   make(chan struct{}), done: make(chan struct{}), chain: make(chan struct{}, 1)}
	if j.everyReplica() {
		if err := s.ownLedgers(e, ledger, fleet.WithHistory(keep, age), fleet.WithDefinition(digest)); err != nil {
			return nil, err
		}
	}
	e.ctx, e.cancel = context.WithCancelCause(s.stopCtx)
	return e, nil
}

// kindConflict is ErrInvalid if j shares its lock with another job (but
// skip) that takes it as another kind. s.mu is held.
func (s *Scheduler) kindConflict(j Job, skip *entry) error {
	for _, o := range s.order {
		if o != skip && o.job.LockName == j.LockName && o.job.LockKind != j.LockKind {
			return fmt.Errorf("scheduler: job %q: lock_kind: %q, but job %q takes lock %q as %q: jobs that share a lock must use one kind: %w",
				j.Name, j.LockKind, o.job.Name, j.LockName, o.job.LockKind, ErrInvalid)
		}
	}
	return nil
}

// startLoop starts e's trigger loop, once. s.mu is held and s.closing is
// false.
func (s *Scheduler) startLoop(e *entry) {
	if e.started {
		return
	}
	e.started = true
	e.from = s.opt.clock.Now()
	s.wg.Add(1)
	go s.loop(e)
}

// Run starts every job's trigger and blocks until the Scheduler has
// stopped. When ctx ends, Run makes a graceful stop (Shutdown) bounded by
// WithShutdownTimeout. Run returns ErrClosed after a stop, whoever asked for
// it (ctx, Shutdown or Close), and ErrRunning if it runs already.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	switch {
	case s.closing:
		s.mu.Unlock()
		return ErrClosed
	case s.started:
		s.mu.Unlock()
		return ErrRunning
	}
	s.started = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.readFreezes()
	}()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.readBackfills()
	}()
	for _, e := range s.order {
		s.startLoop(e)
	}
	if s.members != nil {
		// After the loops start: the membership names this replica by their
		// latest start (memberName).
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.members.run(s, s.stopping)
		}()
	}
	n := len(s.order)
	s.mu.Unlock()
	stopControl := s.listen()
	defer stopControl()
	if reg, err := s.tel.observe(s); err != nil {
		s.log.Warn("job gauges unavailable", "error", err)
	} else {
		defer func() { _ = reg.Unregister() }()
	}
	s.log.Info("scheduler started", "replica", s.opt.replica, "jobs", n)

	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), s.opt.shutdownTimeout)
		err := s.Shutdown(sctx)
		cancel()
		if err != nil {
			s.log.Warn("graceful stop cut short", "error", err, "timeout", s.opt.shutdownTimeout)
		}
		<-s.stopped // a Close that cut Shutdown short may still be finishing runs
	case <-s.stopping:
		select {
		case <-s.stopped:
		case <-ctx.Done():
			_ = s.Close()
		}
	}
	return ErrClosed
}

// Shutdown stops the Scheduler gracefully: it stops taking ticks, cancels
// the ctx of every run (cause ErrClosed) and of every wait for a lock, and
// waits for the runs to return; each finishes under its job's OnShutdown
// policy (handoff: the tick is given back, and a replica that waits for it
// runs it at once) and releases its lock. Then Run returns.
//
// ctx bounds the wait. When it ends first, Shutdown finishes the runs still
// going at once, releasing their locks, and returns ctx's error: a job func
// that ignores its ctx then runs on without the lock (and its goroutine with
// it), and another replica may take the tick over. Calling it again, or
// after Close, waits for the same stop; a Close while it waits makes it
// return ErrClosed at once.
func (s *Scheduler) Shutdown(ctx context.Context) error {
	s.beginStop()
	select {
	case <-s.drained:
	case <-ctx.Done():
		s.forceFinish()
		s.markStopped()
		return ctx.Err()
	case <-s.closed:
		return ErrClosed // Close cut the wait short
	}
	s.markStopped()
	return nil
}

// Close stops the Scheduler at once: it stops taking ticks, cancels every
// run and wait, and finishes every run still going under its OnShutdown
// policy, releasing its lock, without waiting for the job funcs to return
// (as Shutdown past its deadline). It returns nil; a second Close does
// nothing.
func (s *Scheduler) Close() error {
	s.beginStop()
	s.closeOnce.Do(func() { close(s.closed) })
	s.forceFinish()
	s.markStopped()
	return nil
}

func (s *Scheduler) beginStop() {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.log.Info("scheduler stopping")
		close(s.stopping)
		s.endWaits()
		s.stop(ErrClosed)
		go func() {
			s.wg.Wait()
			close(s.drained)
		}()
	})
}

func (s *Scheduler) markStopped() {
	s.stoppedOnce.Do(func() {
		close(s.stopped)
		s.log.Info("scheduler stopped")
	})
}

// forceFinish finishes every run still going under its job's policy.
func (s *Scheduler) forceFinish() {
	s.mu.Lock()
	runs := make([]*run, 0, len(s.active))
	for r := range s.active {
		runs = append(runs, r)
	}
	s.mu.Unlock()
	for _, r := range runs {
		if !r.to(cut, "") {
			continue // its job succeeded (its finalizer records it as ran), or it finished
		}
		s.finish(r, r.e.job.stopOutcome(), nil, s.runLog(r.e, r.tick))
	}
}

// Status is what a Scheduler knows of one job on this replica.
type Status struct {
	Job         string
	Schedule    string
	Zone        string // the time zone the schedule is read in: its CRON_TZ=, else the job's Location
	Lock        string
	Next        time.Time // the next tick this replica waits for
	LastTick    time.Time // the last tick this replica handled
	LastOutcome Outcome   // its outcome here
	Running     bool      // a tick of the job is being claimed or run here
	// RunTick and RunStart are the tick of the job's run under way here
	// (its oldest, with overlap "queue") and when it started, on this
	// replica's clock; zero while none runs (Running may be set while a
	// tick is claimed, before its run starts).
	RunTick, RunStart time.Time
	// Digest is a digest of the job's definition on this replica (every
	// Job field but Run, with Revision), which each claim records in the
	// job's ledger.
	Digest string
	// OtherDigest is the digest of another definition of the job that a
	// claim of this replica found in the ledger in the last ten minutes (a
	// replica that claimed before it runs another version), else "".
	OtherDigest string
	// Params are the parameters a manual run of the job accepts
	// (Job.Params); the slice is shared: do not change it.
	Params []string
}

// Status returns the status of every job, in the order they were added.
func (s *Scheduler) Status() []Status {
	order := s.ordered()
	out := make([]Status, 0, len(order))
	runs := s.localRuns()
	for _, e := range order {
		e.mu.Lock()
		out = append(out, Status{
			Job: e.job.Name, Schedule: e.job.Schedule, Zone: e.job.zone(), Lock: e.job.LockName,
			Next: e.next, LastTick: e.lastTick, LastOutcome: e.lastOutcome, Running: e.inflight+e.manuals > 0,
			RunTick: runs[e.job.Name].tick, RunStart: runs[e.job.Name].start,
			Digest: e.digest, OtherDigest: e.otherDigest,
			Params: e.job.Params,
		})
		e.mu.Unlock()
	}
	return out
}

// loop fires e's ticks until the Scheduler stops, or Update or Remove ends
// it (e.quit); then e.next is the first tick it did not fire.
func (s *Scheduler) loop(e *entry) {
	defer s.wg.Done()
	defer close(e.done)
	if s.members != nil && !e.job.everyReplica() {
		// The job's channel stays subscribed while the job is scheduled:
		// its finish messages tell this replica which ticks are done.
		if stop, err := e.ledger.Watch(func(ev fleet.TickEvent) { s.heardTick(e, ev) }); err != nil {
			s.log.Warn("finish messages not heard: this replica claims every tick after its fallback", "job", e.job.Name, "error", err)
		} else {
			defer stop()
		}
		if stop, err := e.manual.Watch(e.heardManual); err != nil {
			s.log.Warn("finish messages of manual runs not heard: this replica claims each after its fallback", "job", e.job.Name, "error", err)
		} else {
			defer stop()
		}
	}
	if stop := s.watchReplaces(e); stop != nil {
		defer stop()
	}
	if len(e.job.After) > 0 {
		s.chainLoop(e)
		return
	}
	if e.job.everyReplica() {
		s.readTriggers(e)
	}
	var next time.Time
	if e.prev != nil {
		// The ticks the old definitions still decide on go first: a
		// claim of a later one would have them answered done.
		for p := e.prev; p != nil; p = p.prev {
			s.awaitEarlier(p, math.MaxInt64, e.quit)
		}
		select {
		case <-s.stopping:
			return
		case <-e.quit:
			// Replaced or removed in turn before its first tick: the
			// old one's first tick not fired is still the first, and
			// the next definition waits for the old ones (e.prev).
			e.mu.Lock()
			e.next = e.resume
			e.mu.Unlock()
			return
		default:
		}
		e.prev = nil
		next = s.takeOver(e)
	} else {
		next = s.catchUp(e)
	}
	for {
		if next.IsZero() {
			s.log.Warn("schedule has no further tick", "job", e.job.Name, "schedule", e.job.Schedule)
			e.mu.Lock()
			e.next = time.Time{}
			e.mu.Unlock()
			return
		}
		e.mu.Lock()
		e.next = next
		e.mu.Unlock()
		t := s.opt.clock.NewTimer(next.Sub(s.opt.clock.Now()))
		select {
		case <-s.stopping:
			t.Stop()
			return
		case <-e.quit:
			t.Stop()
			return
		case <-t.C():
		}
		if s.opt.clock.Now().Before(next) {
			continue // fired early by this clock: wait the rest
		}
		if !s.fire(e, next) {
			return // stopped, or replaced, before the freezes were read: next is the first tick not fired
		}
		next = s.after(e, next)
	}
}

// after returns the tick to wait for after tick: the next one, or, when the
// loop has fallen behind by more than one tick (a stalled process, a clock
// that jumped), the latest one due, counting those in between as missed.
func (s *Scheduler) after(e *entry, tick time.Time) time.Time {
	now := s.opt.clock.Now()
	next := e.sched.Next(tick)
	var missed int64
	for missed < maxCatchUp {
		n := e.sched.Next(next)
		if n.IsZero() || n.After(now) {
			break
		}
		missed++
		next = n
	}
	if missed > 0 {
		s.tel.outcome(e.job.Name, OutcomeMissed, missed)
		s.log.Warn("ticks missed: the scheduler fell behind", "job", e.job.Name, "missed", missed)
	}
	return next
}

// catchUp applies the job's misfire policy to the ticks due since the
// ledger's latest claimed tick (every replica was down for them), up to
// e.from, but those its calendars or the fleet's freezes exclude (read
// first: awaitFreezes), and returns the first tick to wait for: the first after e.from,
// even if it is due by now (its Watch took that long), so that the loop
// fires every tick for which the fleet may rank this replica.
func (s *Scheduler) catchUp(e *entry) time.Time {
	now := e.from
	next := e.sched.Next(now)
	ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
	st, err := e.runLedger().State(ctx)
	cancel()
	if err != nil {
		if s.stopCtx.Err() == nil {
			s.log.Warn("ledger unreadable: missed ticks not checked", "job", e.job.Name, "error", err)
		}
		return next
	}
	if st.Seen == 0 || st.Held {
		// Never run; or a run holds the lock now, so the fleet is up and
		// the ticks since its claim were skipped as busy, not missed.
		return next
	}
	first := e.sched.Next(time.UnixMilli(st.Seen))
	if first.IsZero() || first.After(now) {
		return next
	}
	if !s.awaitFreezes(e, first) {
		return next
	}
	// The ticks that the job's calendars or the freezes exclude would not
	// have run: they are not missed, and run_once runs the latest of the
	// others.
	fs := s.knownFreezes()
	var latest, before time.Time // the latest tick due that would run, and the one before it
	var missed int64
	for t, n := first, 0; !t.IsZero() && !t.After(now) && n < maxCatchUp; t, n = e.sched.Next(t), n+1 {
		if _, _, end, ok := excludedBy(e, t, fs); ok {
			if end.After(t) {
				t = end.Add(-time.Nanosecond) // the next tick is the first at or after end
			}
			continue
		}
		before, latest = latest, t
		missed++
	}
	if missed == 0 {
		return next
	}
	lastMissed := latest
	runOnce := e.job.Misfire == MisfireRunOnce && now.Sub(latest) <= e.job.MisfireGrace
	if runOnce {
		missed--
		lastMissed = before
	}
	if missed > 0 {
		// Recorded before the run-once claim, which moves the ledger's
		// seen past them.
		s.tel.outcome(e.job.Name, OutcomeMissed, missed)
		msg := "ticks missed while every replica was down"
		if e.job.everyReplica() {
			msg = "ticks missed while this replica was down"
		}
		s.log.Warn(msg, "job", e.job.Name, "missed", missed, "latest", fmtTick(lastMissed), "misfire", e.job.Misfire)
		s.recordMissed(e, lastMissed, missed)
	}
	if runOnce {
		s.log.Info("running the latest missed tick once", "job", e.job.Name, "tick", fmtTick(latest), "missed", missed)
		s.fire(e, latest)
	}
	return next
}

// recordMissed writes the ticks up to latest, missed while every replica
// was down, to the job's history: once across the fleet, by the first
// replica to find them, and only once the store's clock is the member TTL
// and the claim fallback past latest (fleet.Ledger.Pass). Until then the
// fleet, if it is up, may still claim latest: a replica whose clock runs
// ahead, starting just before a tick, finds it due on its own clock and
// unclaimed, and passing it over would have the fleet's claim of it
// answered done, and the tick not run (make soak, seed 56). A job that
// runs on every replica records them at once: its ledger is this
// replica's own, which no other replica claims in.
func (s *Scheduler) recordMissed(e *entry, latest time.Time, missed int64) {
	now := time.Now()
	r := Run{Job: e.job.Name, Tick: latest, Replica: s.opt.replica, Start: now, End: now, Outcome: OutcomeMissed, Missed: missed}
	settled := s.opt.memberTTL + s.opt.fallback
	if e.job.everyReplica() {
		settled = 0
	}
	ctx, cancel := context.WithTimeout(s.stopCtx, finishTimeout)
	first, err := e.runLedger().Pass(ctx, latest.UnixMilli(), settled, r.fields())
	cancel()
	switch {
	case err != nil:
		if s.stopCtx.Err() == nil {
			s.log.Warn("missed ticks not recorded in the history", "job", e.job.Name, "error", err)
		}
	case first && s.opt.onRun != nil:
		s.opt.onRun(r)
	}
}

// ordered returns the entries in the order they were added.
func (s *Scheduler) ordered() []*entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.order)
}

// gauge is what the job gauges say of one job.
type gauge struct {
	job         string
	next        time.Time
	period      time.Duration // from next to the tick after it
	ok          bool          // the ledger was read
	lastSuccess time.Time
	paused      bool
	mismatch    bool          // a claim here found another definition lately
	running     time.Duration // how long the run of the job under way here has gone; 0 if none
	replica     string        // this replica, for a job that runs on every replica: its gauges are per replica
}

// gauges reads every job's ledger for the gauges (one round trip each).
func (s *Scheduler) gauges(ctx context.Context) []gauge {
	order := s.ordered()
	out := make([]gauge, 0, len(order))
	runs := s.localRuns()
	now := time.Now()
	for _, e := range order {
		e.mu.Lock()
		g := gauge{job: e.job.Name, next: e.next, mismatch: e.otherDigest != ""}
		everyPaused := e.paused()
		e.mu.Unlock()
		if r, ok := runs[e.job.Name]; ok {
			g.running = now.Sub(r.start)
		}
		if !g.next.IsZero() {
			g.period = e.sched.Next(g.next).Sub(g.next)
		}
		if ctx.Err() == nil {
			if st, err := e.runLedger().State(ctx); err == nil {
				g.ok, g.lastSuccess, g.paused = true, st.Last[string(OutcomeRan)], st.Paused
			}
		}
		if e.job.everyReplica() {
			// Its own ledger: this replica's last success; the pause is
			// the job's, as this replica last learnt it. Its gauges are
			// this replica's, read or not.
			g.replica, g.paused = s.opt.replica, everyPaused
		}
		out = append(out, g)
	}
	return out
}

// localRun is what this replica knows of a run of a job under way here.
type localRun struct {
	tick  time.Time
	start time.Time // on this replica's clock
	long  time.Time // when it went past its job's AlertAfter, if it was announced
}

// localRuns returns the runs under way on this replica by job name: the
// oldest of each job's (one holds the job's lock at a time, but a run
// whose finish is under way may still be listed).
func (s *Scheduler) localRuns() map[string]localRun {
	s.mu.Lock()
	active := make([]*run, 0, len(s.active))
	for r := range s.active {
		active = append(active, r)
	}
	s.mu.Unlock()
	out := make(map[string]localRun, len(active))
	for _, r := range active {
		r.mu.Lock()
		lr := localRun{tick: r.tick, start: r.start, long: r.long}
		r.mu.Unlock()
		if o, ok := out[r.e.job.Name]; !ok || lr.start.Before(o.start) {
			out[r.e.job.Name] = lr
		}
	}
	return out
}

// fire starts handling tick, unless this replica already handles as many
// ticks of the job as its overlap policy allows. It first waits until the
// fleet's freezes have been read (awaitFreezes), and returns false, tick
// not handled, if the Scheduler stops or e's loop is ended meanwhile.
func (s *Scheduler) fire(e *entry, tick time.Time) bool {
	if !s.awaitFreezes(e, tick) {
		return false
	}
	if cause, reason, ok := s.exclusion(e, tick); ok {
		s.record(e, tick, OutcomeExcluded)
		if s.log.IsDebug() {
			s.log.Debug("tick excluded", "job", e.job.Name, "tick", fmtTick(tick), "cause", cause)
		}
		// Every replica records it (the store writes one entry): the first
		// in rank may be dead and still a member, and a refused Pass costs
		// one read.
		s.skipLater(func() { s.recordSkip(e, tick, OutcomeExcluded, cause, reason) })
		return true
	}
	limit := e.overlapLimit()
	e.mu.Lock()
	if e.inflight-e.held >= limit {
		e.lastTick, e.lastOutcome = tick, OutcomeSkippedBusy
		e.mu.Unlock()
		s.tel.outcome(e.job.Name, OutcomeSkippedBusy, 1)
		if s.log.IsDebug() {
			s.log.Debug("tick skipped: an earlier one is under way here", "job", e.job.Name, "tick", fmtTick(tick))
		}
		if s.firstFor(e, tick) || s.waitsFor(e, tick) {
			s.skipLater(func() { s.recordBusy(e, tick) })
		}
		return true
	}
	if e.paused() {
		e.mu.Unlock()
		s.record(e, tick, OutcomePaused)
		if s.firstFor(e, tick) {
			s.skipLater(func() { s.recordPaused(e, tick, true) })
		}
		if s.log.IsDebug() {
			s.log.Debug("tick skipped: the job is paused", "job", e.job.Name, "tick", fmtTick(tick))
		}
		return true
	}
	e.inflight++
	e.deciding(tick.UnixMilli())
	e.mu.Unlock()
	s.wg.Add(1) // the loop calling fire holds a count: no race with Wait
	if s.claimsNow(e, tick) {
		go s.claimTick(e, tick)
	}
	return true
}

// awaitFreezes waits until the fleet's freezes have been read once
// (readFreezes), so that this replica decides on no tick a freeze holds
// before it knows of the freeze: a replica that starts during a freeze
// would otherwise run the catch-up tick (MisfireRunOnce) or its first
// tick in it. The read is the first thing Run starts, so this waits only
// while the store does not answer, when no claim can be made either; past
// a second it says so, once per tick. It returns false if the Scheduler
// stops or e's loop is ended (Update, Remove) first.
func (s *Scheduler) awaitFreezes(e *entry, tick time.Time) bool {
	select {
	case <-s.freezesRead:
		return true
	default:
	}
	warn := time.NewTimer(freezeRead)
	defer warn.Stop()
	for {
		select {
		case <-s.freezesRead:
			return true
		case <-s.stopping:
			return false
		case <-e.quit:
			return false
		case <-warn.C:
			s.log.Warn("tick held: the fleet's freezes are not read yet, and may exclude it", "job", e.job.Name, "tick", fmtTick(tick))
		}
	}
}

// fireGivenBack claims at once a tick that another replica gave back, and
// that this replica let go when it heard it claimed, unless it handles as
// many ticks of the job as its overlap policy allows.
func (s *Scheduler) fireGivenBack(e *entry, tick time.Time) {
	if len(e.job.After) > 0 {
		// A job that follows others claims in its chain loop alone, which
		// knows the run's parent: its claim of the tick (waiting, or at
		// its next reading) takes it.
		e.poke()
		return
	}
	limit := e.overlapLimit()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing || !s.started || e.cancelled() {
		return
	}
	e.mu.Lock()
	if e.inflight-e.held >= limit {
		e.mu.Unlock()
		return
	}
	e.inflight++
	e.deciding(tick.UnixMilli())
	e.mu.Unlock()
	s.wg.Add(1) // under s.mu, before beginStop's Wait can start
	s.tel.claimed(e.job.Name, claimGivenBack)
	go s.claimTick(e, tick)
}

// claimTick claims the tick once the earlier ones this replica fired are
// decided, runs it, and ends its fire's counts.
func (s *Scheduler) claimTick(e *entry, tick time.Time) {
	defer s.fired(e)
	ms := tick.UnixMilli()
	defer e.decided(ms)
	if e.job.Overlap != OverlapReplace {
		// (A replacing tick does not wait: its claim asks the earlier
		// run to end, and an earlier tick not claimed yet is replaced.)
		s.awaitEarlier(e, ms, nil)
	}
	c := claimSpec{ledger: e.runLedger(), tick: ms, queue: e.job.queues()}
	if e.job.everyReplica() {
		s.claimOwnTick(e, tick, c)
		return
	}
	s.handleClaim(e, tick, c)
}

// fired ends the counts of a tick that fire (or fireGivenBack) took.
func (s *Scheduler) fired(e *entry) {
	e.mu.Lock()
	e.inflight--
	e.mu.Unlock()
	e.retireIfIdle()
	s.wg.Done()
}

func fmtTick(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func (s *Scheduler) runLog(e *entry, tick time.Time) hclog.Logger {
	return s.log.With("job", e.job.Name, "tick", fmtTick(tick))
}

func (s *Scheduler) record(e *entry, tick time.Time, outcome Outcome) {
	s.tel.outcome(e.job.Name, outcome, 1)
	e.mu.Lock()
	if !tick.Before(e.lastTick) {
		e.lastTick, e.lastOutcome = tick, outcome
	}
	e.mu.Unlock()
}

func (s *Scheduler) track(r *run) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.active[r] = struct{}{}
	return true
}
