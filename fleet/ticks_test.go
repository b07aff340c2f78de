package fleet_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// countHook counts the commands a go-redis client sends, pipelines
// included.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// twoClients are two Clients of one store; on Redis, the second's commands
// are counted (nil on memory).
func twoClients(t *testing.T, be string) (a, b *lock.Client, bCmds *countHook) {
	t.Helper()
	st := locktest.NewStore(t, be)
	if st.Server == nil {
		return st.NewClient(t), st.NewClient(t), nil
	}
	rdb := st.Server.Client()
	bCmds = &countHook{}
	rdb.AddHook(bCmds)
	b, err := lock.New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return st.NewClient(t), b, bCmds
}

func claimFinish(t *testing.T, ctx context.Context, g *fleet.Ledger, tick int64, done bool) {
	t.Helper()
	cl, err := g.Claim(ctx, tick, false)
	if err != nil {
		t.Fatalf("claim of %d: %v", tick, err)
	}
	if err := cl.Finish(ctx, fleet.Record{Done: done, Outcome: "ran", Tries: cl.Try, Seen: tick}); err != nil {
		t.Fatalf("finish of %d: %v", tick, err)
	}
}

// A Watch hears the ticks other Clients claim and finish (done or given
// back), from their announcements, and its own Client's finishes at once;
// a Claim of a tick heard done returns ErrDone without a command; after
// stop, nothing more.
func TestLedgerWatch(t *testing.T) {
	t.Parallel()
	for _, be := range locktest.Backends {
		for _, fair := range []bool{false, true} {
			name := be
			if fair {
				name += "/fair"
			}
			t.Run(name, func(t *testing.T) {
				ctx := testkit.Context(t)
				a, b, bCmds := twoClients(t, be)
				ledger := func(c *lock.Client) *fleet.Ledger {
					mk := fleet.New(c).Ledger
					if fair {
						mk = fleet.New(c).FairLedger
					}
					g, err := mk("watch", "job")
					if err != nil {
						t.Fatal(err)
					}
					return g
				}
				ga, gb := ledger(a), ledger(b)
				heardB := make(chan fleet.TickEvent, 1000)
				stopB, err := gb.Watch(func(ev fleet.TickEvent) { heardB <- ev })
				if err != nil {
					t.Fatal(err)
				}
				heardA := make(chan fleet.TickEvent, 1000)
				stopA, err := ga.Watch(func(ev fleet.TickEvent) { heardA <- ev })
				if err != nil {
					t.Fatal(err)
				}
				defer stopA()

				// The Redis subscription is confirmed shortly after Watch:
				// finish ticks until b hears one.
				tick := int64(0)
				deadline := time.Now().Add(5 * time.Second)
				for heard := false; !heard; {
					if time.Now().After(deadline) {
						t.Fatal("after 5s b had heard no finish")
					}
					tick++
					claimFinish(t, ctx, ga, tick, true)
					timeout := time.After(50 * time.Millisecond)
					for waiting := true; waiting && !heard; {
						select {
						case ev := <-heardB:
							heard = ev == fleet.TickEvent{Tick: tick, Done: true}
						case <-timeout:
							waiting = false
						}
					}
				}
				next := func(ch chan fleet.TickEvent, who string) fleet.TickEvent {
					t.Helper()
					select {
					case ev := <-ch:
						return ev
					case <-time.After(5 * time.Second):
						t.Fatalf("%s heard nothing in 5s", who)
						return fleet.TickEvent{}
					}
				}
				for range len(heardA) {
					<-heardA // a's own finishes so far
				}
				for range len(heardB) {
					<-heardB
				}

				tick++
				claimFinish(t, ctx, ga, tick, false) // given back
				for _, want := range []fleet.TickEvent{{Tick: tick, Claimed: true, Lease: lock.DefaultLeaseTime}, {Tick: tick}} {
					if ev := next(heardB, "b"); ev != want {
						t.Fatalf("b heard %+v, want %+v", ev, want)
					}
				}
				if ev, want := next(heardA, "a"), (fleet.TickEvent{Tick: tick, Done: false}); ev != want {
					t.Fatalf("a heard its own finish as %+v, want %+v (and not its own claim)", ev, want)
				}
				claimFinish(t, ctx, ga, tick, true) // taken again, done
				for _, want := range []fleet.TickEvent{{Tick: tick, Claimed: true, Lease: lock.DefaultLeaseTime}, {Tick: tick, Done: true}} {
					if ev := next(heardB, "b"); ev != want {
						t.Fatalf("b heard %+v, want %+v", ev, want)
					}
				}
				if ev, want := next(heardA, "a"), (fleet.TickEvent{Tick: tick, Done: true}); ev != want {
					t.Fatalf("a heard %+v, want %+v", ev, want)
				}

				// A claim that finds the lock held for an earlier tick lets
				// its tick go, and says so.
				held, err := ga.Claim(ctx, tick+10, false)
				if err != nil {
					t.Fatal(err)
				}
				if ev, want := next(heardB, "b"), (fleet.TickEvent{Tick: tick + 10, Claimed: true, Lease: lock.DefaultLeaseTime}); ev != want {
					t.Fatalf("b heard %+v, want %+v", ev, want)
				}
				if _, err := gb.Claim(ctx, tick+11, false); !errors.Is(err, lock.ErrLocked) {
					t.Fatalf("b's claim of tick %d while %d runs: %v, want ErrLocked", tick+11, tick+10, err)
				}
				if ev, want := next(heardA, "a"), (fleet.TickEvent{Tick: tick + 11, Busy: true}); ev != want {
					t.Fatalf("a heard %+v, want %+v", ev, want)
				}
				if err := held.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: tick + 11}); err != nil {
					t.Fatal(err)
				}
				if ev, want := next(heardB, "b"), (fleet.TickEvent{Tick: tick + 10, Done: true}); ev != want {
					t.Fatalf("b heard %+v, want %+v", ev, want)
				}
				if ev, want := next(heardA, "a"), (fleet.TickEvent{Tick: tick + 10, Done: true}); ev != want {
					t.Fatalf("a heard %+v, want %+v", ev, want)
				}
				tick += 10

				var before int64
				if bCmds != nil {
					before = bCmds.n.Load()
				}
				if _, err := gb.Claim(ctx, tick, false); !errors.Is(err, fleet.ErrDone) {
					t.Fatalf("b's claim of a tick heard done: %v, want ErrDone", err)
				}
				if bCmds != nil {
					if n := bCmds.n.Load() - before; n != 0 {
						t.Errorf("b's claim of a tick heard done sent %d commands, want 0", n)
					}
				}
				// A tick not heard done is asked for as before.
				cl, err := gb.Claim(ctx, tick+1, false, lock.WithWait(0))
				if err != nil {
					t.Fatalf("b's claim of tick %d: %v", tick+1, err)
				}
				if err := cl.Finish(ctx, fleet.Record{Done: true, Outcome: "ran", Tries: 1, Seen: tick + 1}); err != nil {
					t.Fatal(err)
				}
				for _, want := range []fleet.TickEvent{{Tick: tick + 1, Claimed: true, Lease: lock.DefaultLeaseTime}, {Tick: tick + 1, Done: true}} {
					if ev := next(heardA, "a"); ev != want {
						t.Fatalf("a heard %+v, want %+v", ev, want)
					}
				}

				stopB()
				stopB() // twice is fine
				claimFinish(t, ctx, ga, tick+2, true)
				if ev := next(heardA, "a"); ev != (fleet.TickEvent{Tick: tick + 2, Done: true}) {
					t.Fatalf("a heard %+v, want tick %d done", ev, tick+2)
				}
				select {
				case ev := <-heardB:
					if ev.Tick == tick+2 {
						t.Fatalf("b heard %+v after it stopped", ev)
					}
				case <-time.After(100 * time.Millisecond):
				}
			})
		}
	}
}

// Heartbeat keeps a group of live members on the store's clock: a member
// is gone within its ttl after its last heartbeat, and at once after Leave.
func TestHeartbeat(t *testing.T) {
	for _, be := range locktest.Backends {
		t.Run(be, func(t *testing.T) {
			ctx := testkit.Context(t)
			a, b, _ := twoClients(t, be)
			beat := func(c *lock.Client, member string, ttl time.Duration) []string {
				t.Helper()
				m, err := fleet.New(c).Heartbeat(ctx, "fleet", member, ttl)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			if m := beat(a, "a", time.Hour); !slices.Equal(m, []string{"a"}) {
				t.Fatalf("members %v, want [a]", m)
			}
			if m := beat(b, "b", time.Hour); !slices.Equal(m, []string{"a", "b"}) {
				t.Fatalf("members %v, want [a b]", m)
			}
			if err := fleet.New(a).Leave(ctx, "fleet", "a"); err != nil {
				t.Fatal(err)
			}
			if m := beat(b, "b", time.Hour); !slices.Equal(m, []string{"b"}) {
				t.Fatalf("after a left: members %v, want [b]", m)
			}
			// A member that stops heartbeating is gone within its ttl.
			beat(a, "short", 100*time.Millisecond)
			start := time.Now()
			for m := beat(b, "b", time.Hour); !slices.Equal(m, []string{"b"}); m = beat(b, "b", time.Hour) {
				if time.Since(start) > 5*time.Second {
					t.Fatalf("members %v 5s after a 100ms heartbeat, want [b]", m)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if d := time.Since(start); d < 90*time.Millisecond {
				t.Errorf("a member with a 100ms ttl was gone after %v", d)
			}
			// Other groups are apart.
			if m := beat(a, "x", time.Hour); !slices.Equal(m, []string{"b", "x"}) {
				t.Fatalf("members %v, want [b x]", m)
			}
			if m, err := fleet.New(a).Heartbeat(ctx, "other", "y", time.Hour); err != nil || !slices.Equal(m, []string{"y"}) {
				t.Fatalf("other group: %v, %v; want [y]", m, err)
			}
			for _, bad := range []struct {
				group, member string
				ttl           time.Duration
			}{{"", "a", time.Second}, {"{g}", "a", time.Second}, {"g", "", time.Second}, {"g", "a", 0}} {
				if _, err := fleet.New(a).Heartbeat(ctx, bad.group, bad.member, bad.ttl); !errors.Is(err, lock.ErrInvalid) {
					t.Errorf("Heartbeat(%q, %q, %v): %v, want ErrInvalid", bad.group, bad.member, bad.ttl, err)
				}
			}
		})
	}
}

// A group key of another type is reported with its name, not overwritten.
func TestHeartbeatBadKey(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	c := locktest.Made(t, func(o ...lock.Option) (*lock.Client, error) { return lock.New(srv.Client(), o...) }, nil)
	srv.Do("SET", "lockcron:members:{fleet}", "x")
	_, err := fleet.New(c).Heartbeat(ctx, "fleet", "a", time.Second)
	if !errors.Is(err, lock.ErrBadKey) || !strings.Contains(err.Error(), "lockcron:members:{fleet}") {
		t.Fatalf("Heartbeat on a string key: %v, want ErrBadKey naming the key", err)
	}
	if v := srv.Do("GET", "lockcron:members:{fleet}"); v != "x" {
		t.Fatalf("the key now holds %v, want it untouched", v)
	}
}

// Claims and finishes are announced in batches: many ledgers' ticks
// claimed and finished at once cost a few messages, each heard by every
// watcher, not one message per tick per watcher.
func TestAnnouncementsBatched(t *testing.T) {
	t.Parallel()
	st := locktest.NewStore(t, "redis")
	ctx := testkit.Context(t)
	a, b := st.NewClient(t), st.NewClient(t)
	const jobs = 100
	var ga []*fleet.Ledger
	heard := make(chan fleet.TickEvent, 4*jobs)
	for i := range jobs {
		name := "batch-" + strconv.Itoa(i)
		g, err := fleet.New(a).Ledger(name, name)
		if err != nil {
			t.Fatal(err)
		}
		stop, err := g.Watch(func(fleet.TickEvent) {})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		gb, err := fleet.New(b).Ledger(name, name)
		if err != nil {
			t.Fatal(err)
		}
		stop, err = gb.Watch(func(ev fleet.TickEvent) { heard <- ev })
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		ga = append(ga, g)
	}
	// b's subscription is confirmed shortly after Watch: a first round
	// until b hears it.
	testkit.Eventually(t, 5*time.Second, "b hears a's first finish", func() bool {
		claimFinish(t, ctx, ga[0], time.Now().UnixMilli(), true)
		select {
		case <-heard:
			return true
		case <-time.After(20 * time.Millisecond):
			return false
		}
	})
	publishes := func() int64 {
		info, err := st.Server.Client().Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\r\n") {
			if rest, ok := strings.CutPrefix(line, "cmdstat_publish:calls="); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				return n
			}
		}
		return 0
	}
	for len(heard) > 0 {
		<-heard
	}
	before := publishes()
	tick := time.Now().UnixMilli() + 1000
	var wg sync.WaitGroup
	for _, g := range ga {
		wg.Go(func() { claimFinish(t, ctx, g, tick, true) })
	}
	wg.Wait()
	claimed, done := fleet.TickEvent{Tick: tick, Claimed: true, Lease: lock.DefaultLeaseTime}, fleet.TickEvent{Tick: tick, Done: true}
	got := map[fleet.TickEvent]int{}
	timeout := time.After(5 * time.Second)
	for got[claimed] < jobs || got[done] < jobs {
		select {
		case ev := <-heard:
			got[ev]++
		case <-timeout:
			t.Fatalf("b heard %v in 5s, want %d claims and %d finishes of tick %d", got, jobs, jobs, tick)
		}
	}
	// Each finish also publishes the lock's own unlock message (for its
	// waiters): jobs of them, and the announcements besides.
	if n := publishes() - before - jobs; n > 2*jobs/10 {
		t.Errorf("%d ledgers' claims and finishes took %d announcements, want at most %d", jobs, n, 2*jobs/10)
	} else {
		t.Logf("%d claims and %d finishes announced in %d messages", jobs, jobs, n)
	}
}
