package benchutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoVersion is returned by ServerVersion when INFO server has no
// redis_version line.
var ErrNoVersion = errors.New("INFO server: no redis_version")

// ServerVersion returns the redis_version of INFO server, or ErrNoVersion
// if the reply has none. It gives the server 5 s to answer.
func ServerVersion(ctx context.Context, rdb *redis.Client) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return "", fmt.Errorf("INFO server: %w", err)
	}
	for line := range strings.Lines(s) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", ErrNoVersion
}

// Loadavg is the first three fields of /proc/loadavg, or "?".
func Loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

var (
	cleanupMu sync.Mutex
	cleanup   []func()
)

// AddCleanup registers f to be run by Abort, such as the Close of a
// throwaway redis-server that would otherwise outlive the process. f must
// also be safe to call after the program has run it itself.
func AddCleanup(f func()) {
	cleanupMu.Lock()
	cleanup = append(cleanup, f)
	cleanupMu.Unlock()
}

// Abort runs the functions registered with AddCleanup, the last one first,
// and exits the process with code. It holds the registry's lock until the
// exit, so a concurrent AddCleanup or Abort waits forever.
func Abort(code int) {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	for i := len(cleanup) - 1; i >= 0; i-- {
		cleanup[i]()
	}
	os.Exit(code)
}
