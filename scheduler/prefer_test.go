package scheduler_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/internal/testkit/testclock"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// claimLog records the claims a replica sends to Redis, read off its
// go-redis client's commands: every EVALSHA or EVAL of three keys (five
// for a fair lock) whose third is a job's ledger, by job and tick.
type claimLog struct {
	mu     sync.Mutex
	claims map[string]map[int64]int // job -> tick (ms) -> claims sent
}

func (h *claimLog) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *claimLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			h.note(c)
		}
		return err
	}
}
func (h *claimLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil { // older go-redis sets cmd's error after the hooks
			h.note(cmd)
		}
		return err
	}
}

// note counts cmd if it is a claim that the server ran (a NOSCRIPT reply,
// answered by an EVAL, is not counted).
func (h *claimLog) note(cmd redis.Cmder) {
	a := cmd.Args()
	if (cmd.Name() != "evalsha" && cmd.Name() != "eval") || len(a) < 10 || (cmd.Err() != nil && cmd.Err() != redis.Nil) {
		return
	}
	if n := fmt.Sprint(a[2]); n != "3" && n != "5" {
		return
	}
	nk, _ := strconv.Atoi(fmt.Sprint(a[2]))
	_, job, ok := strings.Cut(fmt.Sprint(a[5]), ":ledger:")
	if !ok || len(a) < 3+nk+4 {
		return
	}
	tick, err := strconv.ParseInt(fmt.Sprint(a[3+nk+3]), 10, 64)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.claims == nil {
		h.claims = make(map[string]map[int64]int)
	}
	if h.claims[job] == nil {
		h.claims[job] = make(map[int64]int)
	}
	h.claims[job][tick]++
}

func (h *claimLog) count(job string, tick int64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.claims[job][tick]
}

// total is how many claims of the job were sent, all ticks.
func (h *claimLog) total(job string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.claims[job] {
		n += c
	}
	return n
}

// countedReplica is a replica on srv whose claims are logged.
func countedReplica(t *testing.T, srv *redistest.Server, id string, opts ...scheduler.Option) (*replica, *claimLog) {
	t.Helper()
	rdb := srv.Client()
	h := &claimLog{}
	rdb.AddHook(h)
	c, err := lock.New(rdb, lock.WithClientID(id))
	if err != nil {
		t.Fatal(err)
	}
	return newReplica(t, c, id, opts...), h
}

// members is how many replicas the fleet's membership record holds now.
// members counts the members of every Scheduler group in the record.
func members(srv *redistest.Server) int64 {
	var n int64
	keys, _ := srv.Do("KEYS", "lockcron:members:{scheduler:*}").([]any)
	for _, k := range keys {
		c, _ := srv.Do("ZCARD", k).(int64)
		n += c
	}
	return n
}

// groupOf waits until a Scheduler has joined its group, and returns the
// group's name (fleet.Store.Heartbeat): a ghost member joins it there.
func groupOf(t *testing.T, srv *redistest.Server) string {
	t.Helper()
	var group string
	testkit.Eventually(t, 10*time.Second, "a Scheduler's group in the record", func() bool {
		keys, _ := srv.Do("KEYS", "lockcron:members:{scheduler:*}").([]any)
		if len(keys) != 1 {
			return false
		}
		k, _ := keys[0].(string)
		group = strings.TrimSuffix(strings.TrimPrefix(k, "lockcron:members:{"), "}")
		return true
	})
	return group
}

// Once every replica knows the fleet, each tick is claimed by one replica
// alone, the first in rank; the others hear it done and send no claim; and
// each replica is first for its share of the ticks.
func TestPreferredReplicaClaimsAlone(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	const nJobs, ttl = 20, 600 * time.Millisecond
	var fleet []*replica
	var logs []*claimLog
	for i := range 3 {
		// A long fallback: on a loaded machine the preferred replica
		// still finishes before the others would claim.
		r, h := countedReplica(t, srv, "r"+strconv.Itoa(i+1), scheduler.WithClaimFallback(time.Second), scheduler.WithMemberTTL(ttl))
		for k := range nJobs {
			r.add(t, scheduler.Job{Name: jobName(k), Schedule: "@every 1s", Run: j.fn(nil)})
		}
		fleet, logs = append(fleet, r), append(logs, h)
	}
	for _, r := range fleet {
		r.start()
	}
	testkit.Eventually(t, 10*time.Second, "three members in the fleet's record", func() bool { return members(srv) == 3 })
	// Every replica has heartbeated (every ttl/3) with all three in the
	// record well before this; ticks from here on are counted.
	from := time.Now().Add(ttl)
	testkit.Eventually(t, 30*time.Second, "four counted ticks of every job", func() bool {
		n := 0
		for _, x := range j.all() {
			if !x.info.Tick.Before(from) {
				n++
			}
		}
		return n >= 4*nJobs
	})
	for _, r := range fleet {
		r.stop(t)
	}
	if n := members(srv); n != 0 {
		t.Errorf("%d members left in the record after every replica stopped, want 0: a stopping replica leaves at once", n)
	}
	byJob := j.byJob()
	checkOncePerTick(t, byJob, time.Second)
	share := make([]int, len(fleet))
	ticks := 0
	for job, xs := range byJob {
		for _, x := range xs {
			if x.info.Tick.Before(from) {
				continue
			}
			ticks++
			ms := x.info.Tick.UnixMilli()
			total := 0
			for i, h := range logs {
				n := h.count(job, ms)
				total += n
				if n > 0 && fleet[i].id != x.info.Replica {
					t.Errorf("job %s tick %s: replica %s sent %d claims, but %s ran it", job, fmtMs(ms), fleet[i].id, n, x.info.Replica)
				}
				if fleet[i].id == x.info.Replica {
					share[i]++
				}
			}
			if total != 1 {
				t.Errorf("job %s tick %s: %d claims across the fleet, want 1", job, fmtMs(ms), total)
			}
		}
	}
	// Rendezvous hashing spreads the ticks: each replica is first for
	// about a third of them (a tenth is over four standard deviations
	// below, with these counts).
	for i, n := range share {
		if n*10 < ticks {
			t.Errorf("replica %s ran %d of %d ticks, want about a third", fleet[i].id, n, ticks)
		}
	}
	t.Logf("%d ticks counted; ran by replica: %v", ticks, share)
}

// A member of the record that runs nothing (a replica that died and has
// not expired yet, or one without these jobs) is first in rank for some
// ticks: those run after the fallback delay on the next in rank, and no
// tick is missed or run twice. Which ticks those are, the replicas' debug
// logs say (a claim first in rank is logged), so that the check does not
// hang on how late a loaded machine runs the others.
func TestDeadPreferredReplicaFallsBack(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	gcli := srv.Client()
	defer gcli.Close()
	gc, err := lock.New(gcli)
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	ctx := testkit.Context(t)
	ghosts := fleet.New(gc)
	j := newJournal()
	const nJobs, fallback, ttl = 6, 300 * time.Millisecond, 600 * time.Millisecond
	var fleet []*replica
	logs := newLockedWriter()
	debug := scheduler.WithLogger(hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}))
	for i := range 2 {
		r := newRedisReplica(t, srv, "r"+strconv.Itoa(i+1), nil, scheduler.WithClaimFallback(fallback), scheduler.WithMemberTTL(ttl), debug)
		for k := range nJobs {
			r.add(t, scheduler.Job{Name: jobName(k), Schedule: "@every 1s", Run: j.fn(nil)})
		}
		fleet = append(fleet, r)
	}
	for _, r := range fleet {
		r.start()
	}
	if _, err := ghosts.Heartbeat(ctx, groupOf(t, srv), "ghost#dead", time.Hour); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "three members in the fleet's record", func() bool { return members(srv) == 3 })
	from := time.Now().Add(ttl) // every replica knows the three members by then
	// The ticks no replica claimed as first in rank: the ghost was first.
	counted := func() (int, []execution) { return notFirst(j, logs, from) }
	// The ghost is first for about a third of the ticks: wait for some.
	testkit.Eventually(t, 60*time.Second, "ticks the ghost was first for", func() bool {
		n, ghost := counted()
		return n >= 4*nJobs && len(ghost) >= 3
	})
	for _, r := range fleet {
		r.stop(t)
	}
	checkOncePerTick(t, j.byJob(), time.Second)
	n, ghost := counted()
	for _, x := range ghost {
		if late := x.start.Sub(x.info.Tick); late < fallback {
			t.Errorf("job %s: tick %s, the ghost's, ran %v after it on %s, before the fallback (%v)", x.info.Job, fmtMs(x.info.Tick.UnixMilli()), late, x.info.Replica, fallback)
		}
	}
	// The ghost is one of three members: first for about a third of the
	// ticks; for two thirds or more, the ranking would be wrong (a chance
	// of about 1 in 5,000 at 24 ticks).
	if 3*len(ghost) > 2*n {
		t.Errorf("the ghost was first for %d of %d ticks; it should be for about a third", len(ghost), n)
	}
	t.Logf("%d ticks counted, the ghost first for %d", n, len(ghost))
}

// firstInRank matches the debug line of a claim first in rank.
var firstInRank = regexp.MustCompile(`tick claimed: first in rank: job=(\S+) tick=(\S+)`)

// notFirst counts the runs in j of ticks from from on, and returns those
// of them that no replica logged (logs, at debug level) as claimed first in
// rank: a member that does not run the job was first.
func notFirst(j *journal, logs *lockedWriter, from time.Time) (n int, notFirst []execution) {
	preferred := map[string]bool{}
	for _, m := range firstInRank.FindAllStringSubmatch(logs.String(), -1) {
		preferred[m[1]+" "+m[2]] = true
	}
	for _, x := range j.all() {
		if x.info.Tick.Before(from) {
			continue
		}
		n++
		if !preferred[x.info.Job+" "+x.info.Tick.UTC().Format(time.RFC3339Nano)] {
			notFirst = append(notFirst, x)
		}
	}
	return n, notFirst
}

func fmtMs(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

// A replica whose fallback for a tick ends after its next tick falls due
// (rank × fallback above the period: here one ghost member and a fallback
// of 1.2 s for a 1 s period) claims that tick first when it is to claim
// the next one: otherwise the later claim would reach the ledger first and
// the earlier tick be answered done, and lost. No tick is left out.
func TestLaterTickDoesNotOvertake(t *testing.T) {
	t.Parallel()
	r, j, logs := ghostAndOne(t)
	// The ghost is first for half the ticks; a tick after one of those
	// that is this replica's own comes to claim it first: wait for three,
	// and six ticks run.
	testkit.Eventually(t, 60*time.Second, "three ticks claimed before a later one, six run", func() bool {
		return logs.count("tick claimed before a later one") >= 3 && len(j.byJob()["every"]) >= 6
	})
	r.stop(t)
	checkNoneOvertaken(t, j, logs)
}

// The same across updates of the job: a tick the old definition still
// waits to claim (its fallback) goes before the new definition's first
// claim, so no tick is lost at the instant of an update either.
func TestLaterTickDoesNotOvertakeAcrossUpdates(t *testing.T) {
	t.Parallel()
	r, j, logs := ghostAndOne(t)
	job := everyJob(j)
	for i := 0; len(j.byJob()["every"]) < 10; i++ {
		job.Revision = strconv.Itoa(i)
		if err := r.s.Update(job); err != nil {
			t.Fatal(err)
		}
		if i > 200 {
			t.Fatalf("%d ticks ran in %d updates", len(j.byJob()["every"]), i)
		}
		time.Sleep(150 * time.Millisecond) // the rate of updates; no synchronisation
	}
	r.stop(t)
	checkNoneOvertaken(t, j, logs)
}

// ghostAndOne starts one replica running everyJob, with a fallback of
// 1.2 s, beside a ghost member that runs nothing: the replica is second
// in rank for about half the ticks, and its fallback for them ends after
// the next tick is due. Its debug log goes to logs.
func ghostAndOne(t *testing.T) (*replica, *journal, *lockedWriter) {
	t.Helper()
	srv := redistest.Start(t)
	gc, err := lock.New(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gc.Close() })
	j, logs := newJournal(), newLockedWriter()
	r := newRedisReplica(t, srv, "r1", nil, scheduler.WithClaimFallback(1200*time.Millisecond),
		scheduler.WithLogger(hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug})))
	r.add(t, everyJob(j))
	r.start()
	if _, err := fleet.New(gc).Heartbeat(testkit.Context(t), groupOf(t, srv), "ghost#dead", time.Hour); err != nil {
		t.Fatal(err)
	}
	return r, j, logs
}

func everyJob(j *journal) scheduler.Job {
	return scheduler.Job{Name: "every", Schedule: "@every 1s", Overlap: scheduler.OverlapQueue, Run: j.fn(nil)}
}

// checkNoneOvertaken checks that every tick between the first and the
// last ran once, and that none was answered done without running.
func checkNoneOvertaken(t *testing.T, j *journal, logs *lockedWriter) {
	t.Helper()
	checkOncePerTick(t, j.byJob(), time.Second)
	if n := logs.count("outcome=skipped_done"); n != 0 {
		t.Errorf("%d ticks answered done without running (overtaken by a later one)", n)
	}
	if t.Failed() {
		t.Logf("the replica's log:\n%s", logs)
	}
}

// Two programs with other jobs on the same store and key prefix (two
// services sharing a Redis) are ranked apart: each is ranked only among the
// replicas that run its jobs, so every tick of the fleet's jobs is claimed
// at once by one of its replicas, never left to a fallback for a replica of
// the other program that does not run it.
func TestOtherProgramDoesNotDelayTheFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j, other := newJournal(), newJournal()
	const nJobs, fallback, ttl = 6, 2 * time.Second, 600 * time.Millisecond
	logs := newLockedWriter()
	debug := scheduler.WithLogger(hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}))
	var replicas []*replica
	for i := range 2 {
		r := newRedisReplica(t, srv, "r"+strconv.Itoa(i+1), nil, scheduler.WithClaimFallback(fallback), scheduler.WithMemberTTL(ttl), debug)
		for k := range nJobs {
			r.add(t, scheduler.Job{Name: jobName(k), Schedule: "@every 1s", Run: j.fn(nil)})
		}
		replicas = append(replicas, r)
	}
	// The other program: two replicas with a job of its own.
	for i := range 2 {
		r := newRedisReplica(t, srv, "other"+strconv.Itoa(i+1), nil, scheduler.WithClaimFallback(fallback), scheduler.WithMemberTTL(ttl))
		r.add(t, scheduler.Job{Name: "others-job", Schedule: "@every 1s", Run: other.fn(nil)})
		replicas = append(replicas, r)
	}
	for _, r := range replicas {
		r.start()
	}
	testkit.Eventually(t, 10*time.Second, "four members in the record, in two groups", func() bool {
		keys, _ := srv.Do("KEYS", "lockcron:members:{scheduler:*}").([]any)
		return len(keys) == 2 && members(srv) == 4
	})
	from := time.Now().Add(ttl) // every replica knows its group by then
	counted := func() (int, []execution) { return notFirst(j, logs, from) }
	// With one group for all four, the other program would be first for
	// about half of these ticks.
	testkit.Eventually(t, 30*time.Second, "four counted ticks of every job", func() bool {
		n, _ := counted()
		return n >= 4*nJobs
	})
	for _, r := range replicas {
		r.stop(t)
	}
	checkOncePerTick(t, j.byJob(), time.Second)
	n, unclaimed := counted()
	for _, x := range unclaimed {
		t.Errorf("job %s tick %s ran on %s %v late, claimed by no replica first in rank: the other program was ranked for it",
			x.info.Job, fmtMs(x.info.Tick.UnixMilli()), x.info.Replica, x.start.Sub(x.info.Tick))
	}
	if len(other.all()) == 0 {
		t.Error("the other program's job never ran")
	}
	t.Logf("%d ticks counted, %d not claimed at once", n, len(unclaimed))
}

// Runs longer than the fallback delay are claimed once: the replicas that
// are not first in rank hear the preferred replica's claim, and wait for
// its finish instead of claiming when their fallback ends.
func TestLongRunsClaimedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	// The default member TTL: with a short one, heartbeats delayed by a
	// loaded machine leave the membership stale, and every replica claims
	// at once as it should, which is not what this test is about. For the
	// same reason the fallback is 500 ms, not less: with 150 ms, a busy
	// machine that delivered the claim's announcement later than that (CI,
	// make test's packages in parallel) had every replica claim at one
	// tick. The runs are three times as long as the fallback.
	const nJobs, ttl, fallback, work = 6, scheduler.DefaultMemberTTL, 500 * time.Millisecond, 1500 * time.Millisecond
	var fleet []*replica
	var logs []*claimLog
	for i := range 3 {
		r, h := countedReplica(t, srv, "r"+strconv.Itoa(i+1), scheduler.WithClaimFallback(fallback), scheduler.WithMemberTTL(ttl))
		for k := range nJobs {
			r.add(t, scheduler.Job{Name: jobName(k), Schedule: "@every 2s", Run: j.fn(func(ctx context.Context) error {
				select {
				case <-time.After(work):
				case <-ctx.Done():
				}
				return nil
			})})
		}
		fleet, logs = append(fleet, r), append(logs, h)
	}
	for _, r := range fleet {
		r.start()
	}
	testkit.Eventually(t, 10*time.Second, "three members in the fleet's record", func() bool { return members(srv) == 3 })
	from := time.Now().Add(ttl)
	testkit.Eventually(t, 30*time.Second, "three counted ticks of every job", func() bool {
		n := 0
		for _, x := range j.all() {
			if !x.info.Tick.Before(from) && !x.end.IsZero() {
				n++
			}
		}
		return n >= 3*nJobs
	})
	for _, r := range fleet {
		r.stop(t)
	}
	checkOncePerTick(t, j.byJob(), 2*time.Second)
	ticks := 0
	for job, xs := range j.byJob() {
		for _, x := range xs {
			if x.info.Tick.Before(from) || x.end.IsZero() {
				continue
			}
			ticks++
			ms := x.info.Tick.UnixMilli()
			total := 0
			for _, h := range logs {
				total += h.count(job, ms)
			}
			if total != 1 {
				t.Errorf("job %s tick %s, a run of %v: %d claims across the fleet, want 1", job, fmtMs(ms), x.end.Sub(x.start).Round(time.Millisecond), total)
			}
		}
	}
	t.Logf("%d ticks of runs longer than the fallback (%v) counted", ticks, fallback)
}

// A replica that joins with its clock ahead fires only the ticks after its
// start on its own clock: the others do not rank it first for the ticks
// before (here the tick 0.7 s after it joins, which it never fires), or
// its claim of the next tick would come first and the earlier one be heard
// done and lost. The skewed replica (0.8 s ahead) joins three times, 0.7 s
// before a tick of a 2 s schedule (its clock then reads 0.1 s after it),
// with 20 jobs: it claims the next tick 1.2 s after the one it skips. With
// a fallback of 1.5 s, longer than that, the replica on time claimed a
// tick the skewed one was ranked first for only after the later claim, and
// each round lost about half of the jobs' ticks; ranked first itself, it
// claims at once, 1.2 s ahead of the later claim, which a loaded machine
// does not eat up. (With a 1 s schedule the margin was 0.2 s, and a busy
// CI machine delayed claims by more.)
func TestReplicaJoiningAheadMissesNoTick(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	const period, skew = 2 * time.Second, 800 * time.Millisecond
	opts := []scheduler.Option{
		scheduler.WithMemberTTL(300 * time.Millisecond), // the others hear of a joiner within 100 ms
		scheduler.WithClaimFallback(1500 * time.Millisecond),
	}
	addJobs := func(r *replica) {
		for k := range 20 {
			r.add(t, scheduler.Job{Name: jobName(k), Schedule: "@every 2s", Run: j.fn(nil)})
		}
	}
	a := newRedisReplica(t, srv, "a", nil, opts...)
	addJobs(a)
	a.start()
	testkit.Eventually(t, 10*time.Second, "a tick run", func() bool { return len(j.byJob()) > 0 })
	for round := range 3 {
		now := time.Now()
		tick := now.Truncate(period).Add(2 * period)                  // its join instant, 0.7 s before, is still ahead
		time.Sleep(time.Until(tick.Add(100*time.Millisecond - skew))) // the instant of the scenario, not a synchronisation
		b := newRedisReplica(t, srv, fmt.Sprintf("ahead-%d", round), nil, append(opts, scheduler.WithClock(testclock.Offset(skew)))...)
		addJobs(b)
		b.start()
		time.Sleep(time.Until(tick.Add(period - 300*time.Millisecond))) // b claims the next tick 1.2 s after this one; then the round ends
		b.stop(t)
	}
	a.stop(t)
	checkOncePerTick(t, j.byJob(), period)
}

// While a run holds a job's lock, each tick due meanwhile (overlap skip) is
// claimed by one replica: the first in rank that does not run it finds the
// lock held and tells the fleet, and the others send nothing. (The replica
// that runs it skips the tick without a claim; when it is first in rank,
// the second claims after its fallback, and the third hears that.)
func TestBusyTicksClaimedOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	j := newJournal()
	// The default member TTL, as in TestLongRunsClaimedOnce.
	const nJobs, ttl, fallback, work = 4, scheduler.DefaultMemberTTL, 300 * time.Millisecond, 2500 * time.Millisecond
	var fleet []*replica
	var logs []*claimLog
	dbg := newLockedWriter()
	for i := range 3 {
		r, h := countedReplica(t, srv, "r"+strconv.Itoa(i+1), scheduler.WithClaimFallback(fallback), scheduler.WithMemberTTL(ttl),
			scheduler.WithLogger(hclog.New(&hclog.LoggerOptions{Name: "r" + strconv.Itoa(i+1), Output: dbg, Level: hclog.Debug})))
		for k := range nJobs {
			r.add(t, scheduler.Job{Name: jobName(k), Schedule: "@every 1s", Overlap: scheduler.OverlapSkip, Run: j.fn(func(ctx context.Context) error {
				select {
				case <-time.After(work):
				case <-ctx.Done():
				}
				return nil
			})})
		}
		fleet, logs = append(fleet, r), append(logs, h)
	}
	for _, r := range fleet {
		r.start()
	}
	testkit.Eventually(t, 10*time.Second, "three members in the fleet's record", func() bool { return members(srv) == 3 })
	// Counted: the ticks after every replica heard the others (a
	// heartbeat, within ttl) and after the claims of the ticks before, which
	// every replica may have sent as first in rank while it heard fewer
	// members, have waited out their run (work): until then a replica skips
	// each next tick as one under way here, without a claim.
	from := time.Now().Add(ttl + work).Truncate(time.Second).Add(time.Second)
	to := from.Add(6 * time.Second)
	testkit.Eventually(t, 30*time.Second, "the counted ticks decided", func() bool {
		return time.Now().After(to.Add(time.Second)) // the last counted tick's fallbacks (2 × 300 ms) are over
	})
	for _, r := range fleet {
		r.stop(t)
	}
	checkOncePerTick(t, j.byJob(), 0)
	ran := 0
	for k := range nJobs {
		job := jobName(k)
		for tick := from; tick.Before(to); tick = tick.Add(time.Second) {
			ms := tick.UnixMilli()
			total := 0
			for _, h := range logs {
				total += h.count(job, ms)
			}
			if total != 1 {
				t.Errorf("job %s tick %s: %d claims across the fleet, want 1", job, fmtMs(ms), total)
			}
		}
		for _, x := range j.byJob()[job] {
			if !x.info.Tick.Before(from) && x.info.Tick.Before(to) {
				ran++
			}
		}
	}
	if max := nJobs * 3; ran > max {
		t.Errorf("%d runs of 2.5 s in 6 ticks of %d jobs, want at most %d", ran, nJobs, max)
	}
	t.Logf("%d ticks counted, %d ran, the others found the lock held", 6*nJobs, ran)
	if t.Failed() {
		t.Logf("from %s; the replicas' log:\n%s", fmtMs(from.UnixMilli()), dbg)
	}
}
