package core

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/internal/redistest"
)

var diffSeed = flag.Uint64("diff.seed", 0, "seed of TestBackendsAgree's operations (0: from the clock; the test logs it)")

const (
	// diffTolerance is how far apart the backends' TTLs, sleeps and times
	// may be: each runs an operation a moment after the other, on a clock
	// of its own (Redis TIME, this process's). A run whose operations
	// stalled (a loaded machine) widens it by the stall (diffRun.gap).
	diffTolerance = 250 * time.Millisecond
	// diffLease is most leases, places in a queue, writers' marks and
	// members' lifetimes; diffShort the others, which run out before the
	// next operation (see settle).
	diffLease = time.Minute
	diffShort = time.Millisecond
	// diffSoon: a deadline closer than this is a short one's.
	diffSoon = time.Second
	// diffMaxSleep is a waiting writer's longest sleep (rwacquire.lua).
	diffMaxSleep = 20 * time.Second
	// diffKeep is how many entries a history keeps: appends trim it.
	diffKeep = 4
	// diffRecent is how many operations a failure shows before its own.
	diffRecent = 10
)

var (
	diffNames   = []string{"d0", "d1", "d2"} // lock names; every kind of lock uses each
	diffLedgers = []string{"a", "b"}         // ledger ids, beside each lock name
)

// diffScripts names the backend method that runs each script in scripts/;
// lib.lua and rwlib.lua are libraries that other scripts start with.
var diffScripts = map[string]string{
	"acquire.lua":        "acquire",
	"renew.lua":          "renew",
	"release.lua":        "release",
	"forceunlock.lua":    "forceUnlock",
	"claim.lua":          "claim",
	"finish.lua":         "finish",
	"pass.lua":           "ledgerPass",
	"pause.lua":          "ledgerPause",
	"trigger.lua":        "ledgerTrigger",
	"fairacquire.lua":    "fairAcquire",
	"fairrelease.lua":    "fairRelease",
	"fairleave.lua":      "fairLeave",
	"rwacquire.lua":      "rwAcquire",
	"rwrenew.lua":        "rwRenew",
	"rwrelease.lua":      "rwRelease",
	"rwleave.lua":        "rwLeave",
	"rwforceunlock.lua":  "rwForceUnlock",
	"semacquire.lua":     "semAcquire",
	"semrenew.lua":       "semRenew",
	"semrelease.lua":     "semRelease",
	"semforceunlock.lua": "semForceUnlock",
	"inspect.lua":        "locks",
	"members.lua":        "members",
	"freeze.lua":         "freezes",
	"replicareport.lua":  "reportReplica",
	"chainfloor.lua":     "chainFloor",
	"replicas.lua":       "replicas",
	"backfill.lua":       "backfills",
	"backfillindex.lua":  "backfillIndex",
	"lib.lua":            "",
	"rwlib.lua":          "",
}

// diffUncompared are the backend methods the test does not call, and why:
// every other method of the backend interface must be called in each run.
var diffUncompared = map[string]string{
	"subscribe":        "Pub/Sub plumbing: a memory subscription is in place at once, a Redis one when confirmed",
	"subscribeIfReady": "Pub/Sub plumbing, as subscribe",
	"subscribed":       "Pub/Sub plumbing, as subscribe",
	"unsubscribe":      "Pub/Sub plumbing, as subscribe",
	"listen":           "Pub/Sub plumbing, as subscribe",
	"listening":        "Pub/Sub plumbing, as subscribe",
	"close":            "ends the backend, after the run",
	"transient":        "a classification of errors, which the run has none of",
	"storeID":          "names the store: a Redis address, or a MemoryStore",
	"reachable":        "Pub/Sub plumbing: a PING on the shared Pub/Sub connection (ping, outside the pool)",
}

// diffBackend is a backend: both of the package's are compared.
type diffBackend = backend

// diffMethod is an operation: a call of one backend method, made with
// arguments by gen, and how often it comes.
type diffMethod struct {
	method string
	weight int
	gen    func(*diffRun) diffOp
}

// diffMethods are the operations.
var diffMethods = []diffMethod{
	{"acquire", 8, (*diffRun).acquireOp},
	{"renew", 3, (*diffRun).renewOp},
	{"release", 7, (*diffRun).releaseOp},
	{"forceUnlock", 1, (*diffRun).forceUnlockOp},
	{"claim", 8, (*diffRun).claimOp},
	{"finish", 6, (*diffRun).finishOp},
	{"ledgerPass", 3, (*diffRun).ledgerPassOp},
	{"history", 3, (*diffRun).historyOp},
	{"chainRuns", 2, (*diffRun).chainRunsOp},
	{"chainFloor", 1, (*diffRun).chainFloorOp},
	{"ledgerPause", 1, (*diffRun).ledgerPauseOp},
	{"ledgerTrigger", 1, (*diffRun).ledgerTriggerOp},
	{"ledgerParams", 1, (*diffRun).ledgerParamsOp},
	{"ledger", 3, (*diffRun).ledgerOp},
	{"ledgerReplace", 1, (*diffRun).ledgerReplaceOp},
	{"fairAcquire", 6, (*diffRun).fairAcquireOp},
	{"fairRelease", 4, (*diffRun).fairReleaseOp},
	{"fairLeave", 3, (*diffRun).fairLeaveOp},
	{"rwAcquire", 8, (*diffRun).rwAcquireOp},
	{"rwRenew", 2, (*diffRun).rwRenewOp},
	{"rwRelease", 6, (*diffRun).rwReleaseOp},
	{"rwLeave", 2, (*diffRun).rwLeaveOp},
	{"rwForceUnlock", 1, (*diffRun).rwForceUnlockOp},
	{"semAcquire", 6, (*diffRun).semAcquireOp},
	{"semRenew", 2, (*diffRun).semRenewOp},
	{"renewAll", 2, (*diffRun).renewAllOp},
	{"semRelease", 5, (*diffRun).semReleaseOp},
	{"semForceUnlock", 1, (*diffRun).semForceUnlockOp},
	{"locks", 3, (*diffRun).locksOp},
	{"members", 3, (*diffRun).membersOp},
	{"freezes", 2, (*diffRun).freezesOp},
	{"reportReplica", 2, (*diffRun).reportReplicaOp},
	{"replicas", 1, (*diffRun).replicasOp},
	{"backfills", 2, (*diffRun).backfillsOp},
	{"backfillIndex", 1, (*diffRun).backfillIndexOp},
	{"publish", 1, (*diffRun).publishOp},
	{"ping", 1, (*diffRun).pingOp},
}

// The memory backend keeps the semantics of the scripts: the same random
// sequence of operations, applied to both backends, gets the same answers.
// Fencing tokens (see delta), TTLs, sleeps and times (within
// diffTolerance) and history entry ids (not compared) are the backends'
// own; everything else must be equal, with no exception. Replay a failure
// with -args -diff.seed=N.
func TestBackendsAgree(t *testing.T) {
	t.Parallel()
	seed := *diffSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -args -diff.seed=%d)", seed, seed)
	n := 12000 // enough to meet every reply (diffReplies): 6000 missed one in about 60 runs
	if testing.Short() {
		n = 500
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := newDiffRun(t, seed)
	start := time.Now()
	for i := range n {
		d.step(ctx, i)
	}
	t.Logf("%d operations in %v (%v at most for one on both backends)",
		n, time.Since(start).Round(time.Millisecond), d.gap.Round(time.Microsecond))
	d.checkCoverage()
}

// diffRun is one run of TestBackendsAgree.
type diffRun struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	prefix  string
	rdb     *redis.Client
	redis   *redisBackend
	mem     *memoryBackend
	group   string              // the members' group key
	ledgers []*diffLedger       // by lock name and id
	calls   map[string]int      // operations made, by backend method
	replies map[string]bool     // the replies met: "method what=value" (see diffReplies)
	bases   [2]map[string]int64 // the first fencing token of each counter: Redis's, the memory store's
	last    [2]map[string]int64 // the latest token of each counter, as bases
	recent  []string            // the last operations, with their answers
	// freeze is the last add or del of the freezes, which freezesOp
	// repeats now and then, as a client's retry after a lost reply.
	freeze *[3]any // op, nonce, args
	// gap is the longest time an operation took on both backends, from
	// Redis's start to the memory store's end: a deadline one sets, and
	// the TTLs each reads of it, are that far apart at most.
	gap time.Duration
	// trigger is the last request id of ledgerTrigger, which it repeats
	// now and then, as a client's retry.
	trigger string
}

// diffLedger is one ledger, as a Ledger and as a FairLedger: the same keys,
// but a fair finish wakes the head of the lock's queue.
type diffLedger struct {
	plain, fair *Ledger
}

// diffOp is one operation: a call of a backend method with its arguments.
type diffOp struct {
	method string
	desc   string                    // the call, with its arguments
	short  bool                      // it may leave something that lasts diffShort
	before func(ctx context.Context) // if not nil, reads both backends before run
	run    func(ctx context.Context, be diffBackend) diffAnswer
}

// newDiffRun starts a redis-server with the Redis backend on it, and a
// memory store, both empty.
func newDiffRun(t *testing.T, seed uint64) *diffRun {
	t.Helper()
	srv := redistest.Start(t)
	rdb := srv.Client()
	noWake := func(string) {}
	noHeard := func(string, TickEvent, string) {}
	rb := newRedisBackend(rdb, noWake, noWake, noHeard, "me:", nil)
	t.Cleanup(func() { _ = rb.close() })
	mb := &memoryBackend{s: NewMemoryStore(), wake: noWake, wakeFair: noWake, heard: noHeard}
	t.Cleanup(func() { _ = mb.close() })
	// A Client makes the Ledgers and the group's key, named as every
	// Client names them; it sends nothing.
	c, err := NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	d := &diffRun{
		t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0)), prefix: c.opt.prefix,
		rdb: rdb, redis: rb, mem: mb, group: c.membersKey("g"),
		calls: make(map[string]int), replies: make(map[string]bool),
		bases: [2]map[string]int64{make(map[string]int64), make(map[string]int64)},
		last:  [2]map[string]int64{make(map[string]int64), make(map[string]int64)},
	}
	for _, name := range diffNames {
		for _, id := range diffLedgers {
			plain, err := c.Ledger(name, id, WithHistory(diffKeep, 0))
			if err != nil {
				t.Fatal(err)
			}
			fair, err := c.FairLedger(name, id, WithHistory(diffKeep, 0))
			if err != nil {
				t.Fatal(err)
			}
			d.ledgers = append(d.ledgers, &diffLedger{plain: plain, fair: fair})
		}
		// A replica's own ledger of a job that runs on every replica
		// (WithOwnLock): its lock beside the name's, its history the
		// first ledger's.
		own := []LedgerOption{WithHistory(diffKeep, 0), WithOwnLock("r1"), WithSharedHistory(diffLedgers[0])}
		plain, err := c.Ledger(name, diffLedgers[0], own...)
		if err != nil {
			t.Fatal(err)
		}
		fair, err := c.FairLedger(name, diffLedgers[0], own...)
		if err != nil {
			t.Fatal(err)
		}
		d.ledgers = append(d.ledgers, &diffLedger{plain: plain, fair: fair})
	}
	return d
}

// step makes the i-th operation, applies it to Redis then to the memory
// store, and fails at the first answer that differs.
func (d *diffRun) step(ctx context.Context, i int) {
	op := d.pick(i)
	d.calls[op.method]++
	if op.before != nil {
		op.before(ctx)
	}
	start := time.Now()
	ra := op.run(ctx, d.redis)
	ma := op.run(ctx, d.mem)
	d.gap = max(d.gap, time.Since(start))
	for _, v := range ra {
		switch {
		case v.what == "woken":
			d.replies[op.method+" woken="+strconv.FormatBool(v.s != "")] = true
		case v.what == "status" || v.kind == diffExact && diffReplyValues[v.what]:
			d.replies[op.method+" "+v.what+"="+v.s] = true
		}
	}
	if what := d.differ(ra, ma); what != "" {
		d.t.Fatalf("seed %d (replay with -args -diff.seed=%d): operation %d: %s\n%s differs:\n  redis:  %s\n  memory: %s\nthe operations before it:\n%s",
			d.seed, d.seed, i, op.desc, what, d.show(0, ra), d.show(1, ma), strings.Join(d.recent, "\n"))
	}
	d.recent = append(d.recent, fmt.Sprintf("  %d: %s -> %s", i, op.desc, d.show(0, ra)))
	if len(d.recent) > diffRecent {
		d.recent = d.recent[1:]
	}
	if op.short {
		d.settle(ctx, i, op)
	}
}

// pick makes the i-th operation: a method chosen by weight, except that
// while some method has not been called, every tenth operation calls the
// first of those, so that a short run covers them all.
func (d *diffRun) pick(i int) diffOp {
	m := -1
	if i%10 == 9 {
		m = slices.IndexFunc(diffMethods, func(x diffMethod) bool { return d.calls[x.method] == 0 })
	}
	if m < 0 {
		total := 0
		for _, x := range diffMethods {
			total += x.weight
		}
		n := d.rng.IntN(total)
		for m = 0; n >= diffMethods[m].weight; m++ {
			n -= diffMethods[m].weight
		}
	}
	op := diffMethods[m].gen(d)
	op.method = diffMethods[m].method
	return op
}

// checkCoverage fails the test if a method of the backend interface, or a
// script, was not called in the run and is not listed as uncompared: a new
// script needs its operation here.
func (d *diffRun) checkCoverage() {
	t := d.t
	it := reflect.TypeFor[backend]()
	for i := range it.NumMethod() {
		m := it.Method(i).Name
		if _, ok := diffUncompared[m]; !ok && d.calls[m] == 0 {
			t.Errorf("backend method %s was never called: give it an operation in diffMethods (or a reason in diffUncompared)", m)
		}
	}
	files, err := os.ReadDir("scripts")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f.Name(), ".lua") {
			continue
		}
		m, ok := diffScripts[f.Name()]
		switch {
		case !ok:
			t.Errorf("script %s has no backend method in diffScripts", f.Name())
		case m != "" && d.calls[m] == 0:
			t.Errorf("script %s (%s) was never run", f.Name(), m)
		}
	}
	t.Logf("calls: %v", d.calls)
	for _, r := range diffReplies {
		if !d.replies[r] && !testing.Short() {
			t.Errorf("reply %q was never met: make it likelier in the operations' arguments", r)
		}
	}
}

// The operations' arguments. Owner ids come from small pools, so that
// leases meet, one pool per kind of lease, as a Client never uses one
// owner id for two: "o" for the Mutex and FairMutex (which share their
// lease) and for permits, "c<ledger id>" for the claims of a ledger, "w"
// and "r" for an RWMutex's write and read leases.

// owner is one of the three owner ids of role.
func (d *diffRun) owner(role string) string {
	return "me:" + role + strconv.Itoa(1+d.rng.IntN(3))
}

// ownerOf is mostly one of live, the owners of live leases (sorted, so
// that a seed replays), else one of the owner ids of role.
func (d *diffRun) ownerOf(live []string, role string) string {
	if len(live) > 0 && d.rng.IntN(5) < 3 {
		return live[d.rng.IntN(len(live))]
	}
	return d.owner(role)
}

// name is one of the lock names.
func (d *diffRun) name() string { return diffNames[d.rng.IntN(len(diffNames))] }

// lease is a lease, a place's or a mark's lifetime: a minute, or now and
// then a millisecond, which runs out before the next operation.
func (d *diffRun) lease() time.Duration {
	if d.rng.IntN(20) == 0 {
		return diffShort
	}
	return diffLease
}

// place is how long a place in a fair lock's queue lasts: as a lease, or
// half a minute, or three minutes, so that the next waiter's sleep (at
// most a third of its place) may end with the head's place. None runs out
// in a run of a few seconds.
func (d *diffRun) place() time.Duration {
	switch d.rng.IntN(5) {
	case 0:
		return diffLease / 2
	case 1:
		return 3 * diffLease
	}
	return d.lease()
}

// holdsArg is the hold count a call names for a lease that has h: mostly h
// (0: a new lease), else a retry's after a lost reply (h-1), a wrong one
// (h+1), or a new lease's.
func (d *diffRun) holdsArg(h int) int {
	switch x := d.rng.IntN(10); {
	case x < 7:
		return h
	case x < 8:
		return max(h-1, 0)
	case x < 9:
		return h + 1
	}
	return 0
}

// releaseArgs are a release's holds and drop for a lease that has h: one
// hold, or every hold.
func (d *diffRun) releaseArgs(h int) (holds, drop int) {
	holds, drop = d.holdsArg(h), 1
	if holds > 1 && d.rng.IntN(3) == 0 {
		drop = holds
	}
	return holds, drop
}

// ledger is one of the ledgers, as a Ledger or, now and then, a
// FairLedger.
func (d *diffRun) ledger() *Ledger {
	g := d.ledgers[d.rng.IntN(len(d.ledgers))]
	if d.rng.IntN(5) < 2 {
		return g.fair
	}
	return g.plain
}

// The hints below read the memory store to pick likely arguments (a live
// lease's holds, a ledger's ticks). They are not answers: a store that is
// wrong shows in the answers that follow.

// mutexHolds is the holds of owner's live lease of the Mutex k, 0 if none.
func (d *diffRun) mutexHolds(k *keys, owner string) int {
	s := d.mem.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.locks[k.lock]; l != nil && l.owner == owner && time.Now().Before(l.expires) {
		return l.holds
	}
	return 0
}

// mutexOwners is the owner of the live lease of the Mutex k, if any.
func (d *diffRun) mutexOwners(k *keys) []string {
	s := d.mem.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if l := s.locks[k.lock]; l != nil && time.Now().Before(l.expires) {
		return []string{l.owner}
	}
	return nil
}

// rwHolds is the holds of owner's live write (write) or read lease of the
// RWMutex k, 0 if none.
func (d *diffRun) rwHolds(k *keys, write bool, owner string) int {
	s := d.mem.s
	s.mu.Lock()
	defer s.mu.Unlock()
	rw := s.rw[k.lock]
	if rw == nil {
		return 0
	}
	if l := rw.leases[owner]; l != nil && time.Now().Before(l.expires) && (owner == rw.writer) == write {
		return l.holds
	}
	return 0
}

// rwWriter is the owner of the live write lease of the RWMutex k, "" if
// none.
func (d *diffRun) rwWriter(k *keys) string {
	s := d.mem.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if rw := s.rw[k.lock]; rw != nil && rw.writer != "" {
		if l := rw.leases[rw.writer]; l != nil && time.Now().Before(l.expires) {
			return rw.writer
		}
	}
	return ""
}

// rwOwners are the owners of the live write (write) or read leases of the
// RWMutex k, sorted.
func (d *diffRun) rwOwners(k *keys, write bool) []string {
	s := d.mem.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	if rw := s.rw[k.lock]; rw != nil {
		for o, l := range rw.leases {
			if time.Now().Before(l.expires) && (o == rw.writer) == write {
				out = append(out, o)
			}
		}
	}
	slices.Sort(out)
	return out
}

// semOwners are the owners of the live permits of the Semaphore k, sorted.
func (d *diffRun) semOwners(k *keys) []string {
	s := d.mem.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for o, p := range s.sems[k.lock] {
		if time.Now().Before(p.expires) {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// semHolds is the holds of owner's live permit of the Semaphore k, 0 if
// none.
func (d *diffRun) semHolds(k *keys, owner string) int {
	s := d.mem.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.sems[k.lock][owner]; p != nil && time.Now().Before(p.expires) {
		return p.holds
	}
	return 0
}

// ledgerHint is the ledger at key as the memory store has it.
func (d *diffRun) ledgerHint(key string) memLedger {
	s := d.mem.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if g := s.ledger[key]; g != nil {
		return memLedger{done: g.done, seen: g.seen, running: g.running, tries: g.tries, owner: g.owner}
	}
	return memLedger{}
}

// queued are the owners with a place, live or not, in the queue of the fair
// lock k, sorted.
func (d *diffRun) queued(k *keys) []string {
	s := d.mem.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	if q := s.queues[k.queue]; q != nil {
		out = slices.Sorted(maps.Keys(q.deadline))
	}
	return out
}

// The operations, one per backend method.

func (d *diffRun) acquireOp() diffOp {
	k, owner, lease := newKeys(d.prefix, d.name()), d.owner("o"), d.lease()
	h := d.mutexHolds(k, owner)
	holds := d.holdsArg(h)
	return diffOp{
		desc:  fmt.Sprintf("acquire(%s, %s, lease %v, holds %d)", k.name, owner, lease, holds),
		short: lease == diffShort,
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			r, err := be.acquire(ctx, k, owner, lease, holds)
			a.err(err)
			a.reply(k, r.status, r.value)
			return a
		},
	}
}

func (d *diffRun) renewOp() diffOp {
	k, lease := newKeys(d.prefix, d.name()), d.lease()
	owner := d.ownerOf(d.mutexOwners(k), "o")
	return diffOp{
		desc:  fmt.Sprintf("renew(%s, %s, lease %v)", k.name, owner, lease),
		short: lease == diffShort,
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			ok, err := be.renew(ctx, k, owner, lease)
			a.err(err)
			a.exact("renewed", ok)
			return a
		},
	}
}

func (d *diffRun) releaseOp() diffOp {
	k := newKeys(d.prefix, d.name())
	owner := d.ownerOf(d.mutexOwners(k), "o")
	holds, drop := d.releaseArgs(d.mutexHolds(k, owner))
	return diffOp{
		desc: fmt.Sprintf("release(%s, %s, holds %d, drop %d)", k.name, owner, holds, drop),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, err := be.release(ctx, k, owner, holds, drop)
			a.err(err)
			a.exact("status", n)
			return a
		},
	}
}

func (d *diffRun) forceUnlockOp() diffOp {
	k := newKeys(d.prefix, d.name())
	return diffOp{
		desc: fmt.Sprintf("forceUnlock(%s)", k.name),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, err := be.forceUnlock(ctx, k)
			a.err(err)
			a.exact("status", n)
			return a
		},
	}
}

func (d *diffRun) claimOp() diffOp {
	g := d.ledger()
	k, owner, lease := g.m.k, d.owner("c"+g.id), d.lease()
	st := d.ledgerHint(g.key)
	tick := max(st.done+int64(d.rng.IntN(5))-1, 1)
	var fc claimArgs
	if d.rng.IntN(5) < 2 {
		fc = claimArgs{fair: true, place: d.place(), wait: d.rng.IntN(3)}
	}
	// The definition the claim records: none, or one of two versions.
	fc.def = [...]string{"", "v1", "v2"}[d.rng.IntN(3)]
	// A claim that replaces (overlap replace) records its tick when it
	// finds the lock held for an earlier one.
	fc.replace = d.rng.IntN(3) == 0
	if d.rng.IntN(4) == 0 {
		owner += BackfillOwnerTag // a backfill's claim: others wait for its hold
	}
	return diffOp{
		desc:  fmt.Sprintf("claim(%s, ledger %s, %s, lease %v, tick %d, args %+v)", k.name, g.id, owner, lease, tick, fc),
		short: lease == diffShort || fc.place == diffShort,
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			r, err := be.claim(ctx, k, g.key, owner, lease, tick, fc)
			a.err(err)
			a.reply(k, r.status, r.value)
			a.exact("try", r.try)
			a.exact("extra", r.extra)
			a.exact("from", r.from)
			a.exact("definition", r.def)
			a.exact("definition by", r.defOwner)
			a.near("at", r.at)
			// The request's record, but for its time (each store's clock).
			p, _ := requestParams(r.req)
			a.exact("request params", p)
			a.exact("request recorded", r.req != "")
			a.exact("held by a backfill", r.byBackfill)
			return a
		},
	}
}

func (d *diffRun) finishOp() diffOp {
	// Mostly the finish of a claim under way, by its owner: one that holds
	// the lock, or whose lease ran out (a late finish) while the lock is
	// free.
	var claims []*diffLedger
	for _, g := range d.ledgers {
		st, o := d.ledgerHint(g.plain.key), d.mutexOwners(g.plain.m.k)
		if st.running > st.done && (len(o) == 0 || o[0] == st.owner) {
			claims = append(claims, g)
		}
	}
	g := d.ledger()
	if len(claims) > 0 && d.rng.IntN(5) < 4 {
		g = claims[d.rng.IntN(len(claims))].plain
		if d.rng.IntN(5) < 2 {
			g = claims[slices.IndexFunc(claims, func(x *diffLedger) bool { return x.plain == g })].fair
		}
	}
	k, st := g.m.k, d.ledgerHint(g.key)
	owner, tick := st.owner, st.running
	if owner == "" || d.rng.IntN(5) == 0 {
		owner = d.owner("c" + g.id)
	}
	if tick == 0 || d.rng.IntN(5) == 0 {
		tick = max(st.done+int64(d.rng.IntN(4))-1, 1)
	}
	holds := d.holdsArg(d.mutexHolds(k, owner))
	outcome := []string{"ok", "failed", "skipped"}[d.rng.IntN(3)]
	rec := Record{Done: d.rng.IntN(4) != 0, Outcome: outcome, Tries: int(st.tries), Seen: tick + int64(d.rng.IntN(2)), Chain: d.rng.IntN(2) == 0}
	// The failures in a row: the outcome's, and a pause after 1 to 3 of
	// them, or none.
	rec.Failed, rec.Succeeded = outcome == "failed", outcome == "ok"
	if n := d.rng.IntN(4); rec.Failed && n > 0 {
		rec.PauseAfter, rec.Pause = n, PauseInfo{By: "replica:" + owner, Note: fmt.Sprintf("paused after %d", n)}
	}
	if d.rng.IntN(10) < 7 {
		rec.Entry = map[string]string{"tick": strconv.FormatInt(tick, 10), "outcome": outcome}
		d.skipCause(rec.Entry)
		// A manual run's params (the chain record carries them), or an
		// entry whose params do not parse.
		switch d.rng.IntN(4) {
		case 0:
			rec.Entry["params"] = `{"customer":"7","day":"mon"}`
		case 1:
			rec.Entry["params"] = "not json"
		}
	}
	return diffOp{
		desc: fmt.Sprintf("finish(%s, ledger %s fair %t, %s, holds %d, tick %d, %+v)", k.name, g.id, g.fair, owner, holds, tick, rec),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, err := be.finish(ctx, k, g.ref(), owner, holds, tick, rec.args())
			a.err(err)
			a.exact("status", n)
			return a
		},
	}
}

func (d *diffRun) ledgerPassOp() diffOp {
	g := d.ledger()
	var upTo int64 // 0: append alone
	if d.rng.IntN(5) != 0 {
		upTo = max(d.ledgerHint(g.key).seen+int64(d.rng.IntN(4))-1, 1)
	}
	var entry map[string]string
	if d.rng.IntN(10) < 7 {
		entry = map[string]string{"passed": strconv.FormatInt(upTo, 10), "tick": strconv.FormatInt(upTo, 10)}
		if d.skipCause(entry) {
			entry["outcome"] = []string{"skipped", "paused", "excluded"}[d.rng.IntN(3)]
		}
	}
	var settled time.Duration // the ticks are ms since 1970: long past
	if d.rng.IntN(4) == 0 {
		settled = 200 * 365 * 24 * time.Hour // not past on any clock
	}
	return diffOp{
		desc: fmt.Sprintf("ledgerPass(%s, up to %d, settled %v, %v)", g.key, upTo, settled, entry),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, err := be.ledgerPass(ctx, g.ref(), upTo, settled, entry)
			a.err(err)
			a.exact("status", n)
			return a
		},
	}
}

// skipCause gives entry, half the time, the field skip (one of two
// causes), so that the histories coalesce consecutive skips; it reports
// whether it did.
func (d *diffRun) skipCause(entry map[string]string) bool {
	if d.rng.IntN(2) == 0 {
		return false
	}
	entry["skip"] = []string{"busy:r1", "busy:r2"}[d.rng.IntN(2)]
	return true
}

func (d *diffRun) historyOp() diffOp {
	g := d.ledger()
	limit, page := 1+d.rng.IntN(6), d.rng.IntN(4)
	return diffOp{
		desc: fmt.Sprintf("history(%s, limit %d, before the newest entry %d)", g.HistoryKey(), limit, page),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			// Entry ids are each backend's own: the page starts before
			// this backend's entry of the same place.
			all, err := be.history(ctx, g.ref(), 100, "")
			a.entries("all", all, err)
			before := ""
			if page > 0 && page <= len(all) {
				before = all[page-1].ID
			}
			ents, err := be.history(ctx, g.ref(), limit, before)
			a.entries("page", ents, err)
			return a
		},
	}
}

func (d *diffRun) chainRunsOp() diffOp {
	g := d.ledger()
	after := max(d.ledgerHint(g.key).done-int64(d.rng.IntN(4)), 0)
	return diffOp{
		desc: fmt.Sprintf("chainRuns(%s, after %d)", g.key, after),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			runs, err := be.chainRuns(ctx, g.key, after)
			a.err(err)
			a.exact("runs", len(runs))
			for i, r := range runs {
				a.exact(fmt.Sprintf("run %d", i), fmt.Sprintf("%d %s %q %v", r.Tick, r.Outcome, r.RunTick, r.Params))
				a.near(fmt.Sprintf("run %d at", i), r.At.UnixMilli())
			}
			return a
		},
	}
}

func (d *diffRun) chainFloorOp() diffOp {
	g := d.ledger()
	return diffOp{
		desc: fmt.Sprintf("chainFloor(%s)", g.key),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			ms, err := be.chainFloor(ctx, g.key)
			a.err(err)
			a.near("floor", ms)
			return a
		},
	}
}

func (d *diffRun) ledgerPauseOp() diffOp {
	g, paused := d.ledger(), d.rng.IntN(10) < 3
	// A pause with no end, an end far off, or one in the past (refused);
	// ends that pass during the run are the tests' (TestPauseUntil).
	p := pauseArgs{by: d.owner("p"), note: [...]string{"", "release freeze", "see INC-1"}[d.rng.IntN(3)]}
	switch d.rng.IntN(3) {
	case 1:
		p.until = time.Now().Add(time.Hour).UnixMilli()
	case 2:
		p.until = time.Now().Add(-time.Hour).UnixMilli()
	}
	return diffOp{
		desc: fmt.Sprintf("ledgerPause(%s, %t, %+v)", g.key, paused, p),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			ok, err := be.ledgerPause(ctx, g.key, paused, p)
			a.err(err)
			a.exact("ok", ok)
			return a
		},
	}
}

func (d *diffRun) ledgerTriggerOp() diffOp {
	g, runs := d.ledger(), d.ledger()
	// Now and then the last request again, as a client's retry after a
	// lost reply: it counts nothing.
	id := fmt.Sprintf("req%d", d.rng.IntN(1<<30))
	if d.trigger != "" && d.rng.IntN(4) == 0 {
		id = d.trigger
	}
	d.trigger = id
	// Unordered (no params), ordered without params, ordered with some.
	params := [...]string{"", "{}", fmt.Sprintf(`{"customer":"%d"}`, d.rng.IntN(100))}[d.rng.IntN(3)]
	return diffOp{
		desc: fmt.Sprintf("ledgerTrigger(%s, %s, %s, %q)", g.key, runs.key, id, params),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, err := be.ledgerTrigger(ctx, g.key, runs.key, id, params)
			a.err(err)
			a.exact("triggers", n)
			return a
		},
	}
}

func (d *diffRun) ledgerParamsOp() diffOp {
	g := d.ledger()
	n := int64(d.rng.IntN(8))
	return diffOp{
		desc: fmt.Sprintf("ledgerParams(%s, %d)", g.key, n),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			rec, err := be.ledgerParams(ctx, g.key, n)
			a.err(err)
			// The record's time is each store's own clock.
			p, _ := requestParams(rec)
			a.exact("params", p)
			a.exact("recorded", rec != "")
			a.exact("ordered", requestOrdered(rec))
			return a
		},
	}
}

func (d *diffRun) ledgerReplaceOp() diffOp {
	g := d.ledger()
	return diffOp{
		desc: fmt.Sprintf("ledgerReplace(%s)", g.key),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, err := be.ledgerReplace(ctx, g.key)
			a.err(err)
			a.exact("replace", n)
			return a
		},
	}
}

func (d *diffRun) ledgerOp() diffOp {
	g := d.ledger()
	return diffOp{
		desc: fmt.Sprintf("ledger(%s)", g.key),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			f, held, err := be.ledger(ctx, g.m.k, g.key)
			a.err(err)
			a.exact("held", held)
			a.ledgerFields(f)
			return a
		},
	}
}

func (d *diffRun) fairAcquireOp() diffOp {
	k, owner, lease, place := newKeys(d.prefix, d.name()), d.owner("o"), d.lease(), d.place()
	enqueue := d.rng.IntN(10) < 7
	return diffOp{
		desc:  fmt.Sprintf("fairAcquire(%s, %s, lease %v, place %v, enqueue %t)", k.name, owner, lease, place, enqueue),
		short: lease == diffShort || place == diffShort,
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			r, err := be.fairAcquire(ctx, k, owner, lease, place, enqueue)
			a.err(err)
			a.reply(k, r.status, r.value)
			a.exact("position", r.pos)
			return a
		},
	}
}

func (d *diffRun) fairReleaseOp() diffOp {
	k := newKeys(d.prefix, d.name())
	owner := d.ownerOf(d.mutexOwners(k), "o")
	holds, drop := d.releaseArgs(d.mutexHolds(k, owner))
	return diffOp{
		desc: fmt.Sprintf("fairRelease(%s, %s, holds %d, drop %d)", k.name, owner, holds, drop),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, head, err := be.fairRelease(ctx, k, owner, holds, drop)
			a.err(err)
			a.exact("status", n)
			a.exact("woken", head)
			return a
		},
	}
}

func (d *diffRun) fairLeaveOp() diffOp {
	k := newKeys(d.prefix, d.name())
	owner := d.ownerOf(d.queued(k), "o")
	return diffOp{
		desc: fmt.Sprintf("fairLeave(%s, %s)", k.name, owner),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			head, err := be.fairLeave(ctx, k, owner)
			a.err(err)
			a.exact("woken", head)
			return a
		},
	}
}

// rwRole is the owner role of an RWMutex lease.
func rwRole(write bool) string {
	if write {
		return "w"
	}
	return "r"
}

func (d *diffRun) rwAcquireOp() diffOp {
	k, write, lease := rwKeys(d.prefix, d.name()), d.rng.IntN(2) == 0, d.lease()
	owner := d.owner(rwRole(write))
	h := d.rwHolds(k, write, owner)
	holds := d.holdsArg(h)
	var writer string // a reader's own write lease, which lets it in
	var mark time.Duration
	if write {
		if d.rng.IntN(10) < 7 {
			mark = d.lease()
		}
	} else if x := d.rng.IntN(10); x < 3 {
		writer = d.rwWriter(k)
	} else if x < 4 {
		writer = d.owner("w")
	}
	return diffOp{
		desc: fmt.Sprintf("rwAcquire(%s, %s, write %t, lease %v, holds %d, writer %q, mark %v)",
			k.name, owner, write, lease, holds, writer, mark),
		short: lease == diffShort || mark == diffShort,
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			r, err := be.rwAcquire(ctx, k, owner, write, lease, holds, writer, mark, diffMaxSleep)
			a.err(err)
			a.reply(k, r.status, r.value)
			return a
		},
	}
}

func (d *diffRun) rwRenewOp() diffOp {
	k, write, lease := rwKeys(d.prefix, d.name()), d.rng.IntN(2) == 0, d.lease()
	owner := d.ownerOf(d.rwOwners(k, write), rwRole(write))
	return diffOp{
		desc:  fmt.Sprintf("rwRenew(%s, %s, write %t, lease %v)", k.name, owner, write, lease),
		short: lease == diffShort,
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			ok, err := be.rwRenew(ctx, k, owner, write, lease)
			a.err(err)
			a.exact("renewed", ok)
			return a
		},
	}
}

func (d *diffRun) rwReleaseOp() diffOp {
	k, write := rwKeys(d.prefix, d.name()), d.rng.IntN(2) == 0
	owner := d.ownerOf(d.rwOwners(k, write), rwRole(write))
	holds, drop := d.releaseArgs(d.rwHolds(k, write, owner))
	return diffOp{
		desc: fmt.Sprintf("rwRelease(%s, %s, write %t, holds %d, drop %d)", k.name, owner, write, holds, drop),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, published, err := be.rwRelease(ctx, k, owner, write, holds, drop)
			a.err(err)
			a.exact("status", n)
			a.exact("published", published)
			return a
		},
	}
}

func (d *diffRun) rwLeaveOp() diffOp {
	k, owner := rwKeys(d.prefix, d.name()), d.owner("w")
	return diffOp{
		desc: fmt.Sprintf("rwLeave(%s, %s)", k.name, owner),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			published, err := be.rwLeave(ctx, k, owner)
			a.err(err)
			a.exact("published", published)
			return a
		},
	}
}

func (d *diffRun) rwForceUnlockOp() diffOp {
	k := rwKeys(d.prefix, d.name())
	return diffOp{
		desc: fmt.Sprintf("rwForceUnlock(%s)", k.name),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, err := be.rwForceUnlock(ctx, k)
			a.err(err)
			a.exact("status", n)
			return a
		},
	}
}

func (d *diffRun) semAcquireOp() diffOp {
	i := d.rng.IntN(len(diffNames))
	k, owner, lease := semKeys(d.prefix, diffNames[i]), d.owner("o"), d.lease()
	h := d.semHolds(k, owner)
	holds := d.holdsArg(h)
	permits := 1 + i // each name its own count, now and then another
	if d.rng.IntN(10) == 0 {
		permits = 1 + d.rng.IntN(3)
	}
	return diffOp{
		desc:  fmt.Sprintf("semAcquire(%s, %s, lease %v, holds %d, permits %d)", k.name, owner, lease, holds, permits),
		short: lease == diffShort,
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			r, err := be.semAcquire(ctx, k, owner, lease, holds, permits)
			a.err(err)
			a.reply(k, r.status, r.value)
			return a
		},
	}
}

func (d *diffRun) semRenewOp() diffOp {
	k, lease := semKeys(d.prefix, d.name()), d.lease()
	owner := d.ownerOf(d.semOwners(k), "o")
	return diffOp{
		desc:  fmt.Sprintf("semRenew(%s, %s, lease %v)", k.name, owner, lease),
		short: lease == diffShort,
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			ok, err := be.semRenew(ctx, k, owner, lease)
			a.err(err)
			a.exact("renewed", ok)
			return a
		},
	}
}

// renewAllOp renews one to four leases of the three kinds in one batch,
// each lease once, as the renewer's batches hold them. (A lease twice in
// one batch, with a lease of a millisecond, could find itself expired on
// Redis, which runs the batch's scripts one after another, and renewed on
// the memory store, which runs them in the same instant.)
func (d *diffRun) renewAllOp() diffOp {
	lease := d.lease()
	var rs []renewing
	var desc []string
	for range 1 + d.rng.IntN(4) {
		var r renewing
		var what string
		switch d.rng.IntN(3) {
		case 0:
			k := newKeys(d.prefix, d.name())
			owner := d.ownerOf(d.mutexOwners(k), "o")
			r = renewing{kind: mutexKind{}, k: k, owner: owner, lease: lease}
			what = fmt.Sprintf("mutex %s %s", k.name, owner)
		case 1:
			k, write := rwKeys(d.prefix, d.name()), d.rng.IntN(2) == 0
			owner := d.ownerOf(d.rwOwners(k, write), rwRole(write))
			r = renewing{kind: rwKind{write: write}, k: k, owner: owner, lease: lease}
			what = fmt.Sprintf("rw %s %s write %t", k.name, owner, write)
		default:
			k := semKeys(d.prefix, d.name())
			owner := d.ownerOf(d.semOwners(k), "o")
			r = renewing{kind: semKind{}, k: k, owner: owner, lease: lease}
			what = fmt.Sprintf("sem %s %s", k.name, owner)
		}
		if !slices.Contains(desc, what) {
			rs, desc = append(rs, r), append(desc, what)
		}
	}
	return diffOp{
		desc:  fmt.Sprintf("renewAll(%s, lease %v)", strings.Join(desc, "; "), lease),
		short: lease == diffShort,
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			mine := slices.Clone(rs)
			be.renewAll(ctx, mine)
			for _, r := range mine {
				a.err(r.err)
				a.exact("renewed", r.ok)
			}
			return a
		},
	}
}

func (d *diffRun) semReleaseOp() diffOp {
	k := semKeys(d.prefix, d.name())
	owner := d.ownerOf(d.semOwners(k), "o")
	holds, drop := d.releaseArgs(d.semHolds(k, owner))
	return diffOp{
		desc: fmt.Sprintf("semRelease(%s, %s, holds %d, drop %d)", k.name, owner, holds, drop),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, err := be.semRelease(ctx, k, owner, holds, drop)
			a.err(err)
			a.exact("status", n)
			return a
		},
	}
}

func (d *diffRun) semForceUnlockOp() diffOp {
	k := semKeys(d.prefix, d.name())
	return diffOp{
		desc: fmt.Sprintf("semForceUnlock(%s)", k.name),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, err := be.semForceUnlock(ctx, k)
			a.err(err)
			a.exact("status", n)
			return a
		},
	}
}

func (d *diffRun) locksOp() diffOp {
	return diffOp{
		desc: fmt.Sprintf("locks(%s)", d.prefix),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			infos, err := be.locks(ctx, d.prefix)
			a.err(err)
			a.locks(d.prefix, infos)
			return a
		},
	}
}

func (d *diffRun) membersOp() diffOp {
	member, ttl := d.owner("o"), d.lease()
	if d.rng.IntN(5) == 0 {
		ttl = 0 // leave
	}
	return diffOp{
		desc:  fmt.Sprintf("members(%s, %s, ttl %v)", d.group, member, ttl),
		short: ttl == diffShort,
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			m, err := be.members(ctx, d.group, member, ttl)
			a.err(err)
			slices.Sort(m) // the order is the caller's (Client.Heartbeat)
			a.exact("others", strings.Join(slices.DeleteFunc(slices.Clone(m), func(x string) bool { return x == member }), " "))
			a.exact("member", slices.Contains(m, member))
			return a
		},
	}
}

func (d *diffRun) freezesOp() diffOp {
	key := d.prefix + ":freezes:{freezes}"
	k := freezeKeys{key: key, seq: key + ":seq", reqs: key + ":requests"}
	op, nonce, args := "list", "", []string(nil)
	switch d.rng.IntN(4) {
	case 0:
		until := time.Now().Add(diffLease) // not at its end before the run's
		if d.rng.IntN(4) == 0 {
			until = time.Now().Add(-diffLease) // refused
		}
		op, nonce, args = "add", d.name()+"-n"+strconv.Itoa(d.rng.IntN(1<<30)), []string{strconv.FormatInt(until.UnixMilli(), 10), d.name() + "*", "note\nof " + d.name()}
	case 1:
		op, nonce, args = "del", d.name()+"-n"+strconv.Itoa(d.rng.IntN(1<<30)), []string{"f" + strconv.Itoa(1+d.rng.IntN(4))}
	case 2:
		if d.freeze != nil { // a retry: answered as the call it repeats
			op, nonce, args = d.freeze[0].(string), d.freeze[1].(string), d.freeze[2].([]string)
		}
	}
	if op != "list" {
		d.freeze = &[3]any{op, nonce, args}
	}
	return diffOp{
		desc: fmt.Sprintf("freezes(%s, %s, %s, %q)", key, op, nonce, args),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			st, now, rest, err := be.freezes(ctx, k, op, nonce, args...)
			a.err(err)
			a.exact("status", st)
			a.near("now", now-time.Now().UnixMilli())
			var list []string
			for i := 0; i+1 < len(rest); i += 2 {
				p := strings.SplitN(rest[i+1], "\n", 3) // until, created (the backend's clock), the rest
				if len(p) == 3 {
					list = append(list, rest[i]+" "+p[0]+" "+p[2])
				}
			}
			if op == "add" && len(rest) == 2 {
				created, _ := strconv.ParseInt(rest[1], 10, 64)
				a.near("created", created-time.Now().UnixMilli())
				list = rest[:1]
			} else if op != "list" {
				list = rest
			}
			slices.Sort(list) // a hash's order is the backend's
			a.exact("reply", strings.Join(list, "|"))
			return a
		},
	}
}

// replicasOp reads the replicas' reports, or records one: live for a
// lease, or stopped. None runs out in a run, none is dropped (keep is a
// lease): TestReplicaReports sees them go.
// reportReplicaOp reports a replica, live or stopped, from one of two
// processes (nonces): a live report of a process after its stop is
// ignored, one of the other process is not.
func (d *diffRun) reportReplicaOp() diffOp {
	key := d.prefix + ":replicas"
	id, nonce, ttl, report := d.owner("o"), fmt.Sprintf("n%d", d.rng.IntN(2)), diffLease, fmt.Sprintf("report %d", d.rng.IntN(3))
	if d.rng.IntN(3) == 0 {
		ttl = 0 // stopped
	}
	return diffOp{
		desc: fmt.Sprintf("reportReplica(%s, %q, %s, %q, ttl %v)", key, id, nonce, report, ttl),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			a.err(be.reportReplica(ctx, key, key+":drop", id, nonce, report, ttl, diffLease))
			return a
		},
	}
}

func (d *diffRun) replicasOp() diffOp {
	key := d.prefix + ":replicas"
	return diffOp{
		desc: fmt.Sprintf("replicas(%s)", key),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			rs, err := be.replicas(ctx, key, key+":drop")
			a.err(err)
			slices.SortFunc(rs, func(x, y ReplicaReport) int { return strings.Compare(x.ID, y.ID) }) // the order is the caller's (Client.replicas)
			a.exact("replicas", len(rs))
			for _, r := range rs {
				a.exact(r.ID, fmt.Sprintf("%q stopped=%t gone=%t", r.Report, r.Stopped, !r.Gone.IsZero()))
				a.near(r.ID+" seen", r.Seen.UnixMilli())
				a.near(r.ID+" started", r.Started.UnixMilli())
			}
			return a
		},
	}
}

func (d *diffRun) publishOp() diffOp {
	k := newKeys(d.prefix, d.name())
	return diffOp{
		desc: fmt.Sprintf("publish(%s)", k.channel),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			n, err := be.publish(ctx, k.channel, "diff")
			a.err(err)
			a.exact("receivers", n)
			return a
		},
	}
}

func (d *diffRun) pingOp() diffOp {
	return diffOp{
		desc: "ping()",
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			a.err(be.ping(ctx))
			return a
		},
	}
}

// settle waits until what the i-th operation op may have left with a short
// lifetime is over on both backends: Redis expires keys, and drops
// deadlines, on its clock; the memory store on this process's.
func (d *diffRun) settle(ctx context.Context, i int, op diffOp) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		done, err := d.redisSettled(ctx)
		if err != nil {
			d.t.Fatalf("seed %d: operation %d: %s: reading Redis: %v", d.seed, i, op.desc, err)
		}
		if done && d.memSettled() {
			return
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("seed %d: operation %d: %s: its %v lifetimes not over after 5s (redis %t)", d.seed, i, op.desc, diffShort, done)
		}
		time.Sleep(diffShort) // a poll
	}
}

// redisSettled reports whether Redis has no lock, place, lease, mark or
// member left that ends within diffSoon, nor a key that expires by then.
func (d *diffRun) redisSettled(ctx context.Context) (bool, error) {
	now, err := d.rdb.Time(ctx).Result()
	if err != nil {
		return false, err
	}
	ms := now.UnixMilli()
	// A deadline of now has not passed for the store's keys (a key
	// expires after its time), so it counts.
	from, to := strconv.FormatInt(ms, 10), strconv.FormatInt(ms+diffSoon.Milliseconds(), 10)
	var pttls []*redis.DurationCmd
	var counts []*redis.IntCmd
	var deadlines []*redis.StringCmd
	cmds, _ := d.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		zsets := []string{d.group}
		keys := []string{d.group}
		for _, name := range diffNames {
			m, rw, sem := newKeys(d.prefix, name), rwKeys(d.prefix, name), semKeys(d.prefix, name)
			deadlines = append(deadlines, p.HGet(ctx, rw.lock, "deadline"))
			zsets = append(zsets, m.timeout, rw.readers, rw.writerWaiting, sem.lock)
			keys = append(keys, m.lock, m.queue, m.timeout, rw.lock, rw.readers, rw.writerWaiting, sem.lock, sem.holds, semTokens(sem))
		}
		for _, z := range zsets {
			counts = append(counts, p.ZCount(ctx, z, from, to))
		}
		for _, key := range keys {
			pttls = append(pttls, p.PTTL(ctx, key))
		}
		return nil
	})
	for _, c := range cmds {
		if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) { // Nil: no write lease
			return false, err
		}
	}
	for _, c := range pttls {
		if v := c.Val(); v >= 0 && v < diffSoon {
			return false, nil
		}
	}
	for _, c := range deadlines {
		if v, err := strconv.ParseInt(c.Val(), 10, 64); err == nil && v >= ms && v <= ms+diffSoon.Milliseconds() {
			return false, nil
		}
	}
	for _, c := range counts {
		if c.Val() > 0 {
			return false, nil
		}
	}
	return true, nil
}

// memSettled reports whether the memory store has no lock, place, lease,
// mark or member left that ends within diffSoon.
func (d *diffRun) memSettled() bool {
	s := d.mem.s
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	soon := func(t time.Time) bool { return now.Before(t) && t.Sub(now) < diffSoon }
	for _, l := range s.locks {
		if soon(l.expires) {
			return false
		}
	}
	for _, q := range s.queues {
		for _, t := range q.deadline {
			if soon(t) {
				return false
			}
		}
	}
	for _, rw := range s.rw {
		for _, l := range rw.leases {
			if soon(l.expires) {
				return false
			}
		}
		for _, t := range rw.marks {
			if soon(t) {
				return false
			}
		}
	}
	for _, m := range s.sems {
		for _, p := range m {
			if soon(p.expires) {
				return false
			}
		}
	}
	for _, g := range s.groups {
		for _, t := range g {
			if soon(t) {
				return false
			}
		}
	}
	return true
}

// Answers.

// diffKind is how two values of an answer compare.
type diffKind int

const (
	diffExact diffKind = iota // equal
	diffToken                 // fencing tokens: see delta
	diffNear                  // milliseconds (TTLs, sleeps, times): within diffTolerance
)

// diffVal is one value of an answer.
type diffVal struct {
	what string
	kind diffKind
	s    string // diffExact
	n    int64  // diffToken, diffNear
	key  string // diffToken: the counter's key
	show string // how to print it, if not s
}

// diffAnswer is what a backend answered to an operation, value by value.
type diffAnswer []diffVal

// exact adds v, which must be equal on both backends.
func (a *diffAnswer) exact(what string, v any) {
	*a = append(*a, diffVal{what: what, kind: diffExact, s: fmt.Sprint(v)})
}

// token adds fencing token n of the counter at key (see delta).
func (a *diffAnswer) token(what, key string, n int64) {
	*a = append(*a, diffVal{what: what, kind: diffToken, n: n, key: key})
}

// near adds ms milliseconds: a TTL, a sleep or a time on the backend's
// clock, equal within diffTolerance.
func (a *diffAnswer) near(what string, ms int64) {
	*a = append(*a, diffVal{what: what, kind: diffNear, n: ms})
}

// err adds err as the sentinel error it wraps: the backends' messages
// differ.
func (a *diffAnswer) err(err error) {
	class := "nil"
	if err != nil {
		class = "error"
		for _, s := range []error{ErrBadKey, ErrLocked, ErrNotHeld, ErrLockLost, ErrReleased, ErrClosed, ErrInvalid,
			ErrUpgrade, ErrDone, ErrPaused, context.Canceled, context.DeadlineExceeded} {
			if errors.Is(err, s) {
				class = s.Error()
				break
			}
		}
	}
	show := class
	if err != nil {
		show = fmt.Sprintf("%q (%s)", err.Error(), class)
	}
	*a = append(*a, diffVal{what: "error", kind: diffExact, s: class, show: show})
}

// reply adds a script's {status, value}: the value is a fencing token
// when acquired, a TTL or a sleep when held or waiting, else a number
// (a hold count, a tick).
func (a *diffAnswer) reply(k *keys, status, value int64) {
	a.exact("status", status)
	switch status {
	case acqAcquired:
		a.token("token", k.token, value)
	case acqHeld:
		a.near("ms", value)
	default:
		a.exact("value", value)
	}
}

// entries adds a history listing: entry ids are the backends' own, and
// their times are on the backends' clocks.
func (a *diffAnswer) entries(what string, ents []Entry, err error) {
	a.err(err)
	a.exact(what+" entries", len(ents))
	for i, e := range ents {
		a.exact(fmt.Sprintf("%s %d fields", what, i), e.Fields) // fmt sorts a map's keys
		a.near(fmt.Sprintf("%s %d time", what, i), e.Time.UnixMilli())
	}
}

// ledgerFields adds a ledger's fields as Ledger.State reads them: a field
// that is absent reads as empty or 0, and the memory store does not list
// from (claim's reply carries it). since and at:<outcome> are times.
func (a *diffAnswer) ledgerFields(f map[string]string) {
	num := func(k string) int64 { n, _ := strconv.ParseInt(f[k], 10, 64); return n }
	for _, k := range []string{"done", "seen", "running", "tries", "triggers", "replace"} {
		a.exact(k, num(k))
	}
	for _, k := range []string{"owner", "outcome", "finished"} {
		a.exact(k, f[k])
	}
	a.exact("paused", f["paused"] == "1")
	a.exact("failures", num("failures"))
	for _, k := range []string{"pausedby", "pausenote", "pauseduntil", "pausefinish"} {
		a.exact(k, f[k])
	}
	a.near("pausedat", num("pausedat"))
	a.near("since", num("since"))
	var at []string
	for k := range f {
		if strings.HasPrefix(k, "at:") {
			at = append(at, k)
		}
	}
	slices.Sort(at)
	a.exact("at", at)
	for _, k := range at {
		a.near(k, num(k))
	}
}

// locks adds a listing of locks, in Client.Locks's order.
func (a *diffAnswer) locks(prefix string, infos []LockInfo) {
	for i := range infos {
		slices.SortFunc(infos[i].Holders, compareInspectHolders)
	}
	slices.SortFunc(infos, func(x, y LockInfo) int {
		return cmp.Or(strings.Compare(x.Name, y.Name), strings.Compare(x.Kind, y.Kind))
	})
	a.exact("locks", len(infos))
	for _, info := range infos {
		p, token := info.Name+" "+info.Kind, newKeys(prefix, info.Name).token
		a.exact("lock", p)
		a.near(p+" ttl", info.TTL.Milliseconds())
		if info.Kind == kindSemaphore {
		}
		a.token(p+" token", token, info.Token)
		a.exact(p+" waiters", info.Waiters)
		a.exact(p+" err", info.Err != nil)
		a.exact(p+" holders", len(info.Holders))
		for _, h := range info.Holders {
			a.exact(p+" holder", h.Owner+" "+h.Mode)
			a.exact(p+" "+h.Owner+" holds", h.Holds)
			a.token(p+" "+h.Owner+" token", token, h.Token)
			a.near(p+" "+h.Owner+" ttl", h.TTL.Milliseconds())
		}
	}
}

// differ returns what differs between Redis's answer r and the memory
// store's m, or "" if they agree.
func (d *diffRun) differ(r, m diffAnswer) string {
	for i := range max(len(r), len(m)) {
		if i >= len(r) || i >= len(m) {
			return fmt.Sprintf("the number of values (%d, %d)", len(r), len(m))
		}
		x, y := r[i], m[i]
		switch {
		case x.what != y.what || x.kind != y.kind:
			return fmt.Sprintf("value %d (%s, %s)", i, x.what, y.what)
		case x.kind == diffToken:
			if d.delta(0, x) == d.delta(1, y) {
				continue
			}
			return x.what
		case x.kind == diffExact && x.s != y.s,
			x.kind == diffNear && max(x.n-y.n, y.n-x.n) > (diffTolerance+d.gap).Milliseconds():
			return x.what
		}
	}
	return ""
}

// delta is fencing token v of backend b (0 Redis, 1 the memory store) as
// its distance from the first token b issued on its counter. Each backend
// seeds a new counter from its own clock (microseconds), so the values
// differ, and then both add one per new lease of any kind of lock of the
// name: the distances are equal, and they, unlike the order alone, also
// catch a token issued by one backend and not the other. 0 is no token.
func (d *diffRun) delta(b int, v diffVal) string {
	if v.n == 0 {
		return "none"
	}
	base, ok := d.bases[b][v.key]
	if !ok {
		base = v.n
		d.bases[b][v.key] = base
	}
	d.last[b][v.key] = max(d.last[b][v.key], v.n)
	return fmt.Sprintf("first%+d", v.n-base)
}

// show prints answer a of backend b.
func (d *diffRun) show(b int, a diffAnswer) string {
	var out []string
	for _, v := range a {
		s := v.s
		switch {
		case v.show != "":
			s = v.show
		case v.kind == diffToken:
			s = strconv.FormatInt(v.n, 10)
			if base, ok := d.bases[b][v.key]; ok && v.n != 0 {
				s += fmt.Sprintf(" (first%+d)", v.n-base)
			}
		case v.kind == diffNear:
			s = strconv.FormatInt(v.n, 10) + "ms"
		}
		out = append(out, v.what+"="+s)
	}
	return strings.Join(out, ", ")
}

// diffReplyValues are the values of an answer, beside its status, that
// tell one reply of a method from another (see diffReplies); "woken" counts
// as true (someone) or false (no one).
var diffReplyValues = map[string]bool{"renewed": true, "published": true, "held": true, "position": true, "member": true, "ok": true}

// diffReplies are the replies that each run must meet, on both backends,
// as "method what=value": every status and outcome that each script (and
// its twin) answers. The replies about keys of another type or without a
// TTL (statuses -2, -3, -4, -6, -7, -8) are Redis's alone: the memory store
// has no such keys (the Redis tests of lock and fleet meet them: bad keys,
// wrong types).
var diffReplies = []string{
	"acquire status=1", "acquire status=0", "acquire status=-1", "acquire status=-5",
	"renew renewed=true", "renew renewed=false",
	"release status=1", "release status=2", "release status=0", "release status=-5",
	"forceUnlock status=1", "forceUnlock status=0",
	"claim status=1", "claim status=0", "claim status=2", "claim status=3",
	"finish status=1", "finish status=2", "finish status=0", "finish status=-5",
	"ledgerPause ok=true", "ledgerPause ok=false",
	"ledgerPass status=1", "ledgerPass status=0",
	"ledger held=true", "ledger held=false",
	"fairAcquire status=1", "fairAcquire status=0",
	"fairAcquire position=0", "fairAcquire position=1", "fairAcquire position=2", "fairAcquire position=-1",
	"fairRelease status=1", "fairRelease status=2", "fairRelease status=0", "fairRelease status=-5",
	"fairRelease woken=true", "fairRelease woken=false",
	"fairLeave woken=true", "fairLeave woken=false",
	"rwAcquire status=1", "rwAcquire status=0", "rwAcquire status=-1", "rwAcquire status=-5",
	"rwRenew renewed=true", "rwRenew renewed=false",
	"rwRelease status=1", "rwRelease status=2", "rwRelease status=0", "rwRelease status=-5",
	"rwRelease published=true", "rwRelease published=false",
	"rwLeave published=true", "rwLeave published=false",
	"rwForceUnlock status=1", "rwForceUnlock status=0",
	"semAcquire status=1", "semAcquire status=0", "semAcquire status=-1", "semAcquire status=-5",
	"semRenew renewed=true", "semRenew renewed=false",
	"semRelease status=1", "semRelease status=2", "semRelease status=0", "semRelease status=-5",
	"semForceUnlock status=1", "semForceUnlock status=0",
	"members member=true", "members member=false",
	"backfills status=1", "backfills status=0", "backfills status=2", "backfills status=3",
}

// backfillIndexOp adds, drops or lists the entries of the fleet's index of
// running backfills: ids from a small set.
func (d *diffRun) backfillIndexOp() diffOp {
	key := d.prefix + ":backfills:{backfills}"
	id, job := "b"+strconv.Itoa(d.rng.IntN(4)), d.name()
	op := [...]string{"add", "drop", "list"}[d.rng.IntN(3)]
	return diffOp{
		desc: fmt.Sprintf("backfillIndex(%s, %s, %s, %s)", key, op, id, job),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			now, rest, err := be.backfillIndex(ctx, key, op, id, job)
			a.err(err)
			a.near("now", now-time.Now().UnixMilli())
			fields := make([][2]string, 0, len(rest)/2)
			for i := 0; i+1 < len(rest); i += 2 {
				fields = append(fields, [2]string{rest[i], rest[i+1]})
			}
			slices.SortFunc(fields, func(x, y [2]string) int { return strings.Compare(x[0], y[0]) }) // a hash's order is the backend's
			var list []string
			for _, f := range fields {
				v := f[1]
				if j := strings.LastIndexByte(v, '/'); j >= 0 {
					n, _ := strconv.ParseInt(v[j+1:], 10, 64)
					a.near(f[0], n-time.Now().UnixMilli())
					v = v[:j]
				}
				list = append(list, f[0]+"="+v)
			}
			a.exact("reply", strings.Join(list, "|"))
			return a
		},
	}
}

// backfillsOp adds, cancels, moves on or lists the backfills of a job:
// ids from a small set, so that adds find them taken (a retry), cancels
// find them finished, and progress finds them cancelled.
func (d *diffRun) backfillsOp() diffOp {
	key := d.prefix + ":{" + d.name() + "}:backfills:job"
	id := "b" + strconv.Itoa(d.rng.IntN(8))
	op, args, pause := "list", []string(nil), ""
	switch d.rng.IntN(5) {
	case 0:
		// Two nonces: an add of a taken id is now a retry, now another's;
		// ranges that overlap a running one's are refused.
		from := 1000 * d.rng.IntN(4)
		op, args = "add", []string{"nonce", "n" + strconv.Itoa(d.rng.IntN(2)), "from", strconv.Itoa(from), "job", "job", "to", strconv.Itoa(from + d.rng.IntN(1500))}
	case 1:
		op, args = "cancel", []string{d.name()}
		pause = d.prefix + ":{" + d.name() + "}:ledger:job!backfill:" + id
	case 2, 3:
		fin := [...]string{"0", "1"}[d.rng.IntN(2)]
		op, args = "progress", []string{strconv.Itoa(d.rng.IntN(50)), strconv.Itoa(1000 + d.rng.IntN(50)), fin, strconv.Itoa(d.rng.IntN(3) * 1000)}
	}
	return diffOp{
		desc: fmt.Sprintf("backfills(%s, %s, %s, %q)", key, op, id, args),
		run: func(ctx context.Context, be diffBackend) (a diffAnswer) {
			st, now, rest, err := be.backfills(ctx, key, pause, op, id, args...)
			a.err(err)
			a.exact("status", st)
			a.near("now", now-time.Now().UnixMilli())
			if op != "list" {
				a.exact("reply", strings.Join(rest, "|"))
				return a
			}
			fields := make([][2]string, 0, len(rest)/2)
			for i := 0; i+1 < len(rest); i += 2 {
				fields = append(fields, [2]string{rest[i], rest[i+1]})
			}
			slices.SortFunc(fields, func(x, y [2]string) int { return strings.Compare(x[0], y[0]) }) // a hash's order is the backend's
			var list []string
			for _, f := range fields {
				if strings.HasSuffix(f[0], "/created") || (strings.HasSuffix(f[0], "/ended") || strings.HasSuffix(f[0], "/next")) && f[1] != "0" {
					n, _ := strconv.ParseInt(f[1], 10, 64)
					a.near(f[0], n-time.Now().UnixMilli())
					f[1] = "t"
				}
				list = append(list, f[0]+"="+f[1])
			}
			a.exact("reply", strings.Join(list, "|"))
			return a
		},
	}
}
