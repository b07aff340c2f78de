package core

import (
	"context"
	"fmt"
	"runtime"
	"slices"
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
	pipe, done := b.conns.pipeline(ctx, b.rdb) // on a Cluster, go-redis's pipeline, split by node
	for i, r := range todo {
		cmds[i] = r.script.EvalSha(ctx, pipe, r.keys, r.args...)
	}
	_, err := pipe.Exec(ctx)
	done(err)
	unsent(cmds, err)
	var again []int
	for i := range todo {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		pipe, done := b.conns.pipeline(ctx, b.rdb)
		for _, i := range again {
			resent(todo[i].ctx) // its goroutine waits for done: no race
			cmds[i] = todo[i].script.Eval(ctx, pipe, todo[i].keys, todo[i].args...)
		}
		_, err := pipe.Exec(ctx)
		done(err)
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

// renewCall is the script, keys and arguments of one renewal.
type renewCall struct {
	script *redis.Script
	keys   []string
	args   []any
	r      *renewing // where its reply goes
}

// renewCallOf returns r's renewal as its kind sends it (renew, rwRenew,
// semRenew).
func renewCallOf(r *renewing) (renewCall, bool) {
	ms := r.lease.Milliseconds()
	k := r.k
	switch kd := r.kind.(type) {
	case mutexKind, fairKind:
		return renewCall{script: renewScript, keys: []string{k.lock}, args: []any{r.owner, ms}}, true
	case rwKind:
		return renewCall{script: rwRenewScript, keys: []string{k.lock, k.readers, k.writerWaiting}, args: []any{rwMode(kd.write), r.owner, ms}}, true
	case semKind:
		return renewCall{script: semRenewScript, keys: []string{k.lock, k.holds, semTokens(k)}, args: []any{r.owner, ms}}, true
	}
	return renewCall{}, false
}

// renewAll sends the renewals in one pipeline: the first renewal of each
// script whole (EVAL, which also loads it), the others by SHA, so that the
// batch takes one round trip also after a restart emptied the server's
// script cache, and its size does not grow with a script's size per lease.
// A renewal the server answers NOSCRIPT (its script evicted meanwhile)
// goes again, whole, in a second pipeline, and counts from then. One
// renewal alone goes as run sends renewals: whole. With WithReplicaAck or
// WithAOFAck each pipeline ends with WAIT (or WAITAOF) on its connection,
// which acknowledges every renewal before it; on a Cluster, one such
// pipeline per primary, at once. A kind this does not know renews on its
// own, after.
func (b *redisBackend) renewAll(ctx context.Context, rs []renewing) {
	calls := make([]renewCall, 0, len(rs))
	for i := range rs {
		if c, ok := renewCallOf(&rs[i]); ok {
			c.r = &rs[i]
			calls = append(calls, c)
		}
	}
	switch {
	case len(calls) == 1:
		c := calls[0]
		c.r.ok, c.r.err = renewed(b.runAcked(withSent(ctx, &c.r.sent), c.script, c.keys, c.args...))
	case len(calls) > 1:
		if cc, ok := b.rdb.(*redis.ClusterClient); ok {
			b.renewNodes(ctx, cc, calls)
		} else {
			b.renewPipeline(ctx, b.rdb, calls)
		}
	}
	for i := range rs {
		if _, ok := renewCallOf(&rs[i]); !ok {
			r := &rs[i]
			r.ok, r.err = r.kind.renew(withSent(ctx, &r.sent), r.k, r.owner, r.lease)
		}
	}
}

// renewed reads a renewal's reply: 1 renewed, 0 not held.
func renewed(cmd *redis.Cmd) (bool, error) {
	n, err := cmd.Int64()
	return n == 1, err
}

// renewPipeline sends calls on node in one pipeline (renewExec), then
// those the server lacked the script of, whole, and sets their renewals'
// replies.
func (b *redisBackend) renewPipeline(ctx context.Context, node redis.Cmdable, calls []renewCall) {
	cmds := b.renewExec(ctx, node, calls, false)
	var again []renewCall
	for i, c := range calls {
		if redis.HasErrorPrefix(cmds[i].Err(), "NOSCRIPT") {
			c.r.sent = time.Now()
			again = append(again, c)
			continue
		}
		c.r.ok, c.r.err = renewed(cmds[i])
	}
	if len(again) > 0 {
		cmds := b.renewExec(ctx, node, again, true)
		for i, c := range again {
			c.r.ok, c.r.err = renewed(cmds[i])
		}
	}
}

// renewExec sends calls in one pipeline (each script's first call whole,
// then by SHA; all whole if eval), then
// WAIT or WAITAOF if the Client asks for acknowledgement, and returns the
// replies: with acknowledgement, a renewal that too few acknowledged, or
// whose WAIT failed, fails.
func (b *redisBackend) renewExec(ctx context.Context, node redis.Cmdable, calls []renewCall, eval bool) []*redis.Cmd {
	cmds := make([]*redis.Cmd, len(calls))
	pipe, done := b.conns.pipeline(ctx, node)
	var whole [3]*redis.Script // the scripts sent whole so far: renewals have three
	for i, c := range calls {
		if eval || !slices.Contains(whole[:], c.script) {
			cmds[i] = c.script.Eval(ctx, pipe, c.keys, c.args...)
			if j := slices.Index(whole[:], nil); j >= 0 {
				whole[j] = c.script
			}
			continue
		}
		cmds[i] = c.script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	var wait *redis.Cmd
	if a := b.ack; a != nil {
		ms := a.timeout.Milliseconds()
		if a.aof {
			wait = pipe.Do(ctx, "WAITAOF", a.local, a.replicas, ms)
		} else {
			wait = pipe.Do(ctx, "WAIT", a.replicas, ms)
		}
	}
	_, err := pipe.Exec(ctx)
	done(err)
	unsent(cmds, err)
	if wait == nil {
		return cmds
	}
	n, werr := ackedBy(b.ack, wait)
	for _, cmd := range cmds {
		if cmd.Err() != nil || !tookLock(cmd) {
			continue
		}
		switch {
		case werr != nil:
			cmd.SetErr(werr)
		case n < int64(b.ack.replicas):
			what := "replicas"
			if b.ack.aof {
				what = "replicas' append-only files"
			}
			cmd.SetErr(fmt.Errorf("%d of %d %s acknowledged within %v: %w", n, b.ack.replicas, what, b.ack.timeout, ErrNoAck))
		}
	}
	return cmds
}

// keptConns keeps the connections that batches run on, renewals' and
// claims' and finishes', up to maxKept per node (a server, or a Cluster
// primary), from one batch to the next: connections of the node's main
// pool, where a Client's requests keep connections warm. go-redis sends a
// pipeline on a pool of its own, which dials when it has no connection
// idle, and a new connection's first request pays the handshake (three
// round trips more), which on a slow network costs the leases a batch
// renews, and the finishes a batch records (the fault suite's added round
// trip, seed 47: a finish still failing 5 s after it was sent).
//
// Each kept connection is a redis.Conn of the node's client, which
// carries the client's hooks as they were when it was made (a Conn of a
// WithTimeout clone carries none, and claims, finishes and renewals went
// unseen by a user's tracing or metrics hooks). A Conn shares its
// client's options, and the handshake of a connection it dials writes to
// them, under a lock of the Conn's own, while the client's maintenance
// notifications are still in "auto" (go-redis turns them off when Redis 7
// refuses the command): Conns of one client that each dialled at once
// raced under -race (TestRenewalBatchesOfClientsAtOnce). So before the
// first Conn of a node, keptConns has the node's client finish a request
// of its own (a PING: its handshake, if it dials, settles the mode under
// the client's lock), and makes Conns only after it; if that PING fails,
// the batch goes out as the client's own pipeline. A batch whose pipeline
// failed closes its Conn (a Conn keeps a broken connection's error for
// every later request), so the next batch takes a connection from the
// pool anew. A batch takes a kept Conn or, with none left, makes one;
// after it, the Conn is kept unless maxKept are.
//
// keptConns is safe for concurrent use.
type keptConns struct {
	mu     sync.Mutex
	kept   map[*redis.Client][]*redis.Conn // by node; out while a batch uses it
	ready  map[*redis.Client]bool          // the nodes whose client finished a PING (primed)
	closed bool

	priming sync.Mutex // held while a node's PING is on its way
}

// maxKept is how many connections keptConns keeps per node: one for the
// renewer's batch, the others for the claims and finishes of one instant,
// which go out in as many batches as their goroutines find being gathered.
const maxKept = 4

// pipeline returns a pipeline on node, and done, to call with the error
// of its Exec. On a client of one server (or a Cluster's node) the
// pipeline runs on a kept connection.
func (p *keptConns) pipeline(ctx context.Context, node redis.Cmdable) (pipe redis.Pipeliner, done func(error)) {
	c, ok := node.(*redis.Client)
	if !ok {
		return node.Pipeline(), func(error) {}
	}
	var cn *redis.Conn
	p.mu.Lock()
	if ks := p.kept[c]; len(ks) > 0 {
		cn = ks[len(ks)-1]
		p.kept[c] = ks[:len(ks)-1]
	}
	p.mu.Unlock()
	if cn == nil {
		if !p.primed(ctx, c) {
			return c.Pipeline(), func(error) {}
		}
		cn = c.Conn()
	}
	return cn.Pipeline(), func(err error) { p.put(c, cn, err) }
}

// primed reports whether node's client has finished a PING, sending one
// if none has: after it, a Conn of the client does not write to its
// options (see keptConns).
func (p *keptConns) primed(ctx context.Context, node *redis.Client) bool {
	p.priming.Lock()
	defer p.priming.Unlock()
	p.mu.Lock()
	ready := p.ready[node]
	p.mu.Unlock()
	if ready {
		return true
	}
	if node.Ping(ctx).Err() != nil {
		return false
	}
	p.mu.Lock()
	if p.ready == nil {
		p.ready = make(map[*redis.Client]bool)
	}
	p.ready[node] = true
	p.mu.Unlock()
	return true
}

// put keeps cn as one of node's connections after a batch that ran
// without error, unless maxKept are kept or the Client is closed; else it
// closes cn.
func (p *keptConns) put(node *redis.Client, cn *redis.Conn, err error) {
	p.mu.Lock()
	if err == nil && !p.closed && len(p.kept[node]) < maxKept {
		if p.kept == nil {
			p.kept = make(map[*redis.Client][]*redis.Conn)
		}
		p.kept[node] = append(p.kept[node], cn)
		cn = nil
	}
	p.mu.Unlock()
	if cn != nil {
		_ = cn.Close()
	}
}

// close closes the kept connections, and those of batches still in
// flight when they end: Client.Close calls it.
func (p *keptConns) close() {
	p.mu.Lock()
	kept := p.kept
	p.kept = nil
	p.closed = true
	p.mu.Unlock()
	for _, cs := range kept {
		for _, cn := range cs {
			_ = cn.Close()
		}
	}
}

// renewNodes sends calls on a Cluster: one pipeline per primary, all at
// once (a pipeline of one node uses one connection, so a WAIT counts its
// renewals).
func (b *redisBackend) renewNodes(ctx context.Context, cc *redis.ClusterClient, calls []renewCall) {
	nodes := map[*redis.Client][]renewCall{}
	for _, c := range calls {
		n, err := cc.MasterForKey(ctx, c.keys[0])
		if err != nil {
			c.r.err = err
			continue
		}
		nodes[n] = append(nodes[n], c)
	}
	var wg sync.WaitGroup
	for n, cs := range nodes {
		wg.Go(func() { b.renewPipeline(ctx, n, cs) })
	}
	wg.Wait()
	for _, c := range calls {
		if err := c.r.err; err != nil && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
			cc.ReloadState(ctx) // as runAcked: the retry goes to the new primary
			break
		}
	}
}
