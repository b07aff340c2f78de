// Package redistest starts real redis-server processes for tests.
//
// Each Server is a child process of the test binary, listening on a free
// loopback TCP port, with persistence off and its files in a temporary
// directory. Tests can pause it (SIGSTOP), resume it, kill it, and restart it
// empty on the same address, to exercise faults against the real server.
// The process is killed in t.Cleanup, and also when the test binary dies.
//
// StartSentinel and StartCluster run, from the same binary, a Sentinel
// deployment (a primary, a replica, three sentinels) and a Redis Cluster
// (three primaries, three replicas), whose Failover methods kill a primary
// and wait until its replica has taken over.
//
// There is no fake: if redis-server is not installed, Start fails the test
// with a message that says how to install it.
package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// InstallHint is the message a test fails with when redis-server is missing.
const InstallHint = "redis-server not found in PATH: install it (Debian/Ubuntu: apt-get update && apt-get install -y redis-server redis-sentinel) or set REDIS_SERVER to its path"

// startTimeout bounds how long Start and Restart wait for the server to answer.
const startTimeout = 10 * time.Second

// failoverTimeout bounds each wait of the failovers of a Sentinel or a
// Cluster, and of their start, such as the one for a replica to sync.
const failoverTimeout = 15 * time.Second

// Server is one redis-server process. Its methods are safe for concurrent use.
type Server struct {
	t       testing.TB
	bin     string
	dir     string
	conf    string // config file passed before the options, if any
	cluster bool   // cluster mode: the server also listens on busPort
	args    []string

	mu      sync.Mutex
	port    int
	busPort int
	cmd     *exec.Cmd
	done    chan struct{} // closed when cmd has been waited for
}

// Binary returns the path of redis-server, or an error that says how to
// install it. REDIS_SERVER overrides the lookup in PATH.
func Binary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", errors.New(InstallHint)
	}
	return p, nil
}

// Start runs a new redis-server for the test and waits until it answers PING.
// extra are additional redis-server arguments (for example "--maxmemory",
// "10mb"). The server is killed when the test ends.
func Start(t testing.TB, extra ...string) *Server {
	t.Helper()
	s, err := Launch(extra...)
	if err != nil {
		t.Fatal(err)
	}
	s.t = t
	t.Cleanup(s.Close)
	return s
}

// Launch is Start for programs that are not tests, such as benchmarks: the
// caller must Close the server. Its methods panic where a test would fail.
func Launch(extra ...string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	s, err := launch(&Server{bin: bin, args: extra}, "")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	return s, nil
}

// launch starts s, whose bin, cluster and args are set, in a new temporary
// directory. A non-empty conf is written to a config file there, which is
// passed to the server before its options.
func launch(s *Server, conf string) (*Server, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	s.dir = dir
	if conf != "" {
		s.conf = filepath.Join(dir, "redis.conf")
		if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	// A free port can be taken by someone else between our probe and the
	// server's bind; try a few ports before giving up.
	var lastErr error
	for range 5 {
		port, busPort, err := s.freePorts()
		if err != nil {
			lastErr = err
			continue
		}
		if lastErr = s.start(port, busPort); lastErr == nil {
			return s, nil
		}
	}
	_ = os.RemoveAll(dir)
	return nil, lastErr
}

// freePorts returns a free port for the server and, in cluster mode, another
// for its cluster bus: the default bus port, port+10000, may be taken or out
// of range.
func (s *Server) freePorts() (port, busPort int, err error) {
	if port, err = freePort(); err != nil || !s.cluster {
		return port, 0, err
	}
	for {
		if busPort, err = freePort(); err != nil || busPort != port {
			return port, busPort, err
		}
	}
}

// Close kills the server and removes its directory.
func (s *Server) Close() {
	s.Kill()
	_ = os.RemoveAll(s.dir)
}

func (s *Server) fatalf(format string, args ...any) {
	if s.t != nil {
		s.t.Helper()
		s.t.Fatalf(format, args...)
	}
	panic(fmt.Sprintf(format, args...))
}

// Addr is the server's address, host:port on the loopback interface.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Options returns go-redis options for this server. ContextTimeoutEnabled is
// on, so a ctx deadline bounds each command even when the server hangs.
func (s *Server) Options() *redis.Options {
	return &redis.Options{
		Addr:                  s.Addr(),
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
	}
}

// Client returns a new go-redis client for this server, closed when the test
// ends.
func (s *Server) Client() *redis.Client {
	c := redis.NewClient(s.Options())
	if s.t != nil {
		s.t.Cleanup(func() { _ = c.Close() })
	}
	return c
}

// Pause stops the server with SIGSTOP: connections stay open and nothing is
// answered until Resume.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

// Kill ends the server with SIGKILL and waits for it to exit. Killing a
// stopped server is a no-op.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart kills the server and starts a new, empty one on the same address.
func (s *Server) Restart() {
	s.Kill()
	s.mu.Lock()
	port, busPort := s.port, s.busPort
	s.mu.Unlock()
	// The old process has exited and the server sets SO_REUSEADDR, so the
	// port is normally free at once; retry briefly in case it is not.
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.start(port, busPort)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.fatalf("redistest: restart on port %d: %v", port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Do runs one command on a short-lived connection and returns its reply,
// failing the test on error.
func (s *Server) Do(args ...any) any {
	c := redis.NewClient(s.Options())
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := c.Do(ctx, args...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		s.fatalf("redistest: %v: %v", args, err)
	}
	return v
}

// Info runs INFO for one section (such as "replication") on a short-lived
// connection and returns its fields, failing the test on error or if the
// server does not answer within 5 s.
func (s *Server) Info(section string) map[string]string {
	c := s.admin()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := info(ctx, c, section)
	if err != nil {
		s.fatalf("redistest: %v", err)
	}
	return info
}

// info runs INFO section on c and parses its "field:value" lines.
func info(ctx context.Context, c *redis.Client, section string) (map[string]string, error) {
	text, err := c.Info(ctx, section).Result()
	if err != nil {
		return nil, fmt.Errorf("INFO %s on %s: %w", section, c.Options().Addr, err)
	}
	fields := make(map[string]string)
	for line := range strings.Lines(text) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && !strings.HasPrefix(k, "#") {
			fields[k] = v
		}
	}
	return fields, nil
}

// admin returns a new client for the helpers' own commands, which the caller
// closes. It does not retry, so that a poll sees each failure as it happens.
func (s *Server) admin() *redis.Client { return redis.NewClient(s.adminOptions()) }

func (s *Server) adminOptions() *redis.Options {
	return &redis.Options{
		Addr:                  s.Addr(),
		MaxRetries:            -1,
		DialTimeout:           time.Second,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
	}
}

// running reports whether the server process is up (it may be paused).
func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd != nil
}

// poll calls check until it returns nil or timeout passes, and then returns
// check's last error. Each call gets a ctx that ends after a second.
func poll(timeout time.Duration, check func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := check(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.fatalf("redistest: %v to a server that is not running", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.fatalf("redistest: %v: %v", sig, err)
	}
}

func (s *Server) start(port, busPort int) error {
	var args []string
	if s.conf != "" {
		args = append(args, s.conf)
	}
	args = append(args,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--loglevel", "warning",
		"--logfile", filepath.Join(s.dir, "redis.log"),
	)
	if busPort != 0 {
		args = append(args, "--cluster-port", strconv.Itoa(busPort))
	}
	args = append(args, s.args...)
	cmd := exec.Command(s.bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	if err := waitReady(addr, cmd.Process.Pid, done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		return fmt.Errorf("redis-server on %s: %w\n%s%s", addr, err, out.String(), lastLines(string(log), 10))
	}
	s.mu.Lock()
	s.port, s.busPort, s.cmd, s.done = port, busPort, cmd, done
	s.mu.Unlock()
	return nil
}

// waitReady polls PING until the server whose process is pid answers, it
// exits, or startTimeout passes. A server of another process that answers
// on addr (a parallel test's, which took the port between our probe and
// our server's bind: ours then fails to bind and exits) is an error, so
// that the caller tries another port instead of sharing that server.
func waitReady(addr string, pid int, exited <-chan struct{}) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true, DialTimeout: time.Second})
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fields, err := info(ctx, c, "server")
		cancel()
		if err == nil {
			if got := fields["process_id"]; got != strconv.Itoa(pid) {
				return fmt.Errorf("another redis-server (pid %s) answers on %s", got, addr)
			}
			return nil
		}
		select {
		case <-exited:
			return errors.New("exited before answering PING")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %v: %w", startTimeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
