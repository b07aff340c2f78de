package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"

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
// An attempt ends at the first failed dial, and its warning gives the
// dial's error (connection refused, no such host): dials records them.
// Redis refusing us (a wrong password, an ACL that forbids PING) is not
// retried: connect logs it and returns at once an error that says so.
//
// It returns nil once Redis answers; errStopped, at once, when ctx ends or
// stop closes first; and otherwise an error that names Redis and the
// connect timeout and wraps the last ping's.
func connect(ctx context.Context, stop <-chan struct{}, locks *lock.Client, dials *dialLog, r *config.Redis, log hclog.Logger) error {
	where := r.Describe()
	start := time.Now()
	deadline := start.Add(r.ConnectTimeout)
	wait := connectBackoffMin
	for attempt := 1; ; attempt++ {
		err := dials.ping(ctx, locks, r.Timeout)
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
		if refusal(err) {
			log.Error("redis refused us: giving up", "redis", where, "error", err)
			return fmt.Errorf("redis at %s refused us (check redis.password and the user's ACL): %w", where, err)
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

// refusal reports whether err is Redis refusing us rather than not
// answering: a wrong or missing password (WRONGPASS, NOAUTH), or an ACL
// that denies the command (NOPERM). Waiting does not mend these.
func refusal(err error) bool {
	return redis.IsAuthError(err) || redis.IsPermissionError(err)
}

// dialLog is a go-redis hook that keeps the last failed dial to Redis.
// go-redis retries a failed dial until the command's ctx ends, then
// reports the ctx's error ("context deadline exceeded"), which hides the
// cause ("connection refused", "no such host"): ping ends at the first
// failed dial and says why. It is safe for concurrent use; a nil *dialLog
// (no Redis) records nothing.
type dialLog struct {
	mu     sync.Mutex
	last   error  // of the last dial, nil after one that succeeded
	onFail func() // ends the ping under way, if any
}

// newDialLog adds a dialLog to rdb's hooks.
func newDialLog(rdb redis.UniversalClient) *dialLog {
	d := &dialLog{}
	rdb.AddHook(d)
	return d
}

func (d *dialLog) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		d.mu.Lock()
		d.last = err
		if err != nil && d.onFail != nil {
			d.onFail()
		}
		d.mu.Unlock()
		return c, err
	}
}

func (d *dialLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (d *dialLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ping pings Redis through locks within timeout. With a dialLog, the ping
// ends at the first failed dial, and an error that is only the end of
// its ctx becomes the last dial's ("lock: ping: dial tcp ...: connection
// refused").
func (d *dialLog) ping(ctx context.Context, locks *lock.Client, timeout time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if d == nil {
		return locks.Ping(pctx)
	}
	d.mu.Lock()
	d.onFail = cancel
	d.mu.Unlock()
	err := locks.Ping(pctx)
	d.mu.Lock()
	d.onFail = nil
	last := d.last
	d.mu.Unlock()
	if err != nil && last != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("lock: ping: %w", last)
	}
	return err
}
