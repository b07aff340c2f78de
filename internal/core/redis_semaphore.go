package core

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/semacquire.lua
	semAcquireSrc string
	//go:embed scripts/semrenew.lua
	semRenewSrc string
	//go:embed scripts/semrelease.lua
	semReleaseSrc string
	//go:embed scripts/semforceunlock.lua
	semForceUnlockSrc string

	// Run sends EVALSHA, and EVAL on NOSCRIPT.
	semAcquireScript     = redis.NewScript(libSrc + semAcquireSrc)
	semRenewScript       = redis.NewScript(libSrc + semRenewSrc)
	semReleaseScript     = redis.NewScript(libSrc + semReleaseSrc)
	semForceUnlockScript = redis.NewScript(semForceUnlockSrc)
)

func (b *redisBackend) semAcquire(ctx context.Context, k *keys, owner string, lease time.Duration, holds, permits int) (acquireReply, error) {
	run := semAcquireScript.Run
	if holds == 0 {
		run = b.acked(semAcquireScript) // a new permit; a re-entry changes only a count
	}
	v, err := run(ctx, b.rdb, []string{k.lock, k.holds, semTokens(k), k.token},
		owner, lease.Milliseconds(), holds, max(tokenTTL, 2*lease).Milliseconds(), permits).Int64Slice()
	if err != nil {
		return acquireReply{}, err
	}
	if len(v) != 2 {
		return acquireReply{}, fmt.Errorf("semaphore acquire: %d values in reply, want 2", len(v))
	}
	return acquireReply{status: v[0], value: v[1]}, nil
}

func (b *redisBackend) semRenew(ctx context.Context, k *keys, owner string, lease time.Duration) (bool, error) {
	n, err := b.runAcked(ctx, semRenewScript, []string{k.lock, k.holds, semTokens(k)}, owner, lease.Milliseconds()).Int64()
	return n == 1, err
}

func (b *redisBackend) semRelease(ctx context.Context, k *keys, owner string, holds, drop int) (int64, error) {
	return semReleaseScript.Run(ctx, b.rdb, []string{k.lock, k.holds, semTokens(k), k.channel, k.released(owner)},
		owner, holds, drop, owner, releasedTTL.Milliseconds()).Int64()
}

// semForceUnlock replies acqWrongType when the permits' key holds another
// type, and an error naming the key when another of the semaphore's keys
// does.
func (b *redisBackend) semForceUnlock(ctx context.Context, k *keys) (int64, error) {
	v, err := semForceUnlockScript.Run(ctx, b.rdb, []string{k.lock, k.holds, semTokens(k), k.channel}).Int64Slice()
	if err != nil {
		return 0, err
	}
	if len(v) != 2 {
		return 0, fmt.Errorf("semaphore force unlock: %d values in reply, want 2", len(v))
	}
	if v[0] == acqWrongType && v[1] != 1 {
		return 0, fmt.Errorf("key %q holds another type, not part of a semaphore: %w", semKey(k, v[1]), ErrBadKey)
	}
	return v[0], nil
}
