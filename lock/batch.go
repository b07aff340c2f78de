package lock

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batch gathers the claims and finishes of one Client that fall due while
// another of them is on its way to Redis, and sends them together, in one
// pipeline (on a Cluster, go-redis splits it by node): a thousand jobs due
// in the same second cost a few round trips, not a thousand. A request
// that finds nothing on its way is sent at once, by its own goroutine, so
// batching adds no wait; the goroutine whose request was sent first sends
// the next batch, and so on.
type batch struct {
	mu    sync.Mutex
	queue []*batched
	busy  bool // a goroutine is sending a batch
}

// batched is one request in a batch.
type batched struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any

	cmd   *redis.Cmd    // the reply, once done is closed
	done  chan struct{} // closed when cmd is set
	lead  chan struct{} // this request's goroutine is to send the next batch
	taken bool          // in a batch on its way; b.mu guards it
}

// runBatched runs script as run does, in a batch with the Client's other
// claims and finishes. With WithReplicaAck or WithAOFAck it runs alone
// (runAcked): WAIT must follow its script on one connection.
func (b *redisBackend) runBatched(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if b.ack != nil {
		return b.runAcked(ctx, script, keys, args...)
	}
	r := &batched{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{}), lead: make(chan struct{}, 1)}
	q := &b.batch
	q.mu.Lock()
	q.queue = append(q.queue, r)
	lead := !q.busy
	q.busy = true
	q.mu.Unlock()
	if !lead {
		select {
		case <-r.done:
			return r.cmd
		case <-r.lead:
		case <-ctx.Done():
			if cmd := q.leave(r); cmd != nil {
				return cmd
			}
		}
	}
	// This goroutine sends what is queued, its own request included, then
	// hands the next batch to the first request queued meanwhile.
	q.mu.Lock()
	todo := q.queue
	q.queue = nil
	for _, o := range todo {
		o.taken = true
	}
	q.mu.Unlock()
	b.sendBatch(todo)
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.busy = false
	} else {
		q.queue[0].lead <- struct{}{} // buffered, and sent once: never blocks
	}
	q.mu.Unlock()
	<-r.done
	return r.cmd
}

// leave is a queued request whose ctx ended: if it was not sent, it leaves
// the queue and gets ctx's error; if it is on its way, its goroutine waits
// for the reply, which tells what it did. nil: the request was handed the
// next batch to send, and its goroutine sends it.
func (q *batch) leave(r *batched) *redis.Cmd {
	q.mu.Lock()
	select {
	case <-r.lead:
		q.mu.Unlock()
		return nil
	default:
	}
	if r.taken {
		q.mu.Unlock()
		<-r.done
		return r.cmd
	}
	for i, o := range q.queue {
		if o == r {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			break
		}
	}
	q.mu.Unlock()
	cmd := redis.NewCmd(r.ctx)
	cmd.SetErr(r.ctx.Err())
	return cmd
}

// sendBatch sends the requests, one alone as run does, several in one
// pipeline by SHA; those whose script the server did not have go again,
// whole, in a second pipeline. The pipeline's ctx ends at the earliest
// deadline among the requests, and with none of their cancellations.
func (b *redisBackend) sendBatch(todo []*batched) {
	switch len(todo) {
	case 0:
		return
	case 1:
		r := todo[0]
		r.cmd = run(r.ctx, b.rdb, r.script, r.keys, r.args...)
		close(r.done)
		return
	}
	ctx := context.Background()
	var cancel context.CancelFunc = func() {}
	var earliest time.Time
	for _, r := range todo {
		if d, ok := r.ctx.Deadline(); ok && (earliest.IsZero() || d.Before(earliest)) {
			earliest = d
		}
	}
	if !earliest.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, earliest)
	}
	defer cancel()
	cmds := make([]*redis.Cmd, len(todo))
	pipe := b.rdb.Pipeline()
	for i, r := range todo {
		cmds[i] = r.script.EvalSha(ctx, pipe, r.keys, r.args...)
	}
	_, _ = pipe.Exec(ctx)
	var again []int
	for i := range todo {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe := b.rdb.Pipeline()
		for _, i := range again {
			resent(todo[i].ctx) // its goroutine waits for done: no race
			cmds[i] = todo[i].script.Eval(ctx, pipe, todo[i].keys, todo[i].args...)
		}
		_, _ = pipe.Exec(ctx)
	}
	for i, r := range todo {
		r.cmd = cmds[i]
		close(r.done)
	}
}
