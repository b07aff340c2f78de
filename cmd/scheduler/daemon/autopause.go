package daemon

import (
	"context"
	"sync"

	"github.com/lockcron/lockcron/scheduler"
)

// autoPausesQueue is how many audit entries of auto-pauses wait for their
// append at most; one more is dropped, with a warning. A job pauses
// itself once until a resume, so a few are many.
const autoPausesQueue = 64

// autoPauses appends the audit entries of the jobs that paused themselves
// (audit.autoPaused) on a goroutine that it owns, off the scheduler's run
// goroutines: scheduler.WithOnRun must not block, and an append is a
// Redis round trip of up to auditTimeout. As the notifier does: add queues
// one without blocking; stop takes no more, appends the queued ones until
// its ctx ends, and waits for the goroutine. It is safe for concurrent
// use.
type autoPauses struct {
	warn   func(msg string, args ...any)
	queue  chan scheduler.Run
	cancel context.CancelFunc // ends the appends under way: stop's deadline passed
	done   chan struct{}      // closed when the goroutine has returned

	mu     sync.Mutex
	closed bool
}

// startAutoPauses starts the goroutine that appends the entries to aud.
func startAutoPauses(aud *audit, warn func(msg string, args ...any)) *autoPauses {
	ctx, cancel := context.WithCancel(context.Background())
	a := &autoPauses{warn: warn, queue: make(chan scheduler.Run, autoPausesQueue), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for r := range a.queue {
			aud.autoPaused(ctx, r, warn)
		}
	}()
	return a
}

// add queues the audit entry of the auto-pause r. It never blocks: when
// the queue is full, or after stop, the entry is dropped and a warning
// says so.
func (a *autoPauses) add(r scheduler.Run) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.closed {
		select {
		case a.queue <- r:
			return
		default:
		}
	}
	a.warn("audit entry not appended: too many queued, or the daemon is stopping", "action", "pause", "target", r.Job, "actor", "replica:"+r.Replica)
}

// stop takes no more entries and appends the queued ones until ctx ends;
// then it gives up on the rest, and returns once the goroutine has.
func (a *autoPauses) stop(ctx context.Context) {
	a.mu.Lock()
	if !a.closed {
		a.closed = true
		close(a.queue)
	}
	a.mu.Unlock()
	select {
	case <-a.done:
	case <-ctx.Done():
		a.cancel()
		<-a.done
	}
	a.cancel()
}
