package lock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// inspectLease is the lease time of the Clients of these tests: every TTL
// that Locks reports lies in (0, inspectLease].
const inspectLease = 10 * time.Second

func inspectUnlock(t *testing.T, ctx context.Context, l *lock.Lease) {
	t.Helper()
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock %q: %v", l.Name(), err)
	}
}

func inspectList(t *testing.T, ctx context.Context, c *lock.Client) []lock.LockInfo {
	t.Helper()
	start := time.Now()
	got, err := c.Locks(ctx)
	if err != nil {
		t.Fatalf("Locks: %v", err)
	}
	t.Logf("Locks: %d locks in %v", len(got), time.Since(start))
	return got
}

// inspectWaitFor polls c until n goroutines of it wait for name.
// inspectLockAsync takes l in a goroutine, releases it at once, and sends the
// outcome on the channel it returns.
func inspectLockAsync(ctx context.Context, l lock.Locker) <-chan error {
	errc := make(chan error, 1)
	go func() {
		lease, err := l.Lock(ctx)
		if err == nil {
			err = lease.Unlock(ctx)
		}
		errc <- err
	}()
	return errc
}

func inspectAwait(t *testing.T, errcs ...<-chan error) {
	t.Helper()
	timeout := time.After(15 * time.Second)
	for _, errc := range errcs {
		select {
		case err := <-errc:
			if err != nil {
				t.Errorf("waiter: %v", err)
			}
		case <-timeout:
			t.Fatal("waiters did not finish within 15s")
		}
	}
}

// inspectTTLs checks that every TTL of a held lock lies within the lease, and
// zeroes them so that the rest compares exactly.
func inspectTTLs(t *testing.T, infos []lock.LockInfo) []lock.LockInfo {
	t.Helper()
	ok := func(d time.Duration) bool { return d > 0 && d <= inspectLease }
	out := slices.Clone(infos)
	for i := range out {
		in := &out[i]
		if len(in.Holders) > 0 && !ok(in.TTL) {
			t.Errorf("%s %q: TTL %v, want within (0, %v]", in.Kind, in.Name, in.TTL, inspectLease)
		}
		if len(in.Holders) == 0 && in.TTL != 0 {
			t.Errorf("%s %q: TTL %v without a holder, want 0", in.Kind, in.Name, in.TTL)
		}
		in.TTL = 0
		in.Holders = slices.Clone(in.Holders)
		for j := range in.Holders {
			h := &in.Holders[j]
			if !ok(h.TTL) || h.TTL > infos[i].TTL {
				t.Errorf("%s %q: holder %s: TTL %v, want within (0, %v]", in.Kind, in.Name, h.Owner, h.TTL, infos[i].TTL)
			}
			h.TTL = 0
		}
	}
	return out
}

func inspectSame(t *testing.T, got, want []lock.LockInfo) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("Locks: %d locks:\n%s\nwant %d:\n%s", len(got), inspectDump(got), len(want), inspectDump(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Kind != w.Kind || g.TTL != w.TTL || g.Token != w.Token || g.Waiters != w.Waiters ||
			!slices.Equal(g.Holders, w.Holders) || (g.Err == nil) != (w.Err == nil) {
			t.Errorf("Locks[%d]:\n%s\nwant\n%s", i, inspectDump(got[i:i+1]), inspectDump(want[i:i+1]))
		}
	}
}

func inspectDump(infos []lock.LockInfo) string {
	var b strings.Builder
	for _, in := range infos {
		fmt.Fprintf(&b, "  %s %q ttl=%v token=%d waiters=%d err=%v\n", in.Kind, in.Name, in.TTL, in.Token, in.Waiters, in.Err)
		for _, h := range in.Holders {
			fmt.Fprintf(&b, "    %+v\n", h)
		}
	}
	return b.String()
}

// inspectSortHolders orders holders as Locks does: write, read, permit, then by
// owner id.
func inspectSortHolders(hs []lock.Holder) []lock.Holder {
	rank := map[string]int{"write": 0, "read": 1}
	slices.SortFunc(hs, func(a, b lock.Holder) int {
		ra, ok := rank[a.Mode]
		if !ok {
			ra = 2
		}
		rb, ok := rank[b.Mode]
		if !ok {
			rb = 2
		}
		if ra != rb {
			return ra - rb
		}
		return strings.Compare(a.Owner, b.Owner)
	})
	return hs
}

// Every kind, held or waited for, is listed with its owners, holds,
// tokens, TTLs and waiters; ledgers and a lone token are not; after every
// unlock the list is empty.
func TestLocks(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, e locktest.Store) {
		ctx := testkit.Context(t)
		c1 := e.NewClient(t, lock.WithLeaseTime(inspectLease), lock.WithClientID("one"))
		c2 := e.NewClient(t, lock.WithLeaseTime(inspectLease), lock.WithClientID("two"))

		if got := inspectList(t, ctx, c1); len(got) != 0 {
			t.Fatalf("Locks on an empty store:\n%s", inspectDump(got))
		}

		plain := locktest.MustLock(t, ctx, c1.Mutex("plain"))
		again := locktest.MustLock(t, ctx, c1.Mutex("again"))
		if l := locktest.MustLock(t, again.Context(), c1.Mutex("again")); l != again {
			t.Fatal("re-entry gave another lease")
		}

		fair := locktest.MustLock(t, ctx, c1.FairMutex("fair"))
		fw1 := inspectLockAsync(ctx, c2.FairMutex("fair"))
		locktest.WaitQueued(t, c2, "fair", 1)
		fw2 := inspectLockAsync(ctx, c2.FairMutex("fair"))
		locktest.WaitQueued(t, c2, "fair", 2)

		r1 := locktest.MustLock(t, ctx, c1.RWMutex("rw").RLocker())
		r2 := locktest.MustLock(t, ctx, c2.RWMutex("rw").RLocker())
		writer := inspectLockAsync(ctx, c2.RWMutex("rw"))
		locktest.WaitQueued(t, c2, "rw", 1)

		p1 := locktest.MustLock(t, ctx, c1.Semaphore("sem", 3))
		p2 := locktest.MustLock(t, ctx, c2.Semaphore("sem", 3))

		// A ledger, whose lock is free again, and a lone fencing token.
		g, err := fleet.New(c1).Ledger("job", "daily")
		if err != nil {
			t.Fatal(err)
		}
		cl, err := g.Claim(ctx, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ok", Tries: 1}); err != nil {
			t.Fatal(err)
		}
		inspectUnlock(t, ctx, locktest.MustLock(t, ctx, c1.Mutex("gone")))
		if e.Server != nil {
			n, err := e.Server.Client().Exists(ctx, g.Key(), "lockcron:{gone}:token", "lockcron:{job}:token").Result()
			if err != nil || n != 3 {
				t.Fatalf("the ledger and the tokens: %d of 3 keys exist (%v)", n, err)
			}
		}

		want := []lock.LockInfo{
			{Name: "again", Kind: "mutex", Token: again.Token(), Holders: []lock.Holder{{Owner: again.Owner(), Holds: 2}}},
			{Name: "fair", Kind: "mutex", Token: fair.Token(), Waiters: 2, Holders: []lock.Holder{{Owner: fair.Owner(), Holds: 1}}},
			{Name: "plain", Kind: "mutex", Token: plain.Token(), Holders: []lock.Holder{{Owner: plain.Owner(), Holds: 1}}},
			{Name: "rw", Kind: "rwmutex", Token: max(r1.Token(), r2.Token()), Waiters: 1, Holders: inspectSortHolders([]lock.Holder{
				{Owner: r1.Owner(), Holds: 1, Mode: "read", Token: r1.Token()},
				{Owner: r2.Owner(), Holds: 1, Mode: "read", Token: r2.Token()},
			})},
			{Name: "sem", Kind: "semaphore", Token: max(p1.Token(), p2.Token()), Holders: inspectSortHolders([]lock.Holder{
				{Owner: p1.Owner(), Holds: 1, Mode: "permit", Token: p1.Token()},
				{Owner: p2.Owner(), Holds: 1, Mode: "permit", Token: p2.Token()},
			})},
		}
		for _, c := range []*lock.Client{c1, c2} {
			got := inspectList(t, ctx, c)
			for _, in := range got {
				if in.Err != nil {
					t.Errorf("%s %q: %v", in.Kind, in.Name, in.Err)
				}
			}
			inspectSame(t, inspectTTLs(t, got), want)
		}

		inspectUnlock(t, ctx, again)
		inspectUnlock(t, ctx, again)
		for _, l := range []*lock.Lease{plain, fair, r1, r2, p1, p2} {
			inspectUnlock(t, ctx, l)
		}
		inspectAwait(t, fw1, fw2, writer)
		if got := inspectList(t, ctx, c1); len(got) != 0 {
			t.Fatalf("Locks after every unlock:\n%s", inspectDump(got))
		}
	})
}

// A write lease is listed as such, with the reader that the writer took
// beside it (a downgrade), each with its own token.
func TestLocksWriter(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, e locktest.Store) {
		ctx := testkit.Context(t)
		c := e.NewClient(t, lock.WithLeaseTime(inspectLease))
		rw := c.RWMutex("doc")
		w := locktest.MustLock(t, ctx, rw)
		r := locktest.MustLock(t, w.Context(), rw.RLocker())
		want := []lock.LockInfo{{Name: "doc", Kind: "rwmutex", Token: r.Token(), Holders: []lock.Holder{
			{Owner: w.Owner(), Holds: 1, Mode: "write", Token: w.Token()},
			{Owner: r.Owner(), Holds: 1, Mode: "read", Token: r.Token()},
		}}}
		inspectSame(t, inspectTTLs(t, inspectList(t, ctx, c)), want)
		inspectUnlock(t, ctx, w)
		inspectUnlock(t, ctx, r)
		if got := inspectList(t, ctx, c); len(got) != 0 {
			t.Fatalf("Locks after every unlock:\n%s", inspectDump(got))
		}
	})
}

// Leases whose time ran out in the store are not listed.
func TestLocksExpired(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, e locktest.Store) {
		ctx := testkit.Context(t)
		c := e.NewClient(t, lock.WithLeaseTime(inspectLease))
		// Long enough for all four to be taken and listed on a loaded
		// machine, short enough to wait out.
		short := lock.WithLease(time.Second)
		for _, l := range []lock.Locker{c.Mutex("m"), c.RWMutex("rw"), c.RWMutex("rr").RLocker(), c.Semaphore("s", 2)} {
			if _, err := l.Lock(ctx, short); err != nil {
				t.Fatal(err)
			}
		}
		if got := inspectList(t, ctx, c); len(got) != 4 {
			t.Fatalf("Locks: %d locks, want 4:\n%s", len(got), inspectDump(got))
		}
		deadline := time.Now().Add(6 * time.Second)
		for {
			got, err := c.Locks(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("Locks 6s after 1s leases:\n%s", inspectDump(got))
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// Locks lists the locks under the Client's own prefix only, even a prefix
// with characters that SCAN's MATCH reads as a pattern.
func TestLocksKeyPrefix(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, e locktest.Store) {
		ctx := testkit.Context(t)
		byPrefix := map[string]*lock.Client{
			"lockcron": e.NewClient(t, lock.WithLeaseTime(inspectLease)),
			"other":    e.NewClient(t, lock.WithLeaseTime(inspectLease), lock.WithKeyPrefix("other")),
			"lock*":    e.NewClient(t, lock.WithLeaseTime(inspectLease), lock.WithKeyPrefix("lock*")),
			"[lo]ck":   e.NewClient(t, lock.WithLeaseTime(inspectLease), lock.WithKeyPrefix("[lo]ck")),
		}
		owners := make(map[string]map[string]string) // prefix -> name -> owner
		for p, c := range byPrefix {
			owners[p] = make(map[string]string)
			for _, name := range []string{"shared", "only-" + p} {
				owners[p][name] = locktest.MustLock(t, ctx, c.Mutex(name)).Owner()
			}
		}
		for p, c := range byPrefix {
			got := inspectList(t, ctx, c)
			if len(got) != 2 {
				t.Errorf("prefix %q: %d locks, want 2:\n%s", p, len(got), inspectDump(got))
				continue
			}
			for _, in := range got {
				if want := owners[p][in.Name]; len(in.Holders) != 1 || in.Holders[0].Owner != want {
					t.Errorf("prefix %q: lock %q: holders %+v, want owner %q", p, in.Name, in.Holders, want)
				}
			}
		}
	})
}

// A key of the wrong type under the prefix is reported on its lock, with
// ErrBadKey; the listing goes on.
func TestLocksWrongType(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	c, err := lock.New(rdb, lock.WithLeaseTime(inspectLease))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	ok := locktest.MustLock(t, ctx, c.Mutex("ok"))
	tok := locktest.MustLock(t, ctx, c.Semaphore("tok", 2))
	pipe := rdb.TxPipeline()
	pipe.Set(ctx, "lockcron:{str}", "x", 0)
	pipe.HSet(ctx, "lockcron:{nottl}", "someone", 1)
	pipe.Set(ctx, "lockcron:{rwbad}:rw:readers", "x", 0)
	pipe.LPush(ctx, "lockcron:{sembad}:sem", "x")
	pipe.Set(ctx, "lockcron:{job}:ledger:x", "x", 0) // a ledger: skipped
	pipe.Set(ctx, "lockcron:{tok}:token", "x", 0)    // a token that is not a number: 0
	pipe.SAdd(ctx, "lockcron:{lone}:token", "x")     // a lone token: skipped
	pipe.Set(ctx, "lockcron:{ok}:events", "x", 0)    // not a key of a lock: skipped
	pipe.Set(ctx, "lockcron:nobrace", "x", 0)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}

	got := inspectList(t, ctx, c)
	type row struct{ name, kind, badKey string }
	want := []row{
		{"nottl", "mutex", "lockcron:{nottl}"},
		{"ok", "mutex", ""},
		{"rwbad", "rwmutex", "lockcron:{rwbad}:rw:readers"},
		{"sembad", "semaphore", "lockcron:{sembad}:sem"},
		{"str", "mutex", "lockcron:{str}"},
		{"tok", "semaphore", ""},
	}
	if len(got) != len(want) {
		t.Fatalf("Locks: %d locks, want %d:\n%s", len(got), len(want), inspectDump(got))
	}
	for i, w := range want {
		in := got[i]
		if in.Name != w.name || in.Kind != w.kind {
			t.Errorf("Locks[%d]: %s %q, want %s %q", i, in.Kind, in.Name, w.kind, w.name)
		}
		switch {
		case w.badKey == "" && in.Err != nil:
			t.Errorf("%s %q: %v", in.Kind, in.Name, in.Err)
		case w.badKey != "" && (!errors.Is(in.Err, lock.ErrBadKey) || !strings.Contains(in.Err.Error(), w.badKey)):
			t.Errorf("%s %q: Err %v, want ErrBadKey naming %q", in.Kind, in.Name, in.Err, w.badKey)
		}
	}
	if h := got[1].Holders; len(h) != 1 || h[0].Owner != ok.Owner() {
		t.Errorf("ok: holders %+v, want %s", h, ok.Owner())
	}
	if h := got[5].Holders; len(h) != 1 || h[0].Owner != tok.Owner() || h[0].Token != tok.Token() || got[5].Token != 0 {
		t.Errorf("tok: token %d, holders %+v, want %s with token %d, and no name token", got[5].Token, h, tok.Owner(), tok.Token())
	}

	// A fencing token key of another type is reported on the locks of its
	// name.
	if err := rdb.Del(ctx, "lockcron:{tok}:token").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, "lockcron:{tok}:token", "x", 1).Err(); err != nil {
		t.Fatal(err)
	}
	got = inspectList(t, ctx, c)
	if in := got[len(got)-1]; in.Name != "tok" || !errors.Is(in.Err, lock.ErrBadKey) || !strings.Contains(in.Err.Error(), "lockcron:{tok}:token") || len(in.Holders) != 1 {
		t.Errorf("tok: %s", inspectDump([]lock.LockInfo{in}))
	}
}

// Thousands of locks take several SCAN pages and pipelines, and tokens
// alone are skipped.
func TestLocksMany(t *testing.T) {
	ctx := testkit.Context(t)
	srv := redistest.Start(t)
	rdb := srv.Client()
	const n = 2500
	pipe := rdb.Pipeline()
	for i := range n {
		key := fmt.Sprintf("lockcron:{m%04d}", i)
		pipe.HSet(ctx, key, fmt.Sprintf("owner-%d", i), i%3+1)
		pipe.PExpire(ctx, key, time.Minute)
		pipe.Set(ctx, key+":token", i, time.Hour)
		pipe.Set(ctx, fmt.Sprintf("lockcron:{t%04d}:token", i), i, time.Hour)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	got := inspectList(t, ctx, c)
	if len(got) != n {
		t.Fatalf("Locks: %d locks, want %d", len(got), n)
	}
	for i, in := range got {
		want := lock.Holder{Owner: fmt.Sprintf("owner-%d", i), Holds: i%3 + 1}
		if in.Name != fmt.Sprintf("m%04d", i) || in.Token != int64(i) || len(in.Holders) != 1 ||
			in.Holders[0].Owner != want.Owner || in.Holders[0].Holds != want.Holds || in.TTL <= 0 || in.TTL > time.Minute {
			t.Fatalf("Locks[%d]: %s", i, inspectDump(got[i:i+1]))
		}
	}
}

// On a Cluster, Locks walks every primary.
func TestLocksCluster(t *testing.T) {
	ctx := testkit.Context(t)
	cl := redistest.StartCluster(t)
	c, err := lock.New(cl.Client(), lock.WithLeaseTime(inspectLease))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })

	// Names until each primary holds three.
	perPrimary := make(map[string]int)
	var names []string
	for i := 0; len(names) < 3*len(cl.Primaries()); i++ {
		name := fmt.Sprintf("job-%d", i)
		addr := cl.PrimaryForKey("lockcron:{" + name + "}").Addr()
		if perPrimary[addr] < 3 {
			perPrimary[addr]++
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var leases []*lock.Lease
	var want []lock.LockInfo
	for i, name := range names {
		var l *lock.Lease
		switch i % 3 {
		case 0:
			l = locktest.MustLock(t, ctx, c.Mutex(name))
			want = append(want, lock.LockInfo{Name: name, Kind: "mutex", Token: l.Token(), Holders: []lock.Holder{{Owner: l.Owner(), Holds: 1}}})
		case 1:
			l = locktest.MustLock(t, ctx, c.RWMutex(name))
			want = append(want, lock.LockInfo{Name: name, Kind: "rwmutex", Token: l.Token(), Holders: []lock.Holder{{Owner: l.Owner(), Holds: 1, Mode: "write", Token: l.Token()}}})
		case 2:
			l = locktest.MustLock(t, ctx, c.Semaphore(name, 2))
			want = append(want, lock.LockInfo{Name: name, Kind: "semaphore", Token: l.Token(), Holders: []lock.Holder{{Owner: l.Owner(), Holds: 1, Mode: "permit", Token: l.Token()}}})
		}
		leases = append(leases, l)
	}
	inspectSame(t, inspectTTLs(t, inspectList(t, ctx, c)), want)
	for _, l := range leases {
		inspectUnlock(t, ctx, l)
	}
	if got := inspectList(t, ctx, c); len(got) != 0 {
		t.Fatalf("Locks after every unlock:\n%s", inspectDump(got))
	}
}

// Locks returns ctx's error when ctx has ended, and ErrClosed after Close.
func TestLocksErrors(t *testing.T) {
	t.Parallel()
	locktest.Matrix(t, func(t *testing.T, e locktest.Store) {
		c := e.NewClient(t)
		locktest.MustLock(t, testkit.Context(t), c.Mutex("a"))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := c.Locks(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("Locks on an ended ctx: %v, want context.Canceled", err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Locks(context.Background()); !errors.Is(err, lock.ErrClosed) {
			t.Errorf("Locks after Close: %v, want ErrClosed", err)
		}
	})
}
