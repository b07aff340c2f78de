package lock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

func semClient(t *testing.T, rdb redis.UniversalClient, opts ...lock.Option) *lock.Client {
	t.Helper()
	c, err := lock.New(rdb, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func semExpectLocked(t *testing.T, l lock.Locker) {
	t.Helper()
	lease, err := l.TryLock(locktest.Ctx(t, 5*time.Second))
	if !errors.Is(err, lock.ErrLocked) {
		if lease != nil {
			_ = lease.Unlock(context.Background())
		}
		t.Fatalf("TryLock with every permit taken: err = %v, want ErrLocked", err)
	}
}

// At most N holders at once, and all N permits used, under 50 goroutines
// spread over five Clients.
func TestSemaphoreLimit(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, e locktest.Store) {
		const permits, goroutines, rounds = 3, 50, 8
		var sems []lock.Locker
		for range 5 {
			sems = append(sems, e.NewClient(t).Semaphore("limit", permits))
		}
		ctx := locktest.Ctx(t, 60*time.Second)
		var inside, most, total atomic.Int64
		var mu sync.Mutex
		tokens := make(map[int64]bool)
		errs := make(chan error, goroutines)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem := sems[g%len(sems)]
				for range rounds {
					lease, err := sem.Lock(ctx)
					if err != nil {
						errs <- err
						return
					}
					n := inside.Add(1)
					for {
						m := most.Load()
						if n <= m || most.CompareAndSwap(m, n) {
							break
						}
					}
					total.Add(1)
					mu.Lock()
					dup := tokens[lease.Token()]
					tokens[lease.Token()] = true
					mu.Unlock()
					if dup {
						errs <- fmt.Errorf("token %d issued twice", lease.Token())
					}
					time.Sleep(2 * time.Millisecond) // work under the permit
					inside.Add(-1)
					if err := lease.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := total.Load(); got != goroutines*rounds {
			t.Fatalf("%d acquisitions, want %d", got, goroutines*rounds)
		}
		if got := most.Load(); got != permits {
			t.Fatalf("at most %d holders at once, want exactly %d", got, permits)
		}
	})
}

// TryLock fails with every permit taken; an Unlock wakes a waiter at once,
// on another Client or the same one, well before the 30s lease.
func TestSemaphoreTryLockAndWake(t *testing.T) {
	locktest.Matrix(t, func(t *testing.T, e locktest.Store) {
		c1, c2 := e.NewClient(t), e.NewClient(t)
		s1, s2 := c1.Semaphore("wake", 2), c2.Semaphore("wake", 2)
		ctx := locktest.Ctx(t, 20*time.Second)
		a := locktest.MustLock(t, ctx, s1)
		b := locktest.MustLock(t, ctx, s2)
		if a.Owner() == b.Owner() || a.Token() == b.Token() {
			t.Fatalf("two permits share owner or token: %s/%d, %s/%d", a.Owner(), a.Token(), b.Owner(), b.Token())
		}
		semExpectLocked(t, s1)
		semExpectLocked(t, s2)
		if _, err := s2.Lock(ctx, lock.WithWait(0)); !errors.Is(err, lock.ErrLocked) {
			t.Fatalf("Lock(WithWait(0)) with every permit taken: %v, want ErrLocked", err)
		}
		start := time.Now()
		if _, err := s2.Lock(ctx, lock.WithWait(50*time.Millisecond)); !errors.Is(err, lock.ErrLocked) {
			t.Fatalf("Lock(WithWait(50ms)) with every permit taken: %v, want ErrLocked", err)
		} else if d := time.Since(start); d < 50*time.Millisecond {
			t.Fatalf("Lock(WithWait(50ms)) gave up after %v", d)
		}

		// a moves from Client to Client: each step frees it and a waiter
		// takes it over.
		for _, step := range []struct {
			name   string
			waiter *lock.Client
		}{
			{"c1 unlocks, c2 waits", c2},
			{"c2 unlocks, c1 waits", c1},
			{"c1 unlocks, c1 waits", c1},
		} {
			got := locktest.Go(ctx, step.waiter.Semaphore("wake", 2))
			locktest.WaitForWaiter(t, step.waiter, "wake")
			unlocked := time.Now()
			locktest.MustUnlock(t, a)
			g := locktest.Await(t, got, 5*time.Second)
			if d := g.At.Sub(unlocked); d > 100*time.Millisecond {
				t.Fatalf("%s: waiter acquired %v after the unlock, want a few ms", step.name, d)
			}
			a = g.Lease
			semExpectLocked(t, s1)
		}
		locktest.MustUnlock(t, a)
		locktest.MustUnlock(t, b)
	})
}

// Tokens strictly increase across permits, whichever Client takes them and
// while other permits are held.
func TestSemaphoreTokensIncrease(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, e locktest.Store) {
		sems := []lock.Locker{e.NewClient(t).Semaphore("tokens", 3), e.NewClient(t).Semaphore("tokens", 3)}
		ctx := locktest.Ctx(t, 20*time.Second)
		var held []*lock.Lease
		var last int64
		for i := range 30 {
			if len(held) == 3 {
				locktest.MustUnlock(t, held[i%3])
				held = append(held[:i%3], held[i%3+1:]...)
			}
			l := locktest.MustLock(t, ctx, sems[i%2])
			if l.Token() <= last {
				t.Fatalf("permit %d: token %d after %d, not increasing", i, l.Token(), last)
			}
			last = l.Token()
			held = append(held, l)
		}
		for _, l := range held {
			locktest.MustUnlock(t, l)
		}
	})
}

// Lock on a permit's context adds a hold to that permit: same lease, same
// token, no second permit; the last Unlock gives it back.
func TestSemaphoreReentry(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, e locktest.Store) {
		c1, c2 := e.NewClient(t), e.NewClient(t)
		sem, other := c1.Semaphore("reentry", 2), c2.Semaphore("reentry", 2)
		ctx := locktest.Ctx(t, 20*time.Second)
		p := locktest.MustLock(t, ctx, sem)
		again := locktest.MustLock(t, p.Context(), sem)
		viaOtherValue := locktest.MustLock(t, again.Context(), c1.Semaphore("reentry", 2))
		if again != p || viaOtherValue != p {
			t.Fatal("re-entry returned another lease")
		}
		if again.Token() != p.Token() {
			t.Fatalf("re-entry token %d, want %d", again.Token(), p.Token())
		}
		if e.Server != nil {
			if got := e.Server.Do("HGET", "lockcron:{reentry}:sem:holds", p.Owner()); got != "3" {
				t.Fatalf("holds of the permit in Redis: %v, want 3", got)
			}
		}
		// Three holds, one permit: one is left for another owner.
		q := locktest.MustLock(t, ctx, other, lock.WithWait(0))
		semExpectLocked(t, other)
		semExpectLocked(t, sem) // another owner on the same Client
		locktest.MustUnlock(t, q)

		for holds := 3; holds > 1; holds-- {
			locktest.MustUnlock(t, p)
			if p.Err() != nil {
				t.Fatalf("after an Unlock with %d holds left: Err = %v", holds-1, p.Err())
			}
			q := locktest.MustLock(t, ctx, other, lock.WithWait(0))
			semExpectLocked(t, other)
			locktest.MustUnlock(t, q)
		}
		locktest.MustUnlock(t, p)
		if !errors.Is(p.Err(), lock.ErrReleased) {
			t.Fatalf("after the last Unlock: Err = %v, want ErrReleased", p.Err())
		}
		q1 := locktest.MustLock(t, ctx, other, lock.WithWait(0))
		q2 := locktest.MustLock(t, ctx, other, lock.WithWait(0))
		locktest.MustUnlock(t, q1)
		locktest.MustUnlock(t, q2)
		if err := p.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Unlock after the last: %v, want ErrNotHeld", err)
		}
	})
}

// ForceUnlock takes every permit away: each holder's Done closes with
// ErrLockLost at its next renewal, and a waiter is woken at once.
func TestSemaphoreForceUnlock(t *testing.T) {
	locktest.Matrix(t, func(t *testing.T, e locktest.Store) {
		const leaseTime = 300 * time.Millisecond
		c1 := e.NewClient(t, lock.WithLeaseTime(leaseTime))
		c2 := e.NewClient(t, lock.WithLeaseTime(leaseTime))
		admin := e.NewClient(t)
		ctx := locktest.Ctx(t, 20*time.Second)
		holders := []*lock.Lease{
			locktest.MustLock(t, ctx, c1.Semaphore("force", 3)),
			locktest.MustLock(t, ctx, c2.Semaphore("force", 3)),
			locktest.MustLock(t, ctx, c2.Semaphore("force", 3), lock.WithLease(time.Hour)),
		}
		got := locktest.Go(ctx, c1.Semaphore("force", 3))
		locktest.WaitForWaiter(t, c1, "force")
		forced := time.Now()
		if ok, err := admin.ForceUnlock(ctx, "force"); err != nil || !ok {
			t.Fatalf("ForceUnlock: %v, %v", ok, err)
		}
		g := locktest.Await(t, got, 5*time.Second)
		if d := g.At.Sub(forced); d > 200*time.Millisecond {
			t.Fatalf("waiter acquired %v after ForceUnlock", d)
		}
		// The watchdogs find out within lease/3; the fixed one only at
		// its end (an hour), like a fixed Mutex lease.
		for _, l := range holders[:2] {
			select {
			case <-l.Done():
			case <-time.After(leaseTime/3 + time.Second):
				t.Fatalf("lease %s: Done not closed after ForceUnlock", l.Owner())
			}
			if !errors.Is(l.Err(), lock.ErrLockLost) || !errors.Is(context.Cause(l.Context()), lock.ErrLockLost) {
				t.Fatalf("lease %s after ForceUnlock: Err %v, cause %v; want ErrLockLost", l.Owner(), l.Err(), context.Cause(l.Context()))
			}
			if err := l.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
				t.Fatalf("Unlock of a lost permit: %v, want ErrNotHeld", err)
			}
		}
		if err := holders[2].Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("Unlock of a force-unlocked fixed permit: %v, want ErrNotHeld", err)
		}
		if holders[2].Err() == nil {
			t.Fatal("a fixed permit still says held after its Unlock found it gone")
		}
		// The lost permits' Unlocks freed nothing of the new holder's: two
		// permits are left, not three.
		a := locktest.MustLock(t, ctx, c2.Semaphore("force", 3), lock.WithWait(0))
		b := locktest.MustLock(t, ctx, c2.Semaphore("force", 3), lock.WithWait(0))
		semExpectLocked(t, c2.Semaphore("force", 3))
		if g.Lease.Err() != nil {
			t.Fatalf("the new holder's permit ended: %v", g.Lease.Err())
		}
		for _, l := range []*lock.Lease{a, b, g.Lease} {
			locktest.MustUnlock(t, l)
		}
		if ok, err := admin.ForceUnlock(ctx, "force"); err != nil || ok {
			t.Fatalf("ForceUnlock with no permit: %v, %v; want false, nil", ok, err)
		}
	})
}

func TestSemaphoreInvalid(t *testing.T) {
	t.Parallel()
	// A Client whose every connection attempt is counted and fails: an
	// invalid Locker must send nothing.
	var dials atomic.Int64
	rdb := redis.NewClient(&redis.Options{
		Addr: "unused:0",
		Dialer: func(context.Context, string, string) (net.Conn, error) {
			dials.Add(1)
			return nil, errors.New("no dialing in this test")
		},
		MaxRetries: -1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	rc := semClient(t, rdb)
	mc, err := lock.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Close() })
	ctx := locktest.Ctx(t, 10*time.Second)

	cases := []struct {
		name    string
		lock    string
		permits int
		says    string
	}{
		{"zero permits", "ok", 0, "0 permits"},
		{"negative permits", "ok", -1, "-1 permits"},
		{"empty name", "", 1, "empty"},
		{"open brace", "a{b", 2, "{"},
		{"close brace", "a}b", 2, "}"},
	}
	for backend, c := range map[string]*lock.Client{"Redis": rc, "Memory": mc} {
		for _, tc := range cases {
			t.Run(backend+"/"+tc.name, func(t *testing.T) {
				sem := c.Semaphore(tc.lock, tc.permits)
				if sem.Name() != tc.lock {
					t.Fatalf("Name() = %q, want %q", sem.Name(), tc.lock)
				}
				for how, call := range map[string]func() (*lock.Lease, error){
					"Lock":    func() (*lock.Lease, error) { return sem.Lock(ctx) },
					"TryLock": func() (*lock.Lease, error) { return sem.TryLock(ctx) },
				} {
					l, err := call()
					if l != nil || !errors.Is(err, lock.ErrInvalid) {
						t.Fatalf("%s: %v, %v; want ErrInvalid", how, l, err)
					}
					if !strings.Contains(err.Error(), tc.says) {
						t.Fatalf("%s: error %q does not say %q", how, err, tc.says)
					}
				}
			})
		}
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("invalid semaphores dialled Redis %d times", n)
	}
}

// A key of the semaphore that is not ours is reported with its name and
// left as it is.
func TestSemaphoreBadKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := semClient(t, srv.Client())
	ctx := locktest.Ctx(t, 20*time.Second)
	cases := []struct {
		name, lock, key string
		setup           [][]any
		check           []any
		want            any
		force           bool // ForceUnlock reports it too
	}{
		{"string at permits", "s1", "lockcron:{s1}:sem", [][]any{{"SET", "lockcron:{s1}:sem", "precious"}}, []any{"GET", "lockcron:{s1}:sem"}, "precious", true},
		{"permits without TTL", "s2", "lockcron:{s2}:sem", [][]any{{"ZADD", "lockcron:{s2}:sem", "1", "someone"}}, []any{"ZCARD", "lockcron:{s2}:sem"}, int64(1), false},
		{"string at holds", "s3", "lockcron:{s3}:sem:holds", [][]any{{"SET", "lockcron:{s3}:sem:holds", "x"}}, []any{"GET", "lockcron:{s3}:sem:holds"}, "x", true},
		{"list at tokens", "s4", "lockcron:{s4}:sem:tokens", [][]any{{"RPUSH", "lockcron:{s4}:sem:tokens", "x"}}, []any{"LINDEX", "lockcron:{s4}:sem:tokens", "0"}, "x", true},
		{"holds without TTL", "s5", "lockcron:{s5}:sem:holds", [][]any{{"HSET", "lockcron:{s5}:sem:holds", "a", "1"}}, []any{"HGET", "lockcron:{s5}:sem:holds", "a"}, "1", false},
		{"list at token", "s6", "lockcron:{s6}:token", [][]any{{"RPUSH", "lockcron:{s6}:token", "x"}}, []any{"LINDEX", "lockcron:{s6}:token", "0"}, "x", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range tc.setup {
				srv.Do(cmd...)
			}
			sem := c.Semaphore(tc.lock, 2)
			for how, call := range map[string]func() error{
				"Lock":    func() error { _, err := sem.Lock(ctx); return err },
				"TryLock": func() error { _, err := sem.TryLock(ctx); return err },
			} {
				err := call()
				if !errors.Is(err, lock.ErrBadKey) {
					t.Fatalf("%s: err = %v, want ErrBadKey", how, err)
				}
				if !strings.Contains(err.Error(), strconv.Quote(tc.key)) {
					t.Fatalf("%s: error %q does not name the key %q", how, err, tc.key)
				}
			}
			if tc.force {
				_, err := c.ForceUnlock(ctx, tc.lock)
				if !errors.Is(err, lock.ErrBadKey) || !strings.Contains(err.Error(), strconv.Quote(tc.key)) {
					t.Fatalf("ForceUnlock: %v, want ErrBadKey naming %q", err, tc.key)
				}
			}
			if got := srv.Do(tc.check...); got != tc.want {
				t.Fatalf("key changed: %v, want %v", got, tc.want)
			}
		})
	}
}

// The data model in Redis: one hash tag; a sorted set of permits with
// their deadlines in Redis time, hold counts and tokens beside it; the
// keys live as long as the longest permit, and go with the last.
func TestSemaphoreRedisKeys(t *testing.T) {
	srv := redistest.Start(t)
	c := semClient(t, srv.Client(), lock.WithKeyPrefix("app"))
	ctx := locktest.Ctx(t, 20*time.Second)
	sem := c.Semaphore("jobs", 2)
	keys := []string{"app:{jobs}:sem", "app:{jobs}:sem:holds", "app:{jobs}:sem:tokens"}
	pttls := func() []int64 {
		var out []int64
		for _, k := range keys {
			out = append(out, srv.Do("PTTL", k).(int64))
		}
		return out
	}
	before := redisTimeMillis(t, srv)
	a := locktest.MustLock(t, ctx, sem)
	after := redisTimeMillis(t, srv)
	score, ok := zscore(t, srv, keys[0], a.Owner())
	if !ok {
		t.Fatalf("no permit of %s in %s", a.Owner(), keys[0])
	}
	lease := lock.DefaultLeaseTime.Milliseconds()
	if score < before+lease || score > after+lease {
		t.Fatalf("permit deadline %d, want Redis time + %dms in [%d, %d]", score, lease, before+lease, after+lease)
	}
	if got := srv.Do("HGET", keys[1], a.Owner()); got != "1" {
		t.Fatalf("holds %v, want 1", got)
	}
	if got := srv.Do("HGET", keys[2], a.Owner()); got != strconv.FormatInt(a.Token(), 10) {
		t.Fatalf("token in Redis %v, want %d", got, a.Token())
	}
	if got := srv.Do("GET", "app:{jobs}:token"); got != strconv.FormatInt(a.Token(), 10) {
		t.Fatalf("token high-water mark %v, want %d", got, a.Token())
	}
	for i, ttl := range pttls() {
		if ttl <= 0 || ttl > lease {
			t.Fatalf("PTTL %s = %d, want within the %dms lease", keys[i], ttl, lease)
		}
	}
	// A fixed permit of an hour: the keys live at least as long.
	b := locktest.MustLock(t, ctx, sem, lock.WithLease(time.Hour))
	for i, ttl := range pttls() {
		if ttl < time.Hour.Milliseconds()-5000 {
			t.Fatalf("PTTL %s = %d with a permit of an hour", keys[i], ttl)
		}
	}
	locktest.MustUnlock(t, b)
	for i, ttl := range pttls() {
		if ttl <= 0 || ttl > lease {
			t.Fatalf("PTTL %s = %d after the long permit went, want within %dms", keys[i], ttl, lease)
		}
	}
	locktest.MustUnlock(t, a)
	for _, k := range keys {
		if n := srv.Do("EXISTS", k).(int64); n != 0 {
			t.Fatalf("%s still exists after the last permit went", k)
		}
	}
}

func redisTimeMillis(t *testing.T, srv *redistest.Server) int64 {
	t.Helper()
	v := srv.Do("TIME").([]any)
	sec, _ := strconv.ParseInt(v[0].(string), 10, 64)
	usec, _ := strconv.ParseInt(v[1].(string), 10, 64)
	return sec*1000 + usec/1000
}

// go-redis may send a script again after its reply was lost: each script
// must then leave Redis as one run would have, and a repeated acquire must
// answer with the permit's own token even when others were issued since.
func TestSemaphoreScriptsAreIdempotent(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := locktest.Ctx(t, 10*time.Second)
	script := func(name string) *redis.Script {
		return redis.NewScript(locktest.ScriptSource(t, "lib.lua", name+".lua"))
	}
	acquire, renew, release := script("semacquire"), script("semrenew"), script("semrelease")
	k := []string{"p:{idem}:sem", "p:{idem}:sem:holds", "p:{idem}:sem:tokens", "p:{idem}:token"}
	acq := func(owner string, holds int) []int64 {
		t.Helper()
		v, err := acquire.Run(ctx, rdb, k, owner, 60000, holds, 86400000, 2).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	rel := func(owner string, holds, drop int) int64 {
		t.Helper()
		n, err := release.Run(ctx, rdb, []string{k[0], k[1], k[2], "p:{idem}:sem:channel", k[0] + ":released:" + owner}, owner, holds, drop, owner, 30_000).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := acq("me:1", 0)
	if first[0] != 1 {
		t.Fatalf("acquire: %v", first)
	}
	other := acq("other:1", 0)
	if other[0] != 1 || other[1] <= first[1] {
		t.Fatalf("second permit: %v after token %d", other, first[1])
	}
	if again := acq("me:1", 0); again[0] != 1 || again[1] != first[1] {
		t.Fatalf("repeated acquire: %v, want {1, %d}", again, first[1])
	}
	if full := acq("third:1", 0); full[0] != 0 || full[1] < 59000 {
		t.Fatalf("acquire with both permits taken: %v, want {0, ~60000}", full)
	}
	for range 2 { // re-entry from 1 to 2 holds, and its repeat
		if r := acq("me:1", 1); r[0] != 1 || r[1] != first[1] {
			t.Fatalf("re-entry: %v", r)
		}
	}
	if got := srv.Do("HGET", k[1], "me:1"); got != "2" {
		t.Fatalf("holds after a repeated re-entry: %v, want 2", got)
	}
	for range 2 { // release from 2 to 1 hold, and its repeat
		if n := rel("me:1", 2, 1); n != 2 {
			t.Fatalf("release of one hold: %d", n)
		}
	}
	for range 2 {
		if n, err := renew.Run(ctx, rdb, k[:3], "me:1", 60000).Int64(); err != nil || n != 1 {
			t.Fatalf("renew: %d, %v", n, err)
		}
	}
	if n := rel("me:1", 1, 1); n != 1 {
		t.Fatalf("last release: %d", n)
	}
	if n := rel("me:1", 1, 1); n != 1 {
		t.Fatalf("repeated last release: %d, want 1 (released, as the first)", n)
	}
	if n := rel("never:1", 1, 1); n != 0 {
		t.Fatalf("release by an owner that holds no permit: %d, want 0", n)
	}
	if n, _ := renew.Run(ctx, rdb, k[:3], "me:1", 60000).Int64(); n != 0 {
		t.Fatal("renew of a released permit succeeded")
	}
	if r := acq("me:1", 1); r[0] != -1 {
		t.Fatalf("re-entry of a released permit: %v", r)
	}
	if got := srv.Do("ZCARD", k[0]).(int64); got != 1 {
		t.Fatalf("%d permits left, want other's", got)
	}
}

// A permit whose holder stops renewing comes back one lease after its last
// renewal, to a waiter on another Client; the holder learns it lost it
// first.
func TestSemaphoreHolderStopsRenewing(t *testing.T) {
	const leaseTime = 600 * time.Millisecond
	t.Run("Redis/ConnectionLost", func(t *testing.T) {
		srv := redistest.Start(t)
		opts := srv.Options()
		opts.ClientName = "semholder"
		rdb := redis.NewClient(opts)
		holder := semClient(t, rdb, lock.WithLeaseTime(leaseTime))
		waiter := semClient(t, srv.Client())
		ctx := locktest.Ctx(t, 20*time.Second)
		p := locktest.MustLock(t, ctx, holder.Semaphore("lost", 1))
		got := locktest.Go(ctx, waiter.Semaphore("lost", 1))
		locktest.WaitForWaiter(t, waiter, "lost")
		waitRenewal(t, srv, "lockcron:{lost}:sem", p.Owner())

		_ = rdb.Close() // renewals fail from now on
		deadline := finalDeadline(t, srv, "semholder", "lockcron:{lost}:sem", p.Owner())
		g := locktest.Await(t, got, 5*time.Second)
		defer locktest.MustUnlock(t, g.Lease)
		select {
		case <-p.Done():
		default:
			t.Fatal("the waiter acquired before the holder's Done closed")
		}
		if !errors.Is(p.Err(), lock.ErrLockLost) {
			t.Fatalf("holder Err = %v, want ErrLockLost", p.Err())
		}
		checkReturnedAt(t, srv, "lockcron:{lost}:sem", g.Lease, deadline)
	})
	t.Run("Redis/ProcessKilled", func(t *testing.T) {
		srv := redistest.Start(t)
		waiter := semClient(t, srv.Client())
		ctx := locktest.Ctx(t, 20*time.Second)
		const name, permits = "killed", 2
		cmd := exec.Command(os.Args[0], "-test.run=^TestSemaphoreChildHolder$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("LOCKCRON_SEM_CHILD=%s|%s|%d|%s", srv.Addr(), name, permits, leaseTime))
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		pr, pw := io.Pipe()
		cmd.Stdout = pw // Wait waits for the copy to pw, which the reader below drains
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		owners := make(chan []string, 1)
		read := make(chan struct{})
		go func() {
			defer close(read)
			var held []string
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				if owner, ok := strings.CutPrefix(sc.Text(), "held "); ok {
					held = append(held, owner)
				}
				if sc.Text() == "ready" {
					owners <- held
				}
			}
			close(owners)
		}()
		killed := false
		kill := func() {
			if !killed {
				killed = true
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				_ = pw.Close()
				<-read
			}
		}
		defer kill()
		var held []string
		select {
		case held = <-owners:
			if held == nil {
				t.Fatal("the child ended before it was ready")
			}
		case <-time.After(15 * time.Second):
			t.Fatal("the child did not take its permits within 15s")
		}
		if len(held) != permits {
			t.Fatalf("the child holds %d permits, want %d", len(held), permits)
		}
		semExpectLocked(t, waiter.Semaphore(name, permits))
		got := locktest.Go(ctx, waiter.Semaphore(name, permits))
		locktest.WaitForWaiter(t, waiter, name)
		waitRenewal(t, srv, "lockcron:{"+name+"}:sem", held[0])

		kill()
		first := int64(0)
		for _, owner := range held {
			d := finalDeadline(t, srv, "semchild", "lockcron:{"+name+"}:sem", owner)
			if first == 0 || d < first {
				first = d
			}
		}
		g := locktest.Await(t, got, 5*time.Second)
		checkReturnedAt(t, srv, "lockcron:{"+name+"}:sem", g.Lease, first)
		locktest.MustUnlock(t, g.Lease)
	})
	t.Run("Memory/FixedLease", func(t *testing.T) {
		// In one process a holder cannot crash alone: a fixed permit that
		// is never unlocked stops being renewed the same way.
		store := lock.NewMemoryStore()
		c1, err := store.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		defer c1.Close()
		c2, err := store.NewClient()
		if err != nil {
			t.Fatal(err)
		}
		defer c2.Close()
		ctx := locktest.Ctx(t, 20*time.Second)
		before := time.Now()
		p := locktest.MustLock(t, ctx, c1.Semaphore("fixed", 1), lock.WithLease(leaseTime))
		after := time.Now()
		g := locktest.Await(t, locktest.Go(ctx, c2.Semaphore("fixed", 1)), 5*time.Second)
		defer locktest.MustUnlock(t, g.Lease)
		select {
		case <-p.Done():
		default:
			t.Fatal("the waiter acquired before the holder's Done closed")
		}
		if !errors.Is(p.Err(), lock.ErrLockLost) {
			t.Fatalf("holder Err = %v, want ErrLockLost", p.Err())
		}
		if g.At.Before(before.Add(leaseTime)) {
			t.Fatalf("the permit came back %v after it was taken, before its %v lease", g.At.Sub(before), leaseTime)
		}
		if late := g.At.Sub(after.Add(leaseTime)); late > 100*time.Millisecond {
			t.Fatalf("the permit came back %v after its lease ended", late)
		}
		t.Logf("permit back %v after its lease ended", g.At.Sub(after.Add(leaseTime)))
	})
}

// TestSemaphoreChildHolder is the child process of
// TestSemaphoreHolderStopsRenewing/Redis/ProcessKilled: it takes every
// permit, says so, and holds them (renewing) until it is killed.
func TestSemaphoreChildHolder(t *testing.T) {
	spec := os.Getenv("LOCKCRON_SEM_CHILD")
	if spec == "" {
		t.Skip("the child process of TestSemaphoreHolderStopsRenewing")
	}
	parts := strings.Split(spec, "|")
	permits, _ := strconv.Atoi(parts[2])
	leaseTime, _ := time.ParseDuration(parts[3])
	rdb := redis.NewClient(&redis.Options{Addr: parts[0], ClientName: "semchild", ContextTimeoutEnabled: true, DisableIdentity: true})
	defer rdb.Close()
	c := semClient(t, rdb, lock.WithLeaseTime(leaseTime))
	ctx := locktest.Ctx(t, time.Minute)
	for range permits {
		l := locktest.MustLock(t, ctx, c.Semaphore(parts[1], permits))
		fmt.Printf("held %s\n", l.Owner())
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed, or the parent goes
}

// waitRenewal waits until the deadline of owner's permit moves: the
// watchdog renews it.
func waitRenewal(t *testing.T, srv *redistest.Server, key, owner string) {
	t.Helper()
	first := srv.Do("ZSCORE", key, owner)
	deadline := time.Now().Add(5 * time.Second)
	for srv.Do("ZSCORE", key, owner) == first {
		if time.Now().After(deadline) {
			t.Fatalf("permit %s of %s not renewed within 5s", owner, key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// finalDeadline waits until the server has no connection named client
// left (so that nothing it sent is still to run), then returns the deadline
// of owner's permit, in Redis time (ms): its last renewal plus the lease.
func finalDeadline(t *testing.T, srv *redistest.Server, client, key, owner string) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for strings.Contains(srv.Do("CLIENT", "LIST").(string), "name="+client+" ") {
		if time.Now().After(deadline) {
			t.Fatalf("connections of %s still open after 5s", client)
		}
		time.Sleep(5 * time.Millisecond)
	}
	d, ok := zscore(t, srv, key, owner)
	if !ok {
		t.Fatalf("permit %s of %s gone already", owner, key)
	}
	return d
}

// zscore is the score of member in the sorted set at key, if it is there.
func zscore(t *testing.T, srv *redistest.Server, key, member string) (int64, bool) {
	t.Helper()
	switch v := srv.Do("ZSCORE", key, member).(type) {
	case nil:
		return 0, false
	case float64: // RESP3
		return int64(v), true
	case string:
		d, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return d, true
	default:
		t.Fatalf("ZSCORE %s %s: %T %v", key, member, v, v)
		return 0, false
	}
}

// checkReturnedAt checks that the permit l was taken (its deadline in the
// permits' sorted set key, less the lease, on the server's clock) at or
// after deadline, and soon after.
func checkReturnedAt(t *testing.T, srv *redistest.Server, key string, l *lock.Lease, deadline int64) {
	t.Helper()
	score, err := srv.Client().ZScore(context.Background(), key, l.Owner()).Result()
	if err != nil {
		t.Fatalf("the permit's deadline: %v", err)
	}
	at := int64(score) - lock.DefaultLeaseTime.Milliseconds() // the waiter's lease, not renewed yet
	if at < deadline {
		t.Fatalf("permit taken at %d, %dms before the dead holder's deadline %d", at, deadline-at, deadline)
	}
	if late := time.Duration(at-deadline) * time.Millisecond; late > 150*time.Millisecond {
		t.Fatalf("permit taken %v after the dead holder's deadline", late)
	} else {
		t.Logf("permit taken %v after the dead holder's deadline (its last renewal + lease)", late)
	}
}
