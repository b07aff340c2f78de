package core

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed scripts/fairacquire.lua
	fairAcquireSrc string
	//go:embed scripts/fairrelease.lua
	fairReleaseSrc string
	//go:embed scripts/fairleave.lua
	fairLeaveSrc string

	fairAcquireScript = redis.NewScript(libSrc + fairAcquireSrc)
	fairReleaseScript = redis.NewScript(libSrc + fairReleaseSrc)
	fairLeaveScript   = redis.NewScript(libSrc + fairLeaveSrc)
)

// fairMessage starts an unlock message of a fair lock, addressed to the
// waiter named after the releaser: "fair\n<releaser>\n<head>".
const fairMessage = "fair\n"

func (b *redisBackend) fairAcquire(ctx context.Context, k *keys, owner string, lease, place time.Duration, enqueue bool) (fairReply, error) {
	q := 0
	if enqueue {
		q = 1
	}
	v, err := b.runAcked(ctx, fairAcquireScript, []string{k.lock, k.token, k.queue, k.timeout},
		owner, lease.Milliseconds(), max(tokenTTL, 2*lease).Milliseconds(), place.Milliseconds(), q,
		max((place/3).Milliseconds(), 1)).Int64Slice()
	if err != nil {
		return fairReply{}, err
	}
	switch {
	case len(v) == 2:
		return fairReply{status: v[0], value: v[1]}, nil
	case len(v) == 3:
		return fairReply{status: v[0], value: v[1], pos: v[2]}, nil
	}
	return fairReply{}, fmt.Errorf("fair acquire: %d values in reply, want 2 or 3", len(v))
}

func (b *redisBackend) fairRelease(ctx context.Context, k *keys, owner string, holds, drop int) (int64, string, error) {
	v, err := fairReleaseScript.Run(ctx, b.rdb, []string{k.lock, k.channel, k.queue, k.timeout, k.released(owner)},
		owner, holds, drop, releasedTTL.Milliseconds()).Slice()
	if err != nil {
		return 0, "", err
	}
	return statusAndOwner(v, "fair release")
}

func (b *redisBackend) fairLeave(ctx context.Context, k *keys, owner string) (string, error) {
	v, err := fairLeaveScript.Run(ctx, b.rdb, []string{k.lock, k.channel, k.queue, k.timeout}, owner).Slice()
	if err != nil {
		return "", err
	}
	_, head, err := statusAndOwner(v, "fair leave")
	return head, err
}
