package lock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// inScripts are the commands our Lua scripts run; commandstats counts those
// calls too, and the Clients never send them directly.
var inScripts = map[string]bool{
	"pttl": true, "get": true, "time": true, "set": true, "hset": true, "pexpire": true,
	"type": true, "hget": true, "hmget": true, "hexists": true, "del": true, "publish": true, "incr": true,
}

// commandCalls is the number of commands clients sent the server, less the
// test's own bookkeeping (INFO, CONFIG, HELLO, PUBSUB).
func commandCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	info := srv.Do("INFO", "commandstats").(string)
	total := 0
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.TrimPrefix(name, "cmdstat_")
		if inScripts[name] || name == "info" || name == "hello" || strings.HasPrefix(name, "config") || strings.HasPrefix(name, "pubsub") {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("commandstats line %q: %v", line, err)
		}
		total += n
	}
	return total
}

func TestKeyNamesShareHashTag(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv, lock.WithKeyPrefix("app"))
	ctx := testkit.Context(t)
	lease, err := c.Mutex("billing").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Unlock(ctx)
	if got := srv.Do("HGET", "app:{billing}", lease.Owner()); got != "1" {
		t.Fatalf("holds of %s in app:{billing} = %v, want 1", lease.Owner(), got)
	}
	if n := srv.Do("HLEN", "app:{billing}").(int64); n != 2 {
		t.Fatalf("app:{billing} has %d fields, want the owner's holds and token only", n)
	}
	if got := srv.Do("HGET", "app:{billing}", lease.Owner()+":token"); got != strconv.FormatInt(lease.Token(), 10) {
		t.Fatalf("the lease's token in app:{billing} = %v, want %d", got, lease.Token())
	}
	if got := srv.Do("GET", "app:{billing}:token"); got != strconv.FormatInt(lease.Token(), 10) {
		t.Fatalf("token key %v, want %d", got, lease.Token())
	}
	if ttl := srv.Do("PTTL", "app:{billing}").(int64); ttl <= 0 || ttl > lock.DefaultLeaseTime.Milliseconds() {
		t.Fatalf("PTTL %d, want within the 30s lease", ttl)
	}
}

func TestBadKeysAreReportedAndKept(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv)
	ctx := testkit.Context(t)

	cases := []struct {
		name, key string
		setup     []any
		check     []any
		want      any
	}{
		{"string at lock key", "lockcron:{str}", []any{"SET", "lockcron:{str}", "precious"}, []any{"GET", "lockcron:{str}"}, "precious"},
		{"hash without TTL", "lockcron:{nottl}", []any{"HSET", "lockcron:{nottl}", "someone", "1"}, []any{"HGET", "lockcron:{nottl}", "someone"}, "1"},
		{"list at token key", "lockcron:{tok}:token", []any{"RPUSH", "lockcron:{tok}:token", "x"}, []any{"LINDEX", "lockcron:{tok}:token", "0"}, "x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.Do(tc.setup...)
			name := strings.TrimSuffix(strings.TrimPrefix(tc.key, "lockcron:{"), "}:token")
			name = strings.TrimSuffix(name, "}")
			for _, call := range []struct {
				how string
				fn  func() error
			}{
				{"Lock", func() error { _, err := c.Mutex(name).Lock(ctx); return err }},
				{"TryLock", func() error { _, err := c.Mutex(name).TryLock(ctx); return err }},
			} {
				err := call.fn()
				if !errors.Is(err, lock.ErrBadKey) {
					t.Fatalf("%s: err = %v, want ErrBadKey", call.how, err)
				}
				if !strings.Contains(err.Error(), strconv.Quote(tc.key)) {
					t.Fatalf("%s: error %q does not name the key %q", call.how, err, tc.key)
				}
			}
			if got := srv.Do(tc.check...); got != tc.want {
				t.Fatalf("key changed: %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("ForceUnlock of a string", func(t *testing.T) {
		if _, err := c.ForceUnlock(ctx, "str"); !errors.Is(err, lock.ErrBadKey) {
			t.Fatalf("ForceUnlock: %v, want ErrBadKey", err)
		}
		if got := srv.Do("GET", "lockcron:{str}"); got != "precious" {
			t.Fatalf("key changed: %v", got)
		}
	})
}

func TestInvalidInputSendsNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	for _, opt := range []lock.Option{lock.WithLeaseTime(0), lock.WithLeaseTime(-time.Second), lock.WithLeaseTime(20 * time.Millisecond), lock.WithKeyPrefix(""), lock.WithKeyPrefix("a{b")} {
		if _, err := lock.New(srv.Client(), opt); !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("New with a bad option: %v, want ErrInvalid", err)
		}
	}
	if _, err := lock.NewMemory(lock.WithLeaseTime(time.Millisecond)); !errors.Is(err, lock.ErrInvalid) {
		t.Fatalf("NewMemory with a bad lease: %v, want ErrInvalid", err)
	}
	c := locktest.NewClient(t, srv)
	before := commandCalls(t, srv)
	for _, call := range []func() error{
		func() error { _, err := c.Mutex("").Lock(ctx); return err },
		func() error { _, err := c.Mutex("{x}").Lock(ctx); return err },
		func() error { _, err := c.Mutex("x").Lock(ctx, lock.WithLease(0)); return err },
		func() error { _, err := c.Mutex("x").TryLock(ctx, lock.WithLease(-1)); return err },
		func() error { _, err := c.Mutex("x").Lock(ctx, lock.WithWait(-time.Second)); return err },
	} {
		if err := call(); !errors.Is(err, lock.ErrInvalid) {
			t.Fatalf("err = %v, want ErrInvalid", err)
		}
	}
	if after := commandCalls(t, srv); after != before {
		t.Fatalf("%d commands reached Redis for invalid calls", after-before)
	}
}

func TestNoScriptFallsBackToEval(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv)
	ctx := testkit.Context(t)
	lease, err := c.Mutex("noscript").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Do("SCRIPT", "FLUSH")
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after SCRIPT FLUSH: %v", err)
	}
	srv.Do("SCRIPT", "FLUSH")
	lease, err = c.Mutex("noscript").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after SCRIPT FLUSH: %v", err)
	}
	_ = lease.Unlock(ctx)
}

// A holder whose Redis stops answering is told before its lease could
// expire: after Done, the key is still there, still ours, with TTL left.
func TestPausedRedisCancelsLeaseBeforeExpiry(t *testing.T) {
	const leaseTime = 2 * time.Second
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv, lock.WithLeaseTime(leaseTime))
	ctx := testkit.Context(t)
	lease, err := c.Mutex("paused").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	paused := time.Now()
	select {
	case <-lease.Done():
	case <-time.After(leaseTime):
		srv.Resume()
		t.Fatalf("lease not cancelled within the %v lease of a paused server", leaseTime)
	}
	lostAfter := time.Since(paused)
	srv.Resume()
	if !errors.Is(lease.Err(), lock.ErrLockLost) || !errors.Is(context.Cause(lease.Context()), lock.ErrLockLost) {
		t.Fatalf("Err %v, cause %v: want ErrLockLost", lease.Err(), context.Cause(lease.Context()))
	}
	ttl := srv.Do("PTTL", "lockcron:{paused}").(int64)
	owner := srv.Do("HGET", "lockcron:{paused}", lease.Owner())
	if ttl <= 0 || owner != "1" {
		t.Fatalf("lost %v after the pause, but the key had already expired (PTTL %d, holds %v)", lostAfter, ttl, owner)
	}
	// Unlock after the loss frees the key, since it is still ours.
	if err := lease.Unlock(ctx); !errors.Is(err, lock.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lease: %v, want ErrNotHeld", err)
	}
	if n := srv.Do("EXISTS", "lockcron:{paused}").(int64); n != 0 {
		t.Fatal("Unlock after a loss by deadline left our key behind")
	}
}

func TestRestartEmptyIsDetectedAndTokensGrow(t *testing.T) {
	t.Parallel()
	const leaseTime = 600 * time.Millisecond
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv, lock.WithLeaseTime(leaseTime))
	ctx := testkit.Context(t)
	lease, err := c.Mutex("restart").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	select {
	case <-lease.Done():
	case <-time.After(leaseTime):
		t.Fatal("holder did not learn of the restart within one lease")
	}
	if !errors.Is(lease.Err(), lock.ErrLockLost) {
		t.Fatalf("Err %v, want ErrLockLost", lease.Err())
	}
	next, err := c.Mutex("restart").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Unlock(ctx)
	if next.Token() <= lease.Token() {
		t.Fatalf("token after an empty restart %d, not above %d", next.Token(), lease.Token())
	}
}

func TestUnreachableRedisFailsWithinDeadline(t *testing.T) {
	for _, fault := range []string{"killed", "paused"} {
		t.Run(fault, func(t *testing.T) {
			srv := redistest.Start(t)
			c := locktest.NewClient(t, srv)
			if fault == "killed" {
				srv.Kill()
			} else {
				srv.Pause()
				t.Cleanup(srv.Resume)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := c.Mutex("down").Lock(ctx)
			if err == nil {
				t.Fatal("Lock succeeded against a server that is down")
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("Lock returned after %v with a 300ms deadline: %v", d, err)
			}
		})
	}
}

func TestWaiterAcquiresAfterPubSubKilled(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, waiter := locktest.NewClient(t, srv), locktest.NewClient(t, srv) // 30s leases
	ctx := testkit.Context(t)
	lease, err := holder.Mutex("pubsub").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := locktest.LockAsync(ctx, waiter.Mutex("pubsub"))
	locktest.WaitForWaiter(t, waiter, "pubsub")
	waitSubscribers(t, srv, "lockcron:{pubsub}:channel", 1)
	srv.Do("CLIENT", "KILL", "TYPE", "pubsub")
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Within 5s, well short of the 30s TTL the waiter would otherwise sleep.
	locktest.AwaitAcquired(t, got, 5*time.Second)
}

func waitSubscribers(t *testing.T, srv *redistest.Server, channel string, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := srv.Do("PUBSUB", "NUMSUB", channel).([]any)
		if r[1].(int64) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("channel %s has %v subscribers, want %d", channel, r[1], want)
		}
		time.Sleep(time.Millisecond)
	}
}

func pubsubConns(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	list := strings.TrimSpace(srv.Do("CLIENT", "LIST", "TYPE", "pubsub").(string))
	if list == "" {
		return 0
	}
	return len(strings.Split(list, "\n"))
}

// One Pub/Sub connection per Client serves every lock name and waiter, and
// nothing stays subscribed after the waits end or the Client closes.
func TestOneSharedSubscriptionNoLeaks(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder := locktest.NewClient(t, srv)
	c, err := lock.New(srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx := testkit.Context(t)
	names := []string{"a", "b", "c"}
	var held []*lock.Lease
	for _, n := range names {
		l, err := holder.Mutex(n).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for _, n := range names {
		for range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := c.Mutex(n).Lock(ctx)
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					errs <- err
				}
			}()
		}
	}
	for _, n := range names {
		waitSubscribers(t, srv, "lockcron:{"+n+"}:channel", 1)
	}
	if n := pubsubConns(t, srv); n != 1 {
		t.Fatalf("%d Pub/Sub connections for 30 waiters on 3 names, want 1", n)
	}
	for _, l := range held {
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, n := range names {
		waitSubscribers(t, srv, "lockcron:{"+n+"}:channel", 0)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for pubsubConns(t, srv) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("Pub/Sub connection still open after Close")
		}
		time.Sleep(time.Millisecond)
	}
}

// Under contention on one Client, an unlock wakes one waiter, not all: an
// acquisition costs its acquire and its release, plus the odd subscription.
func TestContentionCommandsPerAcquisition(t *testing.T) {
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv)
	ctx := testkit.Context(t)
	mu := c.Mutex("contended")
	const goroutines, rounds = 8, 40
	before := commandCalls(t, srv)
	overlaps, err := locktest.Contend(ctx, []lock.Locker{mu}, goroutines, rounds, 200*time.Microsecond)
	if err != nil || overlaps != 0 {
		t.Fatalf("Contend: %d overlaps, %v", overlaps, err)
	}
	calls := commandCalls(t, srv) - before
	per := float64(calls) / (goroutines * rounds)
	t.Logf("%d commands for %d acquisitions: %.2f each", calls, goroutines*rounds, per)
	if per > 3 {
		t.Fatalf("%.2f commands per acquisition, want at most 3", per)
	}
}

func TestClientIDInOwner(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	c1 := locktest.NewClient(t, srv, lock.WithClientID("replica-a"))
	c2 := locktest.NewClient(t, srv, lock.WithClientID("replica-a"))
	ctx := testkit.Context(t)
	l1, err := c1.Mutex("x").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l1.Unlock(ctx)
	if !strings.HasPrefix(l1.Owner(), "replica-a:") {
		t.Fatalf("owner %q does not start with the client id", l1.Owner())
	}
	// Same id, other Client: still another owner.
	if _, err := c2.Mutex("x").TryLock(ctx); !errors.Is(err, lock.ErrLocked) {
		t.Fatalf("TryLock by a Client with the same id: %v, want ErrLocked", err)
	}
	if c1.ID() != "replica-a" {
		t.Fatalf("ID() = %q", c1.ID())
	}
}

// Deleting the key by hand (no unlock message) is found by the next
// renewal: within lease/3 plus a margin.
func TestKeyDeletedByHandCancelsLease(t *testing.T) {
	const leaseTime = 300 * time.Millisecond
	srv := redistest.Start(t)
	c := locktest.NewClient(t, srv, lock.WithLeaseTime(leaseTime))
	ctx := testkit.Context(t)
	lease, err := c.Mutex("deleted").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv.Do("DEL", "lockcron:{deleted}")
	deleted := time.Now()
	select {
	case <-lease.Done():
		if d := time.Since(deleted); d > leaseTime/3+200*time.Millisecond {
			t.Fatalf("loss noticed %v after the delete", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("lease not cancelled after its key was deleted")
	}
	if !errors.Is(context.Cause(lease.Context()), lock.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", context.Cause(lease.Context()))
	}
}

// A Client that waits for the same lock again soon finds its channel still
// subscribed: no SUBSCRIBE, and no second attempt after its first.
func TestSubscriptionLingersBetweenWaits(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	holder, waiter := locktest.NewClient(t, srv), locktest.NewClient(t, srv)
	ctx := testkit.Context(t)
	round := func() {
		t.Helper()
		h, err := holder.Mutex("linger").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := locktest.LockAsync(ctx, waiter.Mutex("linger"))
		locktest.WaitForWaiter(t, waiter, "linger")
		waitSubscribers(t, srv, "lockcron:{linger}:channel", 1)
		if err := h.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		locktest.AwaitAcquired(t, got, 5*time.Second)
	}
	round()
	subs := srv.Do("INFO", "commandstats").(string)
	before := commandCalls(t, srv)
	round()
	if after := srv.Do("INFO", "commandstats").(string); strings.Count(after, "cmdstat_subscribe:calls=1,") != 1 {
		t.Fatalf("the second wait subscribed again:\n%s\nbefore:\n%s", after, subs)
	}
	// Holder: lock, unlock. Waiter: one failed attempt, one after the
	// unlock message, unlock.
	if n := commandCalls(t, srv) - before; n != 5 {
		t.Fatalf("second round sent %d commands, want 5", n)
	}
}
