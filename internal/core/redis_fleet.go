package core

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

func (b *redisBackend) publish(ctx context.Context, channel, payload string) (int64, error) {
	return b.rdb.Publish(ctx, channel, payload).Result()
}

func (b *redisBackend) listen(channel string, fn func(string)) func() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return func() {}
	}
	hs := b.handlers[channel]
	if hs == nil {
		hs = make(map[*handler]struct{})
		b.handlers[channel] = hs
		b.confirms[channel] = false
		b.startPubSub()
		b.enqueueOp(subOp{sub: true, channel: channel})
	}
	h := &handler{fn: fn}
	hs[h] = struct{}{}
	return func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := hs[h]; !ok {
			return
		}
		delete(hs, h)
		if len(hs) == 0 && b.handlers[channel] != nil {
			delete(b.handlers, channel)
			delete(b.confirms, channel)
			if !b.closed {
				b.enqueueOp(subOp{sub: false, channel: channel})
			}
		}
	}
}

func (b *redisBackend) listening() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, ok := range b.confirms {
		if !ok {
			return false
		}
	}
	return true
}

// handlersOf returns the funcs subscribed to channel. b.mu is held.
func (b *redisBackend) handlersOf(channel string) []func(string) {
	hs := b.handlers[channel]
	if len(hs) == 0 {
		return nil
	}
	fns := make([]func(string), 0, len(hs))
	for h := range hs {
		fns = append(fns, h.fn)
	}
	return fns
}

func (b *redisBackend) ping(ctx context.Context) error {
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		return cc.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return n.Ping(ctx).Err() })
	}
	return b.rdb.Ping(ctx).Err()
}

// reachable sends PING on the shared Pub/Sub connection: go-redis dials
// it, when it is down, outside the pool's count of failed dials (and
// subscribes it again). Without one yet, it is ping.
func (b *redisBackend) reachable(ctx context.Context) error {
	b.mu.Lock()
	ps := b.ps
	b.mu.Unlock()
	if ps == nil {
		return b.ping(ctx)
	}
	return ps.Ping(ctx)
}

var (
	//go:embed scripts/members.lua
	membersSrc    string
	membersScript = redis.NewScript(membersSrc)
)

func (b *redisBackend) members(ctx context.Context, key, member string, ttl time.Duration) ([]string, error) {
	return membersScript.Run(ctx, b.rdb, []string{key}, member, ttl.Milliseconds()).StringSlice()
}

// heardTail passes a finish's tail heard on channel to the Client.
func (b *redisBackend) heardTail(channel, tail string) {
	if ev, ledger, ok := parseTickTail(tail); ok {
		b.heard(channel, ev, ledger)
	}
}

var (
	//go:embed scripts/replicareport.lua
	replicaReportSrc    string
	replicaReportScript = redis.NewScript(replicaReportSrc)
	//go:embed scripts/replicas.lua
	replicasSrc    string
	replicasScript = redis.NewScript(replicasSrc)
)

func (b *redisBackend) reportReplica(ctx context.Context, key, drop, id, nonce, report string, ttl, keep time.Duration) error {
	return replicaReportScript.Run(ctx, b.rdb, []string{key, drop}, id, nonce, ttl.Milliseconds(), report, keep.Milliseconds()).Err()
}

func (b *redisBackend) replicas(ctx context.Context, key, drop string) ([]ReplicaReport, error) {
	v, err := replicasScript.Run(ctx, b.rdb, []string{key, drop}).Slice()
	if err != nil {
		return nil, err
	}
	if len(v)%2 != 1 {
		return nil, fmt.Errorf("replicas.lua: unexpected reply of %d values", len(v))
	}
	ms, ok := v[0].(int64)
	if !ok {
		return nil, fmt.Errorf("replicas.lua: unexpected reply: time %v", v[0])
	}
	now := time.UnixMilli(ms)
	out := make([]ReplicaReport, 0, len(v)/2)
	for i := 1; i+1 < len(v); i += 2 {
		rid, _ := v[i].(string)
		val, _ := v[i+1].(string)
		if r, ok := parseReplica(rid, val, now); ok {
			out = append(out, r)
		}
	}
	return out, nil
}
