package fleet_test

import (
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

func TestMain(m *testing.M) {
	// go-redis redials a node that refused a connection in a goroutine of
	// its own, which sees the client closed only after its next second of
	// sleep.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

func newClient(t *testing.T, srv *redistest.Server, opts ...lock.Option) *lock.Client {
	t.Helper()
	return mkClient(t, func(o ...lock.Option) (*lock.Client, error) { return lock.New(srv.Client(), o...) }, opts)
}

// mkClient makes a Client with f, closed when the test ends.
func mkClient(t *testing.T, f func(...lock.Option) (*lock.Client, error), opts []lock.Option) *lock.Client {
	t.Helper()
	c, err := f(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// scriptSource is a script as the Client sends it: the files of
// internal/core/scripts named, one after the other (lib.lua first, for the
// scripts that use it).
func scriptSource(t *testing.T, files ...string) string {
	t.Helper()
	var src []byte
	for _, f := range files {
		b, err := os.ReadFile("../internal/core/scripts/" + f)
		if err != nil {
			t.Fatal(err)
		}
		src = append(src, b...)
	}
	return string(src)
}
