package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/lock"
)

// unlockFunc releases what a successful lockFunc took.
type unlockFunc func(ctx context.Context) error

// lockFunc takes the lock (or, for the floor, sends the first PING) and
// returns how to release it.
type lockFunc func(ctx context.Context) (unlockFunc, error)

// group is the set of lockers of one run: one lockFunc per goroutine, and
// a close function that closes every client the group created.
type group struct {
	workers []lockFunc
	close   func() error
}

// impl is one implementation under test.
type impl struct {
	name string
	// floor marks the PING baseline: it has no lock, only two round trips.
	floor bool
	// contended marks implementations that take part in the contended
	// scenario (the floor does not: its reference there is the ceiling).
	contended bool
	// setup builds the clients for n goroutines; names(i) is the lock name
	// of goroutine i.
	setup func(cfg *config, n int, names func(i int) string) (*group, error)
	// failure tells whether err means "not acquired within the retry
	// budget" (a failed attempt) rather than an unexpected error.
	failure func(err error) bool
}

const (
	nameLockcronA = "lockcron A (1 client)"
	nameLockcronB = "lockcron B (client each)"
)

func implementations() []impl {
	return []impl{
		{name: "floor: 2×PING (go-redis)", floor: true, setup: setupFloor, failure: isTimeout},
		{name: nameLockcronA, contended: true, setup: setupLockcron(true), failure: lockcronFailure},
		{name: nameLockcronB, contended: true, setup: setupLockcron(false), failure: lockcronFailure},
		{name: "redsync default retry", contended: true, setup: setupRedsync(false), failure: redsyncFailure},
		{name: "redsync 1ms retry", contended: true, setup: setupRedsync(true), failure: redsyncFailure},
		{name: "redislock default (no retry)", contended: true, setup: setupRedislock(false), failure: redislockFailure},
		{name: "redislock 1ms linear", contended: true, setup: setupRedislock(true), failure: redislockFailure},
	}
}

func isTimeout(err error) bool { return errors.Is(err, context.DeadlineExceeded) }

func lockcronFailure(err error) bool { return errors.Is(err, lock.ErrLocked) || isTimeout(err) }

func redsyncFailure(err error) bool {
	var taken *redsync.ErrTaken
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || isTimeout(err)
}

func redislockFailure(err error) bool {
	return errors.Is(err, redislock.ErrNotObtained) || isTimeout(err)
}

// setupFloor: every goroutine shares one go-redis client; "lock" and
// "unlock" are one PING each.
func setupFloor(cfg *config, n int, _ func(int) string) (*group, error) {
	rdb := redis.NewClient(cfg.srvOptions())
	g := &group{close: rdb.Close}
	ping := func(ctx context.Context) error { return rdb.Ping(ctx).Err() }
	for range n {
		g.workers = append(g.workers, func(ctx context.Context) (unlockFunc, error) {
			if err := ping(ctx); err != nil {
				return nil, err
			}
			return ping, nil
		})
	}
	return g, nil
}

// setupLockcron: shared=true is variant A (all goroutines on one
// lock.Client over one go-redis client); shared=false is variant B (each
// goroutine its own go-redis client and lock.Client, like replicas).
func setupLockcron(shared bool) func(cfg *config, n int, names func(int) string) (*group, error) {
	return func(cfg *config, n int, names func(int) string) (*group, error) {
		var closers []func() error
		closeAll := func() error {
			var errs []error
			for i := len(closers) - 1; i >= 0; i-- {
				errs = append(errs, closers[i]())
			}
			return errors.Join(errs...)
		}
		newClient := func() (*lock.Client, error) {
			rdb := redis.NewClient(cfg.srvOptions())
			closers = append(closers, rdb.Close)
			c, err := lock.New(rdb)
			if err != nil {
				return nil, fmt.Errorf("lock.New: %w", err)
			}
			closers = append(closers, c.Close)
			return c, nil
		}
		var c *lock.Client
		g := &group{close: closeAll}
		for i := range n {
			if c == nil || !shared {
				var err error
				if c, err = newClient(); err != nil {
					_ = closeAll()
					return nil, err
				}
			}
			mu := c.Mutex(names(i))
			g.workers = append(g.workers, func(ctx context.Context) (unlockFunc, error) {
				lease, err := mu.Lock(ctx, lock.WithWait(cfg.wait))
				if err != nil {
					return nil, err
				}
				return lease.Unlock, nil
			})
		}
		return g, nil
	}
}

// setupRedsync: one go-redis client and one redsync pool shared by all
// goroutines; one redsync.Mutex per goroutine (a Mutex keeps the value it
// locked with, so it is not shared). fast=true retries every 1 ms with a
// large number of tries (the ctx bounds the wait); otherwise redsync's
// default: 32 tries, random 50–250 ms delay.
func setupRedsync(fast bool) func(cfg *config, n int, names func(int) string) (*group, error) {
	return func(cfg *config, n int, names func(int) string) (*group, error) {
		rdb := redis.NewClient(cfg.srvOptions())
		rs := redsync.New(redsyncgoredis.NewPool(rdb))
		var opts []redsync.Option
		if fast {
			opts = append(opts, redsync.WithRetryDelay(time.Millisecond), redsync.WithTries(1_000_000))
		}
		g := &group{close: rdb.Close}
		for i := range n {
			m := rs.NewMutex(names(i), opts...)
			unlock := func(ctx context.Context) error {
				ok, err := m.UnlockContext(ctx)
				if err == nil && !ok {
					err = errors.New("redsync: unlock: lock not held")
				}
				return err
			}
			g.workers = append(g.workers, func(ctx context.Context) (unlockFunc, error) {
				if err := m.LockContext(ctx); err != nil {
					return nil, err
				}
				return unlock, nil
			})
		}
		return g, nil
	}
}

// redislockTTL is the TTL of a redislock lock, as redsync's default
// expiry is 8 s: far above any hold here, so no lock expires while held.
const redislockTTL = 8 * time.Second

// setupRedislock: one go-redis client and one redislock.Client shared by
// all goroutines. fast=true retries with LinearBackoff(1ms) (the ctx bounds
// the wait); otherwise redislock's default, NoRetry: one attempt per call.
func setupRedislock(fast bool) func(cfg *config, n int, names func(int) string) (*group, error) {
	return func(cfg *config, n int, names func(int) string) (*group, error) {
		rdb := redis.NewClient(cfg.srvOptions())
		lc := redislock.New(rdb)
		var opts *redislock.Options // nil: default strategy (NoRetry)
		if fast {
			opts = &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)}
		}
		g := &group{close: rdb.Close}
		for i := range n {
			name := names(i)
			g.workers = append(g.workers, func(ctx context.Context) (unlockFunc, error) {
				l, err := lc.Obtain(ctx, name, redislockTTL, opts)
				if err != nil {
					return nil, err
				}
				return l.Release, nil
			})
		}
		return g, nil
	}
}
