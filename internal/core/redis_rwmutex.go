package core

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts of a read-write lock each start with rwlib.lua, which reads
// the clock and defines what they share.
var (
	//go:embed scripts/rwlib.lua
	rwLibSrc string
	//go:embed scripts/rwacquire.lua
	rwAcquireSrc string
	//go:embed scripts/rwrenew.lua
	rwRenewSrc string
	//go:embed scripts/rwrelease.lua
	rwReleaseSrc string
	//go:embed scripts/rwleave.lua
	rwLeaveSrc string
	//go:embed scripts/rwforceunlock.lua
	rwForceUnlockSrc string

	rwAcquireScript     = redis.NewScript(libSrc + rwLibSrc + rwAcquireSrc)
	rwRenewScript       = redis.NewScript(rwLibSrc + rwRenewSrc)
	rwReleaseScript     = redis.NewScript(rwLibSrc + rwReleaseSrc)
	rwLeaveScript       = redis.NewScript(rwLibSrc + rwLeaveSrc)
	rwForceUnlockScript = redis.NewScript(rwLibSrc + rwForceUnlockSrc)
)

// rwMode is a script's mode argument.
func rwMode(write bool) string {
	if write {
		return "w"
	}
	return "r"
}

func (b *redisBackend) rwAcquire(ctx context.Context, k *keys, owner string, write bool, lease time.Duration, holds int, writer string, mark, maxSleep time.Duration) (acquireReply, error) {
	run := rwAcquireScript.Run
	if holds == 0 {
		run = b.acked(rwAcquireScript) // a new lease; a re-entry changes only a count
	}
	v, err := run(ctx, b.rdb, []string{k.lock, k.readers, k.writerWaiting, k.token},
		rwMode(write), owner, lease.Milliseconds(), holds, max(tokenTTL, 2*lease).Milliseconds(),
		mark.Milliseconds(), max(maxSleep.Milliseconds(), 1), writer).Int64Slice()
	if err != nil {
		return acquireReply{}, err
	}
	if len(v) != 2 {
		return acquireReply{}, fmt.Errorf("rw acquire: %d values in reply, want 2", len(v))
	}
	return acquireReply{status: v[0], value: v[1]}, nil
}

func (b *redisBackend) rwRenew(ctx context.Context, k *keys, owner string, write bool, lease time.Duration) (bool, error) {
	n, err := b.runAcked(ctx, rwRenewScript, []string{k.lock, k.readers, k.writerWaiting},
		rwMode(write), owner, lease.Milliseconds()).Int64()
	return n == 1, err
}

func (b *redisBackend) rwRelease(ctx context.Context, k *keys, owner string, write bool, holds, drop int) (int64, bool, error) {
	v, err := rwReleaseScript.Run(ctx, b.rdb, []string{k.lock, k.readers, k.writerWaiting, k.channel, k.released(owner)},
		rwMode(write), owner, holds, drop, owner, releasedTTL.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, false, err
	}
	if len(v) != 2 {
		return 0, false, fmt.Errorf("rw release: %d values in reply, want 2", len(v))
	}
	return v[0], v[1] == 1, nil
}

func (b *redisBackend) rwLeave(ctx context.Context, k *keys, owner string) (bool, error) {
	n, err := rwLeaveScript.Run(ctx, b.rdb, []string{k.lock, k.readers, k.writerWaiting, k.channel},
		owner, owner).Int64()
	return n == 1, err
}

func (b *redisBackend) rwForceUnlock(ctx context.Context, k *keys) (int64, error) {
	return rwForceUnlockScript.Run(ctx, b.rdb, []string{k.lock, k.readers, k.writerWaiting, k.channel}).Int64()
}
