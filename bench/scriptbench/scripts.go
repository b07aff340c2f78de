package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A scriptSet is one version of lockcron's scripts, as the Client sends
// them.
type scriptSet struct {
	name                                   string
	claim, finish, acquire, release, renew *redis.Script
	// renewals: the scripts take how often the ledger's and the
	// history's lifetimes are renewed (claim.lua's ARGV[11], finish.lua's
	// ARGV[13..14]), as since issue 23; before, they renewed both at each
	// call.
	renewals bool
}

// loadSet reads the scripts of one version through read (a file of
// internal/core/scripts by name).
func loadSet(name string, renewals bool, read func(file string) (string, error)) (*scriptSet, error) {
	src := map[string]string{}
	for _, f := range []string{"lib.lua", "claim.lua", "finish.lua", "acquire.lua", "release.lua", "renew.lua"} {
		s, err := read(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		src[f] = s
	}
	lib := src["lib.lua"]
	return &scriptSet{
		name:     name,
		claim:    redis.NewScript(lib + src["claim.lua"]),
		finish:   redis.NewScript(lib + src["finish.lua"]),
		acquire:  redis.NewScript(lib + src["acquire.lua"]),
		release:  redis.NewScript(src["release.lua"]),
		renew:    redis.NewScript(src["renew.lua"]),
		renewals: renewals,
	}, nil
}

func (s *scriptSet) preload(ctx context.Context, rdb *redis.Client) error {
	for _, sc := range []*redis.Script{s.claim, s.finish, s.acquire, s.release, s.renew} {
		if err := sc.Load(ctx, rdb).Err(); err != nil {
			return fmt.Errorf("%s: SCRIPT LOAD: %w", s.name, err)
		}
	}
	return nil
}

// The Client's arguments (internal/core: redis_ledger.go, redis.go).
const (
	lease       = 30 * time.Second
	tokenTTL    = 24 * time.Hour
	ledgerTTL   = 35 * 24 * time.Hour
	historyAge  = 30 * 24 * time.Hour
	releasedTTL = 30 * time.Second
	// Since issue 23: a ledger lives a day longer, renewed once a day;
	// a history is trimmed by age and renewed once an hour.
	ledgerRenew  = 24 * time.Hour
	historyRenew = time.Hour
)

// jobKeys are the keys of a job's lock and ledger, as the Client names
// them; each script set has its own jobs.
type jobKeys struct{ lock, token, channel, ledger, history string }

func (s *scriptSet) keys(i int) jobKeys {
	b := fmt.Sprintf("lockcron:{%s job %d}", s.name, i)
	return jobKeys{lock: b, token: b + ":token", channel: b + ":channel", ledger: b + ":ledger:job", history: b + ":ledger:job:history"}
}

// owner is a claim's owner id: unique per job and tick, as the Client's.
func owner(i, tick int) string { return fmt.Sprintf("replica-1:7f3a9c2e:%d", tick*100000+i) }

// runClaim runs claim.lua as the scheduler's claim of the reentrant lock
// with no wait, recording the job's definition digest, and checks that it
// took the lock.
func (s *scriptSet) runClaim(ctx context.Context, rdb *redis.Client, i, tick int) error {
	return s.runClaimRenewing(ctx, rdb, i, tick, ledgerRenew)
}

// runClaimRenewing is runClaim with the ledger's lifetime renewed every
// renew (0: at this call).
func (s *scriptSet) runClaimRenewing(ctx context.Context, rdb *redis.Client, i, tick int, renew time.Duration) error {
	k := s.keys(i)
	args := []any{owner(i, tick), lease.Milliseconds(), tokenTTL.Milliseconds(), tickMs(tick), ledgerTTL.Milliseconds(), 0, 0, 0, 0, digest}
	if s.renewals {
		args[4] = (ledgerTTL + ledgerRenew).Milliseconds()
		args = append(args, renew.Milliseconds())
	}
	v, err := s.claim.Run(ctx, rdb, []string{k.lock, k.token, k.ledger}, args...).Slice()
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if len(v) < 1 || v[0] != int64(1) {
		return fmt.Errorf("claim of tick %d: reply %v, want it acquired", tick, v)
	}
	return nil
}

// runFinish runs finish.lua as the scheduler's Finish of a run that went
// well, with its history entry.
func (s *scriptSet) runFinish(ctx context.Context, rdb *redis.Client, keep, i, tick int) error {
	return s.runFinishRenewing(ctx, rdb, keep, i, tick, ledgerRenew, historyRenew)
}

// runFinishRenewing is runFinish with the ledger's and the history's
// lifetimes renewed every renew and histRenew (0: at this call).
func (s *scriptSet) runFinishRenewing(ctx context.Context, rdb *redis.Client, keep, i, tick int, renew, histRenew time.Duration) error {
	k := s.keys(i)
	t := tickMs(tick)
	args := []any{owner(i, tick), 1, t, 1, "success", 1, ledgerTTL.Milliseconds(),
		"\n" + strconv.FormatInt(t, 10) + "\n1\njob", t, 0, keep, historyAge.Milliseconds()}
	if s.renewals {
		args[6] = (ledgerTTL + ledgerRenew).Milliseconds()
		args = append(args, renew.Milliseconds(), histRenew.Milliseconds())
	}
	args = append(args, entry(i, tick)...)
	n, err := s.finish.Run(ctx, rdb, []string{k.lock, k.channel, k.ledger, k.history}, args...).Int64()
	if err != nil {
		return fmt.Errorf("finish: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("finish of tick %d: reply %d, want 1", tick, n)
	}
	return nil
}

// digest is a job's definition digest as the scheduler records it with
// each claim (fleet.WithDefinition: 8 bytes of SHA-256, hex).
const digest = "3f9a1c2e7b6d5e40"

// tickMs is tick number n as the scheduler's tick: a time in ms.
func tickMs(n int) int64 { return sinceStart.Add(time.Duration(n) * time.Second).UnixMilli() }

// entry is a history entry as the scheduler writes one for a run that went
// well (scheduler.Run.fields), its fields sorted as the Client sends them.
func entry(i, tick int) []any {
	at := sinceStart.Add(time.Duration(tick) * time.Second)
	start := at.Add(1200 * time.Microsecond)
	end := start.Add(3400*time.Microsecond + time.Duration(i)*time.Microsecond)
	return []any{
		"attempt", "1",
		"duration_ms", strconv.FormatFloat(float64(end.Sub(start))/float64(time.Millisecond), 'f', 3, 64),
		"end", end.Format(time.RFC3339Nano),
		"outcome", "success",
		"replica", "replica-1",
		"start", start.Format(time.RFC3339Nano),
		"tick", at.Format(time.RFC3339),
		"token", strconv.FormatInt(1764237600000000+int64(tick), 10),
	}
}

// warm runs cfg.warm ticks on every job of s, unmeasured.
func (b *bench) warm(ctx context.Context, s *scriptSet) error {
	for t := 1; t <= b.cfg.warm; t++ {
		for i := range b.cfg.jobs {
			if err := s.runClaim(ctx, b.rdb, i, t); err != nil {
				return fmt.Errorf("%s: warming: %w", s.name, err)
			}
			if err := s.runFinish(ctx, b.rdb, b.cfg.keep, i, t); err != nil {
				return fmt.Errorf("%s: warming: %w", s.name, err)
			}
		}
	}
	return nil
}

// ledgerRound claims tick on every job, then finishes them (each phase
// alone), then runs one more tick (claim, finish) on the jobs one after
// the other.
func (b *bench) ledgerRound(ctx context.Context, s *scriptSet, tick int) error {
	if err := b.phase(ctx, s.name+": claim", func(i int) error { return s.runClaim(ctx, b.rdb, i, tick) }); err != nil {
		return err
	}
	if err := b.phase(ctx, s.name+": finish with history", func(i int) error {
		return s.runFinish(ctx, b.rdb, b.cfg.keep, i, tick)
	}); err != nil {
		return err
	}
	// The next tick, claim and finish in turn.
	t := tick + 1
	if err := b.phase(ctx, s.name+": claim+finish, one job", func(i int) error {
		if err := s.runClaim(ctx, b.rdb, i, t); err != nil {
			return err
		}
		return s.runFinish(ctx, b.rdb, b.cfg.keep, i, t)
	}); err != nil || !s.renewals {
		return err
	}
	// The rare call that renews the lifetimes (once a day for a ledger,
	// once an hour for a history): the next tick's claim, then its finish.
	t++
	if err := b.phase(ctx, s.name+": claim renewing the ledger's lifetime", func(i int) error {
		return s.runClaimRenewing(ctx, b.rdb, i, t, 0)
	}); err != nil {
		return err
	}
	return b.phase(ctx, s.name+": finish renewing both lifetimes, trimming by age", func(i int) error {
		return s.runFinishRenewing(ctx, b.rdb, b.cfg.keep, i, t, 0, 0)
	})
}

// lockRound takes a new lease on every job's lock (acquire.lua), renews
// each, then releases each.
func (b *bench) lockRound(ctx context.Context, s *scriptSet, r int) error {
	k := func(i int) jobKeys { return s.keys(1000000 + i) }
	own := func(i int) string { return owner(i, 1000000+r) }
	if err := b.phase(ctx, s.name+": acquire", func(i int) error {
		v, err := s.acquire.Run(ctx, b.rdb, []string{k(i).lock, k(i).token},
			own(i), lease.Milliseconds(), 0, tokenTTL.Milliseconds()).Int64Slice()
		if err == nil && (len(v) != 2 || v[0] != 1) {
			err = fmt.Errorf("acquire: reply %v, want it acquired", v)
		}
		return err
	}); err != nil {
		return err
	}
	if err := b.phase(ctx, s.name+": renew", func(i int) error {
		n, err := s.renew.Run(ctx, b.rdb, []string{k(i).lock}, own(i), lease.Milliseconds()).Int64()
		if err == nil && n != 1 {
			err = fmt.Errorf("renew: reply %d, want 1", n)
		}
		return err
	}); err != nil {
		return err
	}
	return b.phase(ctx, s.name+": release", func(i int) error {
		n, err := s.release.Run(ctx, b.rdb, []string{k(i).lock, k(i).channel, k(i).lock + ":released:" + own(i)},
			own(i), 1, 1, own(i), releasedTTL.Milliseconds()).Int64()
		if err == nil && n != 1 {
			err = fmt.Errorf("release: reply %d, want 1", n)
		}
		return err
	})
}
