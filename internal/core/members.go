package core

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strings"
	"time"
)

// memberBackend keeps groups of live members (Heartbeat, Leave).
type memberBackend interface {
	// members runs members.lua on the group at key: ttl 0 removes member.
	members(ctx context.Context, key, member string, ttl time.Duration) ([]string, error)
}

// membersKey is where a group lives: outside every lock's hash tag.
func (c *Client) membersKey(group string) string { return c.opt.prefix + ":members:{" + group + "}" }

// Heartbeat records member as a live member of group for ttl, on the
// store's clock (Redis TIME: the members' clocks do not matter), forgets
// the members whose time has passed, and returns the live members, sorted,
// member included. A member that stops calling it is gone within ttl of
// its last call; Leave removes it at once. Call it every ttl/3 or so to
// stay in.
//
// A group lives at prefix:members:{group}, beside the locks, and expires
// with its last member. It returns ErrInvalid for an empty group or member,
// a group with braces, or a ttl under a millisecond; ErrBadKey if the key
// holds another type; ErrClosed after Close.
func (c *Client) Heartbeat(ctx context.Context, group, member string, ttl time.Duration) ([]string, error) {
	if ttl < time.Millisecond {
		return nil, fmt.Errorf("lock: group %q: heartbeat of %q for %v: under a millisecond: %w", group, member, ttl, ErrInvalid)
	}
	return c.members(ctx, group, member, ttl)
}

// Leave removes member from group at once. It returns the errors of
// Heartbeat.
func (c *Client) Leave(ctx context.Context, group, member string) error {
	_, err := c.members(ctx, group, member, 0)
	return err
}

func (c *Client) members(ctx context.Context, group, member string, ttl time.Duration) ([]string, error) {
	switch {
	case group == "" || strings.ContainsAny(group, "{}"):
		return nil, fmt.Errorf("lock: group %q: empty, or holds { or }: %w", group, ErrInvalid)
	case member == "":
		return nil, fmt.Errorf("lock: group %q: empty member: %w", group, ErrInvalid)
	case c.isClosed():
		return nil, fmt.Errorf("lock: group %q: %w", group, ErrClosed)
	}
	key := c.membersKey(group)
	m, err := c.be.members(ctx, key, member, ttl)
	if err != nil {
		if strings.HasPrefix(err.Error(), "WRONGTYPE") {
			return nil, fmt.Errorf("lock: group %q: key %q holds another type, not a group's sorted set: %w", group, key, ErrBadKey)
		}
		return nil, fmt.Errorf("lock: group %q: %w", group, err)
	}
	slices.Sort(m)
	return m, nil
}
