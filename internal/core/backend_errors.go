package core

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// transient reports whether err is a failure that passes: the network (a
// dropped or refused connection, a timeout, an empty pool), or a server
// that is loading, read-only (a failover under way), down or busy. A waiter
// tries again after it; any other error (a script error, a permission, a
// closed client) ends the wait.
func (b *redisBackend) transient(err error) bool {
	if errors.Is(err, redis.ErrClosed) {
		return false
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted):
		return true
	}
	for _, p := range []string{"LOADING", "READONLY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "BUSY", "NOREPLICAS"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// storeID names the server or servers: the address of a single server, the
// seed addresses of a Cluster; empty when it cannot tell (a Ring, a
// Sentinel client), so that Multi orders such parts by name alone.
func (b *redisBackend) storeID() string {
	switch rdb := b.rdb.(type) {
	case *redis.Client:
		return rdb.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(rdb.Options().Addrs, ",")
	}
	return ""
}

// transient: nothing between a MemoryStore and its Clients can fail and
// come back.
func (b *memoryBackend) transient(error) bool { return false }

// storeID names the MemoryStore.
func (b *memoryBackend) storeID() string { return fmt.Sprintf("memory %p", b.s) }
