package benchutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/internal/redistest"
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

// ServerVersionOr is ServerVersion, but with def for a reply that has no
// redis_version line.
func ServerVersionOr(ctx context.Context, rdb *redis.Client, def string) (string, error) {
	v, err := ServerVersion(ctx, rdb)
	if errors.Is(err, ErrNoVersion) {
		return def, nil
	}
	return v, err
}

// Server is a throwaway redis-server with the benchmark's own client.
type Server struct {
	*redistest.Server
	Ctl *redis.Client // the benchmark's INFO and PING, never in a measured window
}

// Launch starts a throwaway redis-server (redistest.Launch), registers its
// Close with AddCleanup so that Abort stops it too, and connects Ctl.
func Launch() (*Server, error) {
	srv, err := redistest.Launch()
	if err != nil {
		return nil, err
	}
	AddCleanup(srv.Close)
	return &Server{Server: srv, Ctl: redis.NewClient(srv.Options())}, nil
}

// Close closes Ctl, then stops the server.
func (s *Server) Close() {
	s.Ctl.Close()
	s.Server.Close()
}

// Main runs run with a context that ends on SIGINT or SIGTERM. If run
// fails, Main prints "prog: err" to stderr and calls Abort(1) (run's
// deferred calls have run by then).
func Main(prog string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, prog+":", err)
		Abort(1)
	}
}

// StartCPUProfile writes a CPU profile of this process to the file path
// (pprof.StartCPUProfile) until stop is called, which stops the profile
// and closes the file. With path "" it does nothing (and stop neither).
func StartCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// Sleep waits for d, or until ctx ends: then it returns ctx.Err().
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitOrAbort waits for wg. If it has not finished after grace, it prints
// msg to stderr and calls Abort(3): every call of a benchmark has a
// timeout, so goroutines still running then mean a library hangs.
func WaitOrAbort(wg *sync.WaitGroup, grace time.Duration, msg string) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		fmt.Fprintln(os.Stderr, msg)
		Abort(3)
	}
}
