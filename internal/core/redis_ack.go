package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoAck: the replicas (or the disks) asked for by WithReplicaAck or
// WithAOFAck did not acknowledge an acquisition in time. The acquisition
// was undone.
var ErrNoAck = errors.New("lock: not acknowledged by enough replicas")

// ackOptions are WithReplicaAck's and WithAOFAck's settings.
type ackOptions struct {
	aof      bool
	local    int // WAITAOF numlocal
	replicas int
	timeout  time.Duration
}

// WithReplicaAck makes each acquisition, and each renewal, wait until at
// least replicas replicas have acknowledged it (Redis WAIT, on the
// connection that ran the script), for at most timeout. An acquisition that
// is not acknowledged in time is undone and fails with an error wrapping
// ErrNoAck (fail closed); a renewal that is not is retried, and the lease is
// lost if none is acknowledged by its deadline. It narrows the window in
// which a failover to a replica can lose a lock: see the README's "How safe
// is it?". replicas must be at least 1 and timeout positive. It needs the
// Redis backend: NewMemory refuses it.
func WithReplicaAck(replicas int, timeout time.Duration) Option {
	return func(o *options) { o.ack = &ackOptions{replicas: replicas, timeout: timeout} }
}

// WithAOFAck is WithReplicaAck with Redis 7.2's WAITAOF: each acquisition
// and renewal waits until local (0 or 1) the primary and replicas replicas
// have written it to their append-only files. On a server without WAITAOF
// every acquisition fails with an error that says so, wrapping
// errors.ErrUnsupported.
func WithAOFAck(local, replicas int, timeout time.Duration) Option {
	return func(o *options) {
		o.ack = &ackOptions{aof: true, local: local, replicas: replicas, timeout: timeout}
	}
}

func (a *ackOptions) check() error {
	switch {
	case a == nil:
		return nil
	case a.timeout <= 0:
		return fmt.Errorf("lock: replica acknowledgement timeout %v: must be positive: %w", a.timeout, ErrInvalid)
	case !a.aof && a.replicas < 1:
		return fmt.Errorf("lock: WithReplicaAck(%d, ...): at least one replica: %w", a.replicas, ErrInvalid)
	case a.aof && (a.local < 0 || a.local > 1 || a.replicas < 0 || a.local+a.replicas == 0):
		return fmt.Errorf("lock: WithAOFAck(%d, %d, ...): local is 0 or 1, replicas 0 or more, and not both 0: %w", a.local, a.replicas, ErrInvalid)
	}
	return nil
}

// runAcked runs script, and then, if the Client asks for acknowledgement,
// WAIT or WAITAOF on the same connection, in one pipeline. It fails with
// ErrNoAck when too few acknowledged: the caller undoes what the script
// did, as after a lost reply.
func (b *redisBackend) runAcked(ctx context.Context, script *redis.Script, keys []string, args ...any) *redis.Cmd {
	if b.ack == nil {
		return run(ctx, b.rdb, script, keys, args...)
	}
	// A pipeline of one node uses one connection: WAIT then counts the
	// writes of this script.
	var node redis.Cmdable = b.rdb
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		n, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			cmd := redis.NewCmd(ctx)
			cmd.SetErr(err)
			return cmd
		}
		node = n
	}
	cmd, n, err := b.pipelineAcked(ctx, node, script, keys, args, renewals[script])
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		resent(ctx)
		cmd, n, err = b.pipelineAcked(ctx, node, script, keys, args, true)
	}
	if cc, ok := b.rdb.(*redis.ClusterClient); ok && err != nil && (redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")) {
		// The node no longer serves the key's slot (a failover): the
		// script did not run, and the cluster client follows no redirect
		// sent to one node's connection. Have it learn the slot map
		// again, so that the retry (the error is transient) goes to the
		// new primary.
		cc.ReloadState(ctx)
	}
	if err != nil {
		if cmd.Err() == nil {
			cmd.SetErr(err)
		}
		return cmd
	}
	if want := b.ack.replicas; n < int64(want) && tookLock(cmd) {
		what := "replicas"
		if b.ack.aof {
			what = "replicas' append-only files"
		}
		cmd.SetErr(fmt.Errorf("%d of %d %s acknowledged within %v: %w", n, want, what, b.ack.timeout, ErrNoAck))
	}
	return cmd
}

// tookLock reports whether a script's reply says it took, re-entered or
// renewed a lock: every acknowledged script answers 1, or {1, ...}, then.
// A reply that found the lock held or gone needs no acknowledgement.
func tookLock(cmd *redis.Cmd) bool {
	switch v := cmd.Val().(type) {
	case int64:
		return v == 1
	case []any:
		n, ok := v[0].(int64)
		return len(v) > 0 && ok && n == 1
	}
	return false
}

// pipelineAcked sends the script (EVALSHA, or EVAL) and WAIT or WAITAOF in
// one pipeline, and returns the script's reply and the replicas that
// acknowledged.
func (b *redisBackend) pipelineAcked(ctx context.Context, node redis.Cmdable, script *redis.Script, keys []string, args []any, eval bool) (*redis.Cmd, int64, error) {
	pipe := node.Pipeline()
	var cmd *redis.Cmd
	if eval {
		cmd = script.Eval(ctx, pipe, keys, args...)
	} else {
		cmd = script.EvalSha(ctx, pipe, keys, args...)
	}
	ms := b.ack.timeout.Milliseconds()
	var wait *redis.Cmd
	if b.ack.aof {
		wait = pipe.Do(ctx, "WAITAOF", b.ack.local, b.ack.replicas, ms)
	} else {
		wait = pipe.Do(ctx, "WAIT", b.ack.replicas, ms)
	}
	_, _ = pipe.Exec(ctx)
	if err := cmd.Err(); err != nil {
		return cmd, 0, err
	}
	n, err := ackedBy(b.ack, wait)
	return cmd, n, err
}

// ackedBy reads the reply of WAIT or WAITAOF: how many replicas
// acknowledged, or an error (the primary's own append-only file did not
// acknowledge, or the command failed).
func ackedBy(ack *ackOptions, wait *redis.Cmd) (int64, error) {
	v, err := wait.Result()
	if err != nil {
		if ack.aof && strings.Contains(strings.ToLower(err.Error()), "unknown command") {
			return 0, fmt.Errorf("WAITAOF needs Redis 7.2 or later; the server answered %q: %w", err.Error(), errors.ErrUnsupported)
		}
		return 0, fmt.Errorf("%s: %w", wait.Args()[0], err)
	}
	if ack.aof {
		// WAITAOF answers [local, replicas].
		xs, ok := v.([]any)
		if !ok || len(xs) != 2 {
			return 0, fmt.Errorf("WAITAOF: unexpected reply %v", v)
		}
		local, _ := xs[0].(int64)
		n, _ := xs[1].(int64)
		if local < int64(ack.local) {
			return 0, fmt.Errorf("the primary's append-only file did not acknowledge within %v: %w", ack.timeout, ErrNoAck)
		}
		return n, nil
	}
	n, _ := v.(int64)
	return n, nil
}
