package core

import (
	"context"
	"fmt"
	"strings"
)

// eventBackend is what Publish and Subscribe need from a backend.
type eventBackend interface {
	// publish sends payload on channel to every subscriber of the store,
	// and returns how many Clients (connections) received it.
	publish(ctx context.Context, channel, payload string) (int64, error)
	// listen calls fn with every payload on channel until stop is called.
	listen(channel string, fn func(payload string)) (stop func())
	// listening reports whether the server has confirmed the subscription
	// of every channel listened to.
	listening() bool
}

// eventChannel is the Pub/Sub channel of topic: outside every lock's hash
// tag, so that no lock name can collide with it.
func (c *Client) eventChannel(topic string) string { return c.opt.prefix + ":events:" + topic }

func validTopic(topic string) error {
	if topic == "" || strings.ContainsAny(topic, "{}") {
		return fmt.Errorf("lock: event topic %q: empty, or holds { or }: %w", topic, ErrInvalid)
	}
	return nil
}

// Publish sends payload to the subscribers of topic on every Client of the
// same store and key prefix, this one's included (Redis Pub/Sub, or the
// MemoryStore), and returns how many Clients received it (on Redis, the
// connections subscribed to the topic, as PUBLISH counts them; on a
// Cluster, those of the node it was sent to). Delivery is at most once: a
// subscriber whose connection is down at that moment misses it. ctx bounds
// the call. It returns ErrInvalid for an empty topic or one with braces,
// and ErrClosed after Close. It is safe for concurrent use.
func (c *Client) Publish(ctx context.Context, topic, payload string) (int64, error) {
	if err := validTopic(topic); err != nil {
		return 0, err
	}
	if c.isClosed() {
		return 0, fmt.Errorf("lock: publish %q: %w", topic, ErrClosed)
	}
	n, err := c.be.publish(ctx, c.eventChannel(topic), payload)
	if err != nil {
		return 0, fmt.Errorf("lock: publish %q: %w", topic, err)
	}
	return n, nil
}

// Subscribe calls fn with the payload of each message published on topic
// (Publish, from any Client of the store and key prefix) until stop is
// called or the Client is closed. On Redis it shares the Client's Pub/Sub
// connection; the subscription is in place once the server confirms it,
// shortly after Subscribe returns, and it is renewed after a reconnect
// (messages sent meanwhile are lost). fn runs on the Client's dispatcher
// goroutine, one message at a time: it must return quickly, handing the
// payload to a goroutine of the caller's. It returns ErrInvalid for an
// empty topic or one with braces, and ErrClosed after Close. It is safe for
// concurrent use; stop may be called more than once.
func (c *Client) Subscribe(topic string, fn func(payload string)) (stop func(), err error) {
	if err := validTopic(topic); err != nil {
		return nil, err
	}
	if fn == nil {
		return nil, fmt.Errorf("lock: subscribe %q: nil func: %w", topic, ErrInvalid)
	}
	if c.isClosed() {
		return nil, fmt.Errorf("lock: subscribe %q: %w", topic, ErrClosed)
	}
	return c.be.listen(c.eventChannel(topic), fn), nil
}

// Subscribed reports whether the store has confirmed every subscription of
// Subscribe and Ledger.Watch that is in place on this Client: a message
// published from then on reaches them (on Redis, the server answered each
// SUBSCRIBE; on the memory backend, at once). A program that must not miss
// a request sent once it reports itself ready waits for it. It is safe for
// concurrent use.
func (c *Client) Subscribed() bool { return c.be.listening() }

// handler is one Subscribe; be is its Client's memory backend (nil on
// Redis).
type handler struct {
	fn func(string)
	be *memoryBackend
}

// Ping checks that the store answers: a PING to Redis (on a Cluster, to
// every node), nothing for the memory backend. ctx bounds it. It returns
// ErrClosed after Close. It is safe for concurrent use.
func (c *Client) Ping(ctx context.Context) error {
	if c.isClosed() {
		return fmt.Errorf("lock: ping: %w", ErrClosed)
	}
	if err := c.be.ping(ctx); err != nil {
		return fmt.Errorf("lock: ping: %w", err)
	}
	return nil
}
