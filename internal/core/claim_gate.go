package core

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// claimGate holds back a Client's claims to a shard that the last claims
// found unreachable (the store's server, or, on a Cluster, the primary of
// the key's hash slot): while a primary is down and until its replica is
// promoted, a fleet of a thousand jobs would otherwise send a claim per job
// every few tens of milliseconds to a shard that refuses them all. One
// claim at a time probes the shard, after a pause that starts at 25ms and
// doubles with each failure, up to maxBackoff; the others wait for its
// answer, and all go at once when it gets one. A shard the Client has not
// found down costs a map lookup. Finishes are not held back: each is
// retried on its own (Claim.Finish).
type claimGate struct {
	mu   sync.Mutex
	down map[string]*shardDown // by shard: the shards last found unreachable
	// served is, on a Cluster, the primary that last answered a claim of
	// each hash slot. While a primary is down and not yet replaced, the
	// cluster client's slot map may have no primary for its slots (it
	// then names a random node), so a claim's shard is the one that last
	// served its slot.
	served map[int]string
}

// shardDown is a shard that the last claim to it found unreachable.
type shardDown struct {
	n       int       // failures in a row
	until   time.Time // no probe before
	probing bool      // a claim is on its way
	changed chan struct{}
}

// gateOutcome is what a claim found of its shard.
type gateOutcome int

const (
	shardUp      gateOutcome = iota // the store answered
	shardDownNow                    // unreachable (unreachable(err))
	shardUnknown                    // the claim's ctx ended first
)

// errShardDown is the failure of a claim that was held back until its
// wait ended (WithWait) because its shard was down: transient, like the
// failures that found it down.
var errShardDown = errors.New("its shard did not answer the last claims")

// enter waits until a claim to shard may go: at once if the shard is not
// known to be down; else until it is this claim's turn to probe (probe
// true), or another probe found the shard up. It returns ctx's error if
// ctx ends first, ErrClosed if closed is closed first, and a transient
// errShardDown if until (not zero) passes first.
func (g *claimGate) enter(ctx context.Context, shard string, until time.Time, closed <-chan struct{}) (probe bool, err error) {
	var deadline <-chan time.Time
	if !until.IsZero() {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		deadline = t.C
	}
	for {
		g.mu.Lock()
		s := g.down[shard]
		if s == nil {
			g.mu.Unlock()
			return false, nil
		}
		now := time.Now()
		if !s.probing && !now.Before(s.until) {
			s.probing = true
			g.mu.Unlock()
			return true, nil
		}
		changed, wait, probing := s.changed, s.until.Sub(now), s.probing
		g.mu.Unlock()
		if probing {
			wait = maxBackoff // the probe's answer, or another look
		}
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false, ctx.Err()
		case <-closed:
			t.Stop()
			return false, ErrClosed
		case <-deadline:
			t.Stop()
			return false, transientError{errShardDown}
		}
		t.Stop()
	}
}

// leave records what a claim that entered found of its shard.
func (g *claimGate) leave(shard string, probe bool, o gateOutcome) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.down[shard]
	switch {
	case o == shardUp:
		if s != nil {
			delete(g.down, shard)
			close(s.changed)
		}
		return
	case s == nil && o == shardUnknown:
		return
	case s == nil:
		if g.down == nil {
			g.down = make(map[string]*shardDown)
		}
		s = &shardDown{changed: make(chan struct{})}
		g.down[shard] = s
	}
	if o == shardDownNow && (probe || !s.probing) {
		// Claims that were on their way when the shard went down fail
		// together: only the probe's failure, or the first of them,
		// lengthens the pause.
		if s.until.Before(time.Now()) || probe {
			s.until = time.Now().Add(min(25*time.Millisecond<<s.n, maxBackoff))
			if 25*time.Millisecond<<s.n < maxBackoff {
				s.n++
			}
		}
	}
	if probe {
		s.probing = false
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// claimShard names the shard a claim of key goes to, and reports whether
// claims to it are gated: on the Redis backend only (the in-memory one
// is never unreachable). On a Cluster the shard is the primary that last
// answered a claim of key's hash slot, else the one the cluster client
// names; slot is the hash slot (-1 elsewhere).
func (c *Client) claimShard(ctx context.Context, key string) (shard string, slot int, gated bool) {
	rb, ok := c.be.(*redisBackend)
	if !ok {
		return "", -1, false
	}
	cc, ok := rb.rdb.(*redis.ClusterClient)
	if !ok {
		return "", -1, true
	}
	slot = hashSlot(key)
	c.gate.mu.Lock()
	shard, ok = c.gate.served[slot]
	c.gate.mu.Unlock()
	if ok {
		return shard, slot, true
	}
	if n, err := cc.MasterForKey(ctx, key); err == nil {
		shard = n.Options().Addr
	}
	return shard, slot, true
}

// claimServed records, after a claim of slot got an answer, the primary
// that serves it now, as the cluster client knows it.
func (c *Client) claimServed(ctx context.Context, key string, slot int) {
	rb, _ := c.be.(*redisBackend)
	cc, ok := rb.rdb.(*redis.ClusterClient)
	if !ok || slot < 0 {
		return
	}
	n, err := cc.MasterForKey(ctx, key)
	if err != nil {
		return
	}
	addr := n.Options().Addr
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	if c.gate.served == nil {
		c.gate.served = make(map[int]string)
	}
	c.gate.served[slot] = addr
}

// hashSlot is the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag (the part between the first { and the next }, if not empty),
// else of the whole key, modulo 16384.
func hashSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
