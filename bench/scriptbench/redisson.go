package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// redisson is Redisson's reentrant lock (RedissonLock, 3.2x): its lock
// script (tryLockInnerAsync) and its unlock script with the unlock latch
// (unlockInnerAsync), written from their published source.
type redisson struct{ lock, unlock *redis.Script }

func newRedisson() *redisson {
	return &redisson{
		// KEYS[1] the lock; ARGV[1] lease ms, ARGV[2] the owner (client
		// id:thread id). nil acquired, else the holder's pttl.
		lock: redis.NewScript(`if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then
  redis.call('hincrby', KEYS[1], ARGV[2], 1);
  redis.call('pexpire', KEYS[1], ARGV[1]);
  return nil;
end;
return redis.call('pttl', KEYS[1]);`),
		// KEYS[1] the lock, KEYS[2] its channel, KEYS[3] the unlock latch
		// of this request; ARGV[1] the unlock message, ARGV[2] lease ms,
		// ARGV[3] the owner, ARGV[4] the publish command, ARGV[5] the
		// latch's lifetime ms.
		unlock: redis.NewScript(`local val = redis.call('get', KEYS[3]);
if val ~= false then
  return tonumber(val);
end;
if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then
  return nil;
end;
local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1);
if (counter > 0) then
  redis.call('pexpire', KEYS[1], ARGV[2]);
  redis.call('set', KEYS[3], 0, 'px', ARGV[5]);
  return 0;
else
  redis.call('del', KEYS[1]);
  redis.call(ARGV[4], KEYS[2], ARGV[1]);
  redis.call('set', KEYS[3], 1, 'px', ARGV[5]);
  return 1;
end;`),
	}
}

// redissonRound locks every job's Redisson lock, then unlocks each.
func (b *bench) redissonRound(ctx context.Context, rs *redisson, r int) error {
	name := func(i int) string { return fmt.Sprintf("redisson-lock-%d", i) }
	own := func(i int) string { return fmt.Sprintf("4f0c2a9e-93b1-4d55-a1de-7c0b3f1e2d44:%d", 100+r) }
	if err := b.phase(ctx, "Redisson lock (tryLockInnerAsync)", func(i int) error {
		err := rs.lock.Run(ctx, b.rdb, []string{name(i)}, lease.Milliseconds(), own(i)).Err()
		if errors.Is(err, redis.Nil) {
			return nil // acquired
		}
		if err == nil {
			err = errors.New("Redisson lock: held, want it acquired")
		}
		return err
	}); err != nil {
		return err
	}
	return b.phase(ctx, "Redisson unlock (unlockInnerAsync, with its latch)", func(i int) error {
		n, err := rs.unlock.Run(ctx, b.rdb,
			[]string{name(i), "redisson_lock__channel:{" + name(i) + "}", fmt.Sprintf("redisson_unlock_latch:{%s}:%d-%d", name(i), r, i)},
			0, lease.Milliseconds(), own(i), "publish", 13500).Int64()
		if err == nil && n != 1 {
			err = fmt.Errorf("Redisson unlock: reply %d, want 1", n)
		}
		return err
	})
}
