package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/lockcron/lockcron/fleet"
)

// When is the outcome of its parents' runs that starts a job that follows
// them (Job.After).
type When string

const (
	// WhenSuccess: a run that succeeded (OutcomeRan).
	WhenSuccess When = "success"
	// WhenFailure: a run that failed (OutcomeFailed), was interrupted
	// and abandoned (OutcomeInterrupted), or was ended by a later tick
	// (OutcomeReplaced: it did not complete).
	WhenFailure When = "failure"
	// WhenAlways: either.
	WhenAlways When = "always"
)

// matches reports whether a parent's run that ended with outcome starts
// a job of When w. Ticks that were not run (missed, excluded,
// deadline_missed, skipped, paused) start none.
func (w When) matches(outcome string) bool {
	success := outcome == string(OutcomeRan)
	failure := outcome == string(OutcomeFailed) || outcome == string(OutcomeInterrupted) || outcome == string(OutcomeReplaced)
	switch w {
	case WhenFailure:
		return failure
	case WhenAlways:
		return success || failure
	}
	return success
}

// chainEvery is how often a job that follows others reads its parents'
// chain records besides when it hears of their finishes: so that a lost
// message or a replica that died between a parent's finish and its child's
// claim never loses a child's run.
var chainEvery = 5 * time.Second

// afterSuffix joins a job's name and a parent's in the id of the ledger
// of the runs that follow the parent's manual runs, numbered as those.
const afterSuffix = "!after!"

// never is the schedule of a job that follows others: no tick of its own.
type never struct{}

func (never) Next(time.Time) time.Time { return time.Time{} }

// validateChain checks After and When, filling in When's default.
func (j *Job) validateChain(bad func(field, format string, args ...any)) {
	if len(j.After) == 0 {
		if j.When != "" {
			bad("when", "%q without after: when says which runs of the jobs named in after start this one", j.When)
		}
		return
	}
	if j.Schedule != "" {
		bad("after", "a job with after has no schedule: it runs after %s; remove schedule %q, or after", strings.Join(j.After, ", "), j.Schedule)
	}
	if j.Jitter != 0 {
		bad("jitter", "a job with after runs on its parents' ticks: give them the jitter")
	}
	if j.Overlap != OverlapQueue && j.Overlap != "" {
		bad("overlap", "%q: a job with after queues its runs, one for each parent run, oldest first; remove overlap, or set it to %q", j.Overlap, OverlapQueue)
	}
	if len(j.Exclude) > 0 {
		bad("exclude", "a job with after runs on its parents' ticks: put the calendars on them")
	}
	seen := make(map[string]bool)
	for _, p := range j.After {
		switch {
		case p == "":
			bad("after", "an empty job name")
		case p == j.Name:
			bad("after", "%q names the job itself: a job cannot follow its own runs", p)
		case seen[p]:
			bad("after", "%q is named twice", p)
		}
		seen[p] = true
	}
	switch j.When {
	case "":
		j.When = WhenSuccess
	case WhenSuccess, WhenFailure, WhenAlways:
	default:
		bad("when", "%q is not one of %q, %q, %q", j.When, WhenSuccess, WhenFailure, WhenAlways)
	}
}

// CheckChains checks the jobs that follow others (Job.After) among jobs,
// as a whole: every name in After is one of jobs, no job follows itself
// through others (a cycle), and the parents of a job with several share a
// schedule (the same Schedule, Jitter and time zone, or the same parents'
// schedule for parents that follow others in turn), so that their ticks
// meet. It returns each problem as a *FieldError of the field "after"
// (joined with errors.Join), nil if there is none. Scheduler.Add checks
// the same as jobs are added, but a name not added yet only when Run
// starts the job.
func CheckChains(jobs []Job) error {
	byName := make(map[string]*Job, len(jobs))
	for i := range jobs {
		byName[jobs[i].Name] = &jobs[i]
	}
	return errors.Join(checkChains(byName, jobs, true)...)
}

// checkChains checks the jobs of list against the jobs known by name;
// with complete, a name that is not known is an error.
func checkChains(known map[string]*Job, list []Job, complete bool) []error {
	var errs []error
	for i := range list {
		j := &list[i]
		bad := func(format string, args ...any) {
			errs = append(errs, &FieldError{Job: j.Name, Field: "after", Msg: fmt.Sprintf(format, args...)})
		}
		for _, p := range j.After {
			if known[p] == nil && complete && p != "" && p != j.Name {
				bad("%q is not a job", p)
			}
			if pj := known[p]; pj != nil && pj.everyReplica() {
				bad("%q runs on every replica (replicas %q): its runs are each replica's own, and no one of them starts a job that follows it", p, ReplicasAll)
			}
		}
		if cycle := chainCycle(known, j.Name); cycle != nil {
			bad("a cycle: %s", strings.Join(cycle, " after "))
			continue
		}
		if len(j.After) > 1 {
			var first, firstKey string
			for _, p := range j.After {
				pj := known[p]
				if pj == nil {
					continue
				}
				key := chainSchedule(known, pj, 0)
				if first == "" {
					first, firstKey = p, key
				} else if key != firstKey {
					bad("its parents must share a schedule, so that their ticks meet: %q runs on %s, %q on %s", first, firstKey, p, key)
				}
			}
		}
	}
	return errs
}

// chainCycle returns the jobs of a cycle through name's parents that comes
// back to name ("a", "c", "b", "a": a after c after b after a), nil if
// there is none.
func chainCycle(known map[string]*Job, name string) []string {
	var path []string
	onPath := make(map[string]bool)
	done := make(map[string]bool)
	var visit func(n string) []string
	visit = func(n string) []string {
		if onPath[n] {
			if n == name {
				return append(slices.Clone(path), n)
			}
			return nil
		}
		j := known[n]
		if j == nil || done[n] {
			return nil
		}
		onPath[n], path = true, append(path, n)
		for _, p := range j.After {
			if p == n {
				continue // a child of itself: Validate says so
			}
			if c := visit(p); c != nil {
				return c
			}
		}
		onPath[n], path, done[n] = false, path[:len(path)-1], true
		return nil
	}
	return visit(name)
}

// chainSchedule describes the schedule whose ticks j's runs have: its own,
// or for a job that follows others, its first parent's (depth bounds a
// cycle, which checkChains reports).
func chainSchedule(known map[string]*Job, j *Job, depth int) string {
	if len(j.After) == 0 || depth > len(known) {
		s := fmt.Sprintf("%q", j.Schedule)
		if j.Jitter > 0 {
			s += fmt.Sprintf(" with jitter %v", j.Jitter)
		}
		if z := j.zone(); z != time.UTC.String() {
			s += " in " + z
		}
		return s
	}
	if p := known[j.After[0]]; p != nil {
		return chainSchedule(known, p, depth+1)
	}
	return "the schedule of " + j.After[0]
}

// checkChainAdd checks j's chains against the jobs added so far, as Add
// does: a parent not added yet is not an error. s.mu is held.
func (s *Scheduler) checkChainAdd(j Job, skip *entry) error {
	known := make(map[string]*Job, len(s.order)+1)
	for _, o := range s.order {
		if o != skip {
			known[o.job.Name] = &o.job
		}
	}
	known[j.Name] = &j
	var list []Job
	for _, o := range known {
		if len(o.After) > 0 && (o.Name == j.Name || slices.Contains(o.After, j.Name)) {
			list = append(list, *o)
		}
	}
	return errors.Join(checkChains(known, list, false)...)
}

// followed reports whether a job follows the job name: then its finishes
// add their runs to its ledger's chain record (fleet.Record.Chain).
func (s *Scheduler) followed(name string) bool { return len(s.children(name)) > 0 }

// pokeChildren tells the chain loops of the jobs that follow name to read
// their parents' runs now.
func (s *Scheduler) pokeChildren(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.order {
		if slices.Contains(e.job.After, name) {
			e.poke()
		}
	}
}

// poke wakes e's chain loop, without waiting.
func (e *entry) poke() {
	select {
	case e.chain <- struct{}{}:
	default:
	}
}

// chainParent is what a chain loop keeps of one of its job's parents.
type chainParent struct {
	lock   string        // the parent's lock, whose ledgers are watched
	stop   []func()      // the Watch of its ledgers
	manual *fleet.Ledger // the ledger of the runs that follow its manual runs
	// deep, by path (chainPaths), are the ledgers of the runs that follow
	// its runs that followed a manual run up its chain.
	deep map[string]chainPath
}

// chainPath is a parent's ledger of its runs that follow a manual run up
// its chain, and the child's ledger of its runs that follow those.
type chainPath struct {
	src, claim *fleet.Ledger
}

// chainPaths are the ledger ids, less the job's name and afterSuffix, of
// the runs of the job name that follow a manual run up its chain: for
// each parent P, "P" (those that follow P's manual runs), and "P!after!x"
// for each x of P's own (those that follow P's runs that followed one).
// Validate refuses a cycle; depth bounds one all the same.
func (s *Scheduler) chainPaths(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var paths func(name string, depth int) []string
	paths = func(name string, depth int) []string {
		e := s.entries[name]
		if e == nil || depth > len(s.entries) {
			return nil
		}
		var out []string
		for _, p := range e.job.After {
			out = append(out, p)
			for _, x := range paths(p, depth+1) {
				out = append(out, p+afterSuffix+x)
			}
		}
		return out
	}
	return paths(name, 0)
}

// chainDeep returns the ledgers of path r of e's parent pe (chainPaths),
// made at the first call.
func (s *Scheduler) chainDeep(e, pe *entry, p *chainParent, r string) (chainPath, error) {
	if d, ok := p.deep[r]; ok {
		return d, nil
	}
	src, err := s.store.Ledger(pe.job.LockName, pe.job.Name+afterSuffix+r)
	if err != nil {
		return chainPath{}, err
	}
	claim, err := s.chainLedger(e, e.job.Name+afterSuffix+pe.job.Name+afterSuffix+r)
	if err != nil {
		return chainPath{}, err
	}
	if p.deep == nil {
		p.deep = make(map[string]chainPath)
	}
	d := chainPath{src: src, claim: claim}
	p.deep[r] = d
	if stop, err := src.Watch(func(ev fleet.TickEvent) {
		if ev.Done {
			e.poke()
		}
	}); err == nil {
		p.stop = append(p.stop, stop)
	}
	return d, nil
}

// chainLoop is the trigger loop of a job that follows others (Job.After):
// it reads its parents' chain records when it starts, when it hears a
// parent's finish (its own or another replica's), and every chainEvery,
// and claims each run due, oldest first, until the job is replaced or
// removed or the Scheduler stops. The readings and claims go on in a
// goroutine of their own (s.wg), which ends after the claim under way
// when the job is replaced or removed: chainLoop returns at once then, so
// that Update does not wait for a run. The next definition's loop waits
// for it (chainIdle) before its own first reading, so that the two never
// claim side by side.
func (s *Scheduler) chainLoop(e *entry) {
	idle := make(chan struct{})
	e.mu.Lock()
	e.chainIdle = idle
	e.mu.Unlock()
	s.wg.Add(1) // the loop's own count is held: Wait has not returned
	go func() {
		defer s.wg.Done()
		defer close(idle)
		s.chainReadings(e)
	}()
	select {
	case <-idle:
	case <-e.quit:
	}
}

// chainReadings is chainLoop's goroutine.
func (s *Scheduler) chainReadings(e *entry) {
	for p := e.prev; p != nil; p = p.prev {
		p.mu.Lock()
		prev := p.chainIdle
		p.mu.Unlock()
		if prev == nil {
			continue
		}
		select {
		case <-prev:
		case <-s.stopping:
			return
		case <-e.quit:
			return
		}
	}
	cs := &chainState{parents: make(map[string]*chainParent), low: make(map[string]int64)}
	defer func() {
		for _, p := range cs.parents {
			for _, stop := range p.stop {
				stop()
			}
		}
	}()
	t := time.NewTicker(chainEvery)
	defer t.Stop()
	for {
		s.chainScan(e, cs)
		select {
		case <-s.stopping:
			return
		case <-e.quit:
			return
		case <-e.chain:
		case <-t.C:
		}
	}
}

// chainState is what a chain loop keeps from one reading to the next.
type chainState struct {
	parents map[string]*chainParent
	// floor is the child's chain floor (fleet.Ledger.ChainFloor), once
	// read: its parents' runs that finished before it are not followed.
	floor time.Time
	// alive is when the last reading that read the parents' runs with the
	// child not paused began: the parents' runs that finished since then
	// finished while this replica ran the child's loop (and perhaps the
	// child, or waited for its run elsewhere), and the MisfireGrace does
	// not drop them (nor any while the child's ledger has a claim within
	// the grace: another replica runs it). Zero: none yet, or the child
	// was paused since.
	alive time.Time
	// dropped are the runs due that the grace dropped at the last reading
	// (warned of once each).
	dropped map[chainKey]bool
	// low, by parent, is a tick up to which the parent's chain record
	// holds no run that starts one of the job's (not matching its When,
	// or before its floor): the next reading reads after it, so that a
	// child of failures does not read its parent's successes again at
	// each reading.
	low map[string]int64
}

// chainKey names a parent's run due: its tick, or its manual run's number.
type chainKey struct {
	parent string
	manual bool
	tick   int64
}

// chainDue is a run of a job that follows others, due.
type chainDue struct {
	tick    int64     // the ledger's tick: the parents' tick (ms), or a manual run's number
	runTick time.Time // the tick the run reports
	parent  string    // the parent whose finish made it due
	at      time.Time // that finish's time, on the store's clock
}

// chainScan reads the chain records of e's parents and claims e's runs
// due: the ticks that every parent finished with an outcome in e's When,
// after the latest one e's ledger has done; and each parent's manual runs
// that did, after the latest one followed. A parent's run that finished
// before the child's chain floor (its first reading anywhere) is not
// followed. A run whose parents finished more than e's MisfireGrace ago
// while the child did not run is not run (the job was not running
// anywhere then, or was paused): a warning says so, once. A paused job
// claims nothing: its runs wait for its resume, within the same grace.
func (s *Scheduler) chainScan(e *entry, cs *chainState) {
	ctx, cancel := context.WithTimeout(e.ctx, finishTimeout)
	defer cancel()
	log := s.log.With("job", e.job.Name)
	begun := time.Now()
	pes := make([]*entry, 0, len(e.job.After))
	s.mu.Lock()
	for _, name := range e.job.After {
		if pe := s.entries[name]; pe != nil {
			pes = append(pes, pe)
		}
	}
	s.mu.Unlock()
	if len(pes) < len(e.job.After) {
		log.Debug("a parent of the job is not added: its runs wait for it", "after", e.job.After)
		return
	}
	if cs.floor.IsZero() {
		floor, err := e.ledger.ChainFloor(ctx)
		if err != nil {
			log.Warn("chain: the job's chain floor not read; its runs are claimed at the next reading", "error", err)
			return
		}
		cs.floor = floor
	}
	st, err := e.ledger.State(ctx)
	if err != nil {
		log.Warn("chain: the job's ledger not read; its runs are claimed at the next reading", "error", err)
		return
	}
	if st.Paused {
		cs.alive = time.Time{}
		return
	}
	// The grace's cut-off: on this replica's clock, against the store's
	// time of the parents' finishes (the clocks of a fleet agree closely
	// enough for a grace of seconds or more).
	oldest := begun.Add(-e.job.MisfireGrace)
	switch {
	case st.Running != 0 || !st.Since.IsZero() && !st.Since.Before(oldest):
		// A run of the job is under way (or to be taken over), or a
		// replica claimed one within the grace: the fleet runs it (its
		// runs queue), and none is dropped.
		oldest = time.Time{}
	case !cs.alive.IsZero() && cs.alive.Before(oldest):
		oldest = cs.alive
	}
	dropped := make(map[chainKey]bool)
	keep := func(k chainKey, at time.Time) bool {
		if at.Before(cs.floor) {
			return false
		}
		if !at.Before(oldest) {
			return true
		}
		dropped[k] = true
		if !cs.dropped[k] {
			what := fmtTick(time.UnixMilli(k.tick))
			if k.manual {
				what = fmt.Sprintf("manual run %d", k.tick)
			}
			log.Warn("chain: a parent's run not followed: it finished more than the job's misfire_grace ago, while the job did not run", "parent", k.parent, "run", what, "finished", at, "misfire_grace", e.job.MisfireGrace)
		}
		return false
	}
	defer func() { cs.dropped = dropped }()
	var due []claimDue
	// The parents' ticks: each one's matching runs, met by all of them.
	met := make(map[int64]*chainDue)
	count := make(map[int64]int)
	for i, pe := range pes {
		p, err := s.chainWatch(e, pe, cs.parents)
		if err != nil {
			log.Error("chain: the ledger of the runs that follow a parent's manual runs not made", "parent", pe.job.Name, "error", err)
			return
		}
		low := max(st.Done, cs.low[pe.job.Name])
		runs, err := pe.ledger.ChainRuns(ctx, low)
		if err != nil {
			log.Warn("chain: a parent's runs not read", "parent", pe.job.Name, "error", err)
			return
		}
		for k, r := range runs {
			if !e.job.When.matches(r.Outcome) || r.At.Before(cs.floor) {
				if k == 0 || runs[k-1].Tick == low {
					low = r.Tick // none of these ever starts a run: not read again
				}
				continue
			}
			if count[r.Tick] != i {
				continue
			}
			count[r.Tick]++
			if d := met[r.Tick]; d == nil || r.At.After(d.at) {
				met[r.Tick] = &chainDue{tick: r.Tick, runTick: time.UnixMilli(r.Tick), parent: pe.job.Name, at: r.At}
			}
		}
		cs.low[pe.job.Name] = low
		// The parent's manual runs, and its runs that follow its own
		// parents' manual runs, up its chain: each kept in a ledger of
		// its own, which the job follows in a ledger of its own.
		follow := func(src, claim *fleet.Ledger, origin string) bool {
			oe, err := s.entry(origin)
			if err != nil {
				return true // not added: its runs wait for it
			}
			cst, err := claim.State(ctx)
			if err != nil {
				log.Warn("chain: the ledger of the runs that follow a parent's manual runs not read", "parent", pe.job.Name, "error", err)
				return false
			}
			mruns, err := src.ChainRuns(ctx, cst.Done)
			if err != nil {
				log.Warn("chain: a parent's manual runs not read", "parent", pe.job.Name, "error", err)
				return false
			}
			for _, r := range mruns {
				if e.job.When.matches(r.Outcome) && keep(chainKey{pe.job.Name + afterSuffix + origin, true, r.Tick}, r.At) {
					tick, perr := time.Parse(time.RFC3339Nano, r.RunTick)
					if perr != nil {
						tick = r.At
					}
					due = append(due, claimDue{d: chainDue{tick: r.Tick, runTick: tick, parent: pe.job.Name, at: r.At}, ledger: claim, params: oe.manual,
						follow: &chainFollow{src: src, params: r.Params, origin: oe}})
				}
			}
			return true
		}
		if !follow(pe.manual, p.manual, pe.job.Name) {
			return
		}
		for _, r := range s.chainPaths(pe.job.Name) {
			d, err := s.chainDeep(e, pe, p, r)
			if err != nil {
				log.Error("chain: the ledger of the runs that follow a parent's manual runs not made", "parent", pe.job.Name, "error", err)
				return
			}
			origin := r
			if i := strings.LastIndex(r, afterSuffix); i >= 0 {
				origin = r[i+len(afterSuffix):]
			}
			if !follow(d.src, d.claim, origin) {
				return
			}
		}
	}
	cs.alive = begun
	var ticks []*chainDue
	for tick, d := range met {
		if count[tick] == len(pes) && keep(chainKey{d.parent, false, tick}, d.at) {
			ticks = append(ticks, d)
		}
	}
	slices.SortFunc(ticks, func(a, b *chainDue) int { return int(min(max(a.tick-b.tick, -1), 1)) })
	for _, d := range ticks {
		if !s.chainClaim(e, claimDue{d: *d, ledger: e.ledger}) {
			return
		}
	}
	for _, c := range due {
		if !s.chainClaim(e, c) {
			return
		}
	}
}

// claimDue is a run due, and the ledger it is claimed in.
type claimDue struct {
	d      chainDue
	ledger *fleet.Ledger
	params *fleet.Ledger // a manual run's: the parent's ledger of manual runs
	follow *chainFollow  // a manual run's: the run it follows
}

// chainFollow is a parent's run that a run of a child follows, as the
// chain record src says it: its tick is claimDue's.
type chainFollow struct {
	src *fleet.Ledger
	// params are the ChainRun's Params: the params of the request
	// followed (nil: a record written before it carried them).
	params map[string]string
	origin *entry // the job the request was made for
}

// chainClaim claims c and runs it; it reports whether the loop goes on.
func (s *Scheduler) chainClaim(e *entry, c claimDue) bool {
	select {
	case <-s.stopping:
		return false
	case <-e.quit:
		return false
	default:
	}
	manual := c.ledger != e.ledger
	e.mu.Lock()
	e.inflight++
	e.mu.Unlock()
	s.handleClaim(e, c.d.runTick, claimSpec{ledger: c.ledger, tick: c.d.tick, queue: true, manual: manual, parent: c.d.parent, params: c.params, follow: c.follow})
	e.mu.Lock()
	e.inflight--
	e.mu.Unlock()
	e.retireIfIdle() // replaced or removed meanwhile: its last claim is over
	return !e.cancelled()
}

// chainWatch returns what e's chain loop keeps of its parent pe: at the
// first call, it watches pe's ledgers, so that a finish heard from another
// replica wakes the loop, and makes the ledger of the runs that follow
// pe's manual runs.
func (s *Scheduler) chainWatch(e, pe *entry, parents map[string]*chainParent) (*chainParent, error) {
	if p := parents[pe.job.Name]; p != nil && p.lock == pe.job.LockName {
		return p, nil
	} else if p != nil {
		for _, stop := range p.stop {
			stop()
		}
	}
	delete(parents, pe.job.Name)
	g, err := s.chainLedger(e, e.job.Name+afterSuffix+pe.job.Name)
	if err != nil {
		return nil, err
	}
	p := &chainParent{lock: pe.job.LockName, manual: g}
	parents[pe.job.Name] = p
	for _, g := range []*fleet.Ledger{pe.ledger, pe.manual} {
		stop, err := g.Watch(func(ev fleet.TickEvent) {
			if ev.Done {
				e.poke()
			}
		})
		if err == nil {
			p.stop = append(p.stop, stop)
		}
	}
	return p, nil
}

// chainLedger makes e's ledger id, of its runs that follow a manual run.
func (s *Scheduler) chainLedger(e *entry, id string) (*fleet.Ledger, error) {
	ledger := s.store.Ledger
	if e.job.LockKind == LockFair {
		ledger = s.store.FairLedger
	}
	keep, age := e.job.HistoryKeep, e.job.HistoryMaxAge
	if keep == 0 {
		keep = s.opt.historyKeep
	}
	if age == 0 {
		age = s.opt.historyMaxAge
	}
	return ledger(e.job.LockName, id, fleet.WithHistory(keep, age), fleet.WithSharedHistory(e.job.Name), fleet.WithDefinition(e.digest))
}

// followParams takes, for a run r that follows a parent's manual run (c),
// the params of the request followed, as the parent's chain record
// carries them (c.follow: a later trigger of the parent drops the
// request's record; when the claim took an earlier run over, that run's,
// read in the record again); from a record written before they were, it
// reads the request's record in the ledger of manual runs of the job it
// was made for (c.params). It keeps those r's job declares (chainParams),
// and all of them for the runs that follow r (r.followed). An error: not
// run; so if that job declares params and none are found (never a run
// without its params).
func (s *Scheduler) followParams(ctx context.Context, r *run, c claimSpec, log hclog.Logger) error {
	p := c.follow.params
	if r.cl.Tick != c.tick {
		runs, err := c.follow.src.ChainRuns(ctx, r.cl.Tick-1)
		if err != nil {
			log.Error("manual run not started: its parent's parameters could not be read", "error", err)
			return fmt.Errorf("not run: the parameters of its parent's manual run could not be read: %w", err)
		}
		p = nil
		if len(runs) > 0 && runs[0].Tick == r.cl.Tick {
			p = runs[0].Params
		}
	}
	if p == nil {
		var err error
		if p, err = c.params.Params(ctx, r.cl.Tick); err != nil {
			log.Error("manual run not started: its parent's parameters could not be read", "error", err)
			return fmt.Errorf("not run: the parameters of its parent's manual run could not be read: %w", err)
		}
	}
	if origin := c.follow.origin; p == nil && len(origin.job.Params) > 0 {
		log.Error("manual run not started: the store has no record of the parameters of the manual run it follows (lost with the store's data?)", "origin", origin.job.Name)
		return fmt.Errorf("%w: the store has no record of the parameters of the manual run of %s it follows (lost with the store's data?)", errParamsLost, origin.job.Name)
	}
	r.followed = p
	r.params = chainParams(p, r.e.job.Params)
	if len(r.params) == 0 {
		log.Info("manual run claimed")
		return nil
	}
	log.Info("manual run claimed", "params", paramNames(r.params))
	return nil
}

// chainParams are the params of a child's run that follows a parent's
// manual run: those of the parent's run (p) that the child declares in its
// Params (names), none if it declares none. The parent's undeclared ones
// are not the child's to see: a child takes what it accepts, as a manual
// run of its own would.
func chainParams(p map[string]string, names []string) map[string]string {
	var out map[string]string
	for k, v := range p {
		if slices.Contains(names, k) {
			if out == nil {
				out = make(map[string]string)
			}
			out[k] = v
		}
	}
	return out
}

// parentRun is the run that started r, "job@tick", or "" if none did.
func (r *run) parentRun() string {
	if r.parent == "" {
		return ""
	}
	return r.parent + "@" + fmtTick(r.tick)
}

// children are the jobs that follow the job name, in the order they were
// added.
func (s *Scheduler) children(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.order {
		if slices.Contains(e.job.After, name) {
			out = append(out, e.job.Name)
		}
	}
	return out
}
