package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/bench/internal/benchutil"
	"github.com/lockcron/lockcron/internal/faultproxy"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

// The lock's two faults, measured from outside with go-redis's defaults
// (its own dialer, pool and retries) and a 1 s watchdog lease, on a
// redis-server of their own (the restart kills it):
//
//   - restart: 8 names held by one Client, 2 waiting Clients with a
//     goroutine on each name; Redis is killed, stays down for
//     faultOutage (300 ms after the waiters have queued), and is started
//     again empty. The figure is the time
//     from the restart (the server's own start-up counted) to the first
//     acquisition of each name, over faultRounds rounds; goal p90 ≤ 300 ms.
//   - slow network: one Client through a TCP proxy that adds a round trip
//     of 0.30, 0.35 and 0.39 of the lease to every request, holding
//     faultLeases leases for faultHold; the figure is how many were lost
//     (Redis never drops a key meanwhile); goal none. Twice: the leases
//     taken while the round trip is slow already, and taken on a fast
//     network that then turns slow while they are held (the go-redis pool
//     then has one connection, warmed for the acquisitions, and must grow).
const (
	faultLease  = time.Second
	faultNames  = 8
	faultRounds = 3
	faultOutage = 4 * time.Second
	faultLeases = 7
	faultHold   = 4 * time.Second
)

// runFaults measures both faults and prints their rows and targets.
func runFaults(ctx context.Context, w io.Writer) error {
	fmt.Fprintf(w, "## Lock faults (1 s lease, go-redis defaults); load average at the start: %s\n\n", benchutil.Loadavg())
	p50, p90, err := restartFigure(ctx)
	if err != nil {
		return fmt.Errorf("faults: restart: %w", err)
	}
	fmt.Fprintf(w, "| fault | figure | goal | |\n|---|---|---|---|\n")
	fmt.Fprintf(w, "| empty restart after %v down: first acquisition per name, %d names × %d rounds | p50 %v, p90 %v | p90 ≤ 300ms | %s |\n",
		faultOutage, faultNames, faultRounds, p50.Round(time.Millisecond), p90.Round(time.Millisecond), passMiss(p90 <= 300*time.Millisecond))
	for _, warm := range []bool{false, true} {
		for _, ratio := range []float64{0.30, 0.35, 0.39} {
			lost, err := slowFigure(ctx, ratio, warm)
			if err != nil {
				return fmt.Errorf("faults: slow network %.2f: %w", ratio, err)
			}
			how := "taken on the slow network"
			if warm {
				how = "taken, then the network slows"
			}
			fmt.Fprintf(w, "| round trip +%.2f× the lease, %d leases %s, held %v | %d lost | 0 | %s |\n",
				ratio, faultLeases, how, faultHold, lost, passMiss(lost == 0))
		}
	}
	fmt.Fprintf(w, "\nload average at the end: %s\n", benchutil.Loadavg())
	return nil
}

func passMiss(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// restartFigure returns the p50 and p90 of the time from an empty restart to
// the first acquisition of each name.
func restartFigure(ctx context.Context) (p50, p90 time.Duration, err error) {
	srv, err := redistest.Launch()
	if err != nil {
		return 0, 0, err
	}
	defer srv.Close()
	newClient := func() (*lock.Client, func(), error) {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		c, err := lock.New(rdb, lock.WithLeaseTime(faultLease))
		if err != nil {
			_ = rdb.Close()
			return nil, nil, err
		}
		return c, func() { _ = c.Close(); _ = rdb.Close() }, nil
	}
	holder, closeHolder, err := newClient()
	if err != nil {
		return 0, 0, err
	}
	defer closeHolder()
	var waiters []*lock.Client
	for range 2 {
		c, closeC, err := newClient()
		if err != nil {
			return 0, 0, err
		}
		defer closeC()
		waiters = append(waiters, c)
	}
	var delays []time.Duration
	for round := range faultRounds {
		name := func(i int) string { return fmt.Sprintf("restart-%d-%d", round, i) }
		for i := range faultNames {
			if _, err := holder.Mutex(name(i)).Lock(ctx); err != nil {
				return 0, 0, err
			}
		}
		got := make(chan time.Time, faultNames*len(waiters))
		errs := make(chan error, faultNames*len(waiters))
		wctx, cancel := context.WithTimeout(ctx, faultOutage+30*time.Second)
		var wg sync.WaitGroup
		for i := range faultNames {
			for _, w := range waiters {
				wg.Go(func() {
					l, err := w.Mutex(name(i)).Lock(wctx)
					if err != nil {
						errs <- err
						return
					}
					got <- time.Now()
					_ = l.Unlock(wctx)
				})
			}
		}
		for i := range faultNames {
			for _, w := range waiters {
				for w.Waiting(name(i)) < 1 && wctx.Err() == nil {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}
		// The outage finds the waiters asleep on the holders' TTL, not in
		// the attempt each makes once its subscription is confirmed.
		time.Sleep(300 * time.Millisecond)
		srv.Kill()
		time.Sleep(faultOutage)
		back := time.Now()
		srv.Restart()
		wg.Wait()
		cancel()
		close(got)
		close(errs)
		if err := errors.Join(slices.Collect(chanValues(errs))...); err != nil {
			return 0, 0, err
		}
		firsts := slices.SortedFunc(chanValues(got), func(a, b time.Time) int { return a.Compare(b) })
		for _, at := range firsts[:faultNames] {
			delays = append(delays, at.Sub(back))
		}
	}
	slices.Sort(delays)
	return delays[len(delays)/2], delays[len(delays)*9/10], nil
}

// chanValues yields what a closed channel holds.
func chanValues[T any](ch <-chan T) func(yield func(T) bool) {
	return func(yield func(T) bool) {
		for v := range ch {
			if !yield(v) {
				return
			}
		}
	}
}

// slowFigure returns how many of faultLeases leases were lost while held
// for faultHold behind a round trip of ratio × the lease. warm: the leases
// are taken before the round trip slows.
func slowFigure(ctx context.Context, ratio float64, warm bool) (int, error) {
	srv, err := redistest.Launch()
	if err != nil {
		return 0, err
	}
	defer srv.Close()
	p, err := faultproxy.New(srv.Addr())
	if err != nil {
		return 0, err
	}
	defer p.Close()
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	defer rdb.Close()
	c, err := lock.New(rdb, lock.WithLeaseTime(faultLease))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	rtt := time.Duration(ratio * float64(faultLease))
	if !warm {
		p.SetDelay(rtt)
	}
	leases := make([]*lock.Lease, faultLeases)
	var wg sync.WaitGroup
	errs := make(chan error, faultLeases)
	for i := range leases {
		take := func() {
			l, err := c.Mutex(fmt.Sprintf("slow-%d", i)).Lock(ctx)
			if err != nil {
				errs <- err
				return
			}
			leases[i] = l
		}
		if warm {
			take() // one after another, on one connection
		} else {
			wg.Go(take)
		}
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(slices.Collect(chanValues(errs))...); err != nil {
		return 0, err
	}
	if warm {
		p.SetDelay(rtt)
	}
	select {
	case <-time.After(faultHold):
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	lost := 0
	for _, l := range leases {
		if errors.Is(l.Err(), lock.ErrLockLost) {
			lost++
		}
	}
	p.SetDelay(0)
	for _, l := range leases {
		_ = l.Unlock(context.WithoutCancel(ctx))
	}
	return lost, nil
}
