package core

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// batch gathers the claims and finishes of one Client that fall due in
// the same instant and sends them together, in one pipeline (on a Cluster,
// go-redis splits it by node). The first request to come is the batch's
// leader: it yields once (runtime.Gosched), so that the goroutines of the
// same instant that are ready to run queue their requests, then takes every
// request queued and sends them; a request that comes after the leader
// took the queue leads the next batch at once. No request waits for a batch on its way: on a
// slow network, waiting a round trip before being sent cost leases (the
// fault suite's added round trip, seed 15). So a thousand jobs due in the
// same second go out in as many pipelines as their goroutines find
// batches being gathered, not one each.
type batch struct {
	mu        sync.Mutex
	queue     []*batched
	gathering bool // a leader has not taken the queue yet
}

// batched is one request in a batch.
type batched struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any

	cmd   *redis.Cmd    // the reply, once done is closed
	done  chan struct{} // closed when cmd is set
	taken bool          // in a batch on its way; batch.mu guards it
}

// runBatched runs script as run does, in a batch with the Client's other
// claims and finishes. With WithReplicaAck or WithAOFAck it runs alone
// (runAcked): WAIT must follow its script on one connection.
func (b *redisBackend) runBatched(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if b.ack != nil {
		return b.runAcked(ctx, script, keys, args...)
	}
	r := &batched{ctx: ctx, script: script, keys: keys, args: args, done: make(chan struct{})}
	q := &b.batch
	q.mu.Lock()
	q.queue = append(q.queue, r)
	lead := !q.gathering
	q.gathering = true
	q.mu.Unlock()
	if !lead {
		// The leader takes this request with the queue, soon.
		select {
		case <-r.done:
			return r.cmd
		case <-ctx.Done():
			return q.leave(r)
		}
	}
	// The requests of the same instant are on their goroutines, runnable:
	// let them queue theirs before the leader takes the queue. A yield
	// costs no round trip, and a lease counts from when its pipeline goes
	// out (sendBatch).
	runtime.Gosched()
	q.mu.Lock()
	todo := q.queue
	q.queue = nil
	q.gathering = false
	for _, o := range todo {
		o.taken = true
	}
	q.mu.Unlock()
	b.sendBatch(todo)
	<-r.done
	return r.cmd
}

// leave takes r out of the queue when its ctx ended before a leader took
// it, and returns the ctx's error; if a leader took it, it waits for its
// reply.
func (q *batch) leave(r *batched) *redis.Cmd {
	q.mu.Lock()
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
	// A request that waited in the queue was not sent when it was made:
	// its lease counts from now, when it goes out. (Counting from when it
	// was queued, a round trip spent waiting for the batch ahead, lost
	// leases on a slow network.) Each request's goroutine waits for done:
	// no race on its send clock.
	for _, r := range todo {
		resent(r.ctx)
	}
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
	_, err := pipe.Exec(ctx)
	unsent(cmds, err)
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
		_, err := pipe.Exec(ctx)
		unsent(cmds, err)
	}
	for i, r := range todo {
		r.cmd = cmds[i]
		close(r.done)
	}
}

// unsent gives the error of a failed pipeline (Exec's) to those of its
// cmds that came back with neither a reply nor an error: go-redis leaves
// some so when it cannot reach the server, and their reply would read as
// a malformed one ("unexpected type=<nil>"), which ends a wait, instead of
// the failure to reach the store, which a wait rides out.
func unsent(cmds []*redis.Cmd, err error) {
	if err == nil {
		return
	}
	for _, c := range cmds {
		if c.Err() == nil && c.Val() == nil {
			c.SetErr(err)
		}
	}
}
