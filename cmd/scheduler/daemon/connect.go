package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/lock"
)

// The wait between two start-up pings of Redis: it starts at
// connectBackoffMin and doubles up to connectBackoffMax.
const (
	connectBackoffMin = 100 * time.Millisecond
	connectBackoffMax = 2 * time.Second
)

// errStopped: the wait for Redis at start-up was ended by a stop request.
var errStopped = errors.New("daemon: stopped while connecting to redis")

// connect waits at start-up until Redis answers: it pings it through
// locks (each ping bounded by r.Timeout), waiting connectBackoffMin,
// doubling up to connectBackoffMax, between attempts, until a ping
// succeeds or r.ConnectTimeout has passed since the first. The last
// attempt is made at that bound at the latest, so connect returns within
// r.ConnectTimeout plus one r.Timeout.
//
// Each failed attempt is logged once: as a warning with the next retry,
// or, for the last, as an error. Redis is named by r.Describe, which never
// shows the password.
//
// It returns nil once Redis answers; errStopped, at once, when ctx ends or
// stop closes first; and otherwise an error that names Redis and the
// connect timeout and wraps the last ping's.
func connect(ctx context.Context, stop <-chan struct{}, locks *lock.Client, r *config.Redis, log hclog.Logger) error {
	where := r.Describe()
	start := time.Now()
	deadline := start.Add(r.ConnectTimeout)
	wait := connectBackoffMin
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(ctx, r.Timeout)
		err := locks.Ping(pctx)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("redis answers", "redis", where, "attempts", attempt, "waited", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return errStopped
		case <-stop:
			return errStopped
		default:
		}
		left := time.Until(deadline)
		if left <= 0 {
			log.Error("redis unreachable: giving up", "redis", where, "attempts", attempt, "connect_timeout", r.ConnectTimeout, "error", err)
			return fmt.Errorf("redis at %s unreachable for %v: %w", where, r.ConnectTimeout, err)
		}
		next := min(wait, left)
		log.Warn("redis unreachable: retrying", "redis", where, "attempt", attempt, "retry_in", next, "error", err)
		if !sleep(ctx, stop, next) {
			return errStopped
		}
		wait = min(2*wait, connectBackoffMax)
	}
}

// sleep waits for d, and reports false if ctx ends or stop closes first.
func sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	case <-t.C:
		return true
	}
}
