package locktest

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

// NewClient returns a Client on srv, closed when t ends.
func NewClient(t testing.TB, srv *redistest.Server, opts ...lock.Option) *lock.Client {
	t.Helper()
	return Made(t, func(o ...lock.Option) (*lock.Client, error) { return lock.New(srv.Client(), o...) }, opts)
}

// Made returns the Client that f makes with opts (lock.NewMemory, say),
// closed when t ends.
func Made(t testing.TB, f func(...lock.Option) (*lock.Client, error), opts []lock.Option) *lock.Client {
	t.Helper()
	c, err := f(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// WaitQueued polls until c has n goroutines waiting for name (a fair
// lock's waiter counts once it has its place), for 5s at most.
func WaitQueued(t testing.TB, c *lock.Client, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for c.Waiting(name) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines wait for %q after 5s, want %d", c.Waiting(name), name, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// ScriptSource is a script as the Client sends it: the files of
// internal/core/scripts named, one after the other (lib.lua first, for the
// scripts that use it).
func ScriptSource(t testing.TB, files ...string) string {
	t.Helper()
	_, here, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("locktest: no caller information to find the scripts by")
	}
	dir := filepath.Join(filepath.Dir(here), "..", "core", "scripts")
	var src []byte
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	return string(src)
}
