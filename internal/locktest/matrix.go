package locktest

import (
	"testing"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/lock"
)

// Backends are the backends that Matrix runs a test on, by name.
var Backends = []string{"redis", "memory"}

// Store is one store of one backend, which the Clients of a test share as
// separate processes share one Redis: a redis-server that the test started,
// or a MemoryStore.
type Store struct {
	// Name is the backend's name, one of Backends.
	Name string
	// Server is the redis-server of the Redis backend; nil on the memory
	// backend, so a test that reads Redis's own state checks it first.
	Server *redistest.Server
	// Memory is the MemoryStore of the memory backend; nil on Redis.
	Memory *lock.MemoryStore
}

// NewStore returns a fresh store of the named backend: for "redis", a new
// redis-server that stops when t ends.
func NewStore(t testing.TB, backend string) Store {
	t.Helper()
	switch backend {
	case "redis":
		return Store{Name: backend, Server: redistest.Start(t)}
	case "memory":
		return Store{Name: backend, Memory: lock.NewMemoryStore()}
	}
	t.Fatalf("locktest: unknown backend %q (want one of %q)", backend, Backends)
	return Store{}
}

// NewClient returns a new Client on the store, closed when t ends.
func (s Store) NewClient(t testing.TB, opts ...lock.Option) *lock.Client {
	t.Helper()
	var (
		c   *lock.Client
		err error
	)
	if s.Server != nil {
		c, err = lock.New(s.Server.Client(), opts...)
	} else {
		c, err = s.Memory.NewClient(opts...)
	}
	if err != nil {
		t.Fatalf("locktest: a Client on the %s store: %v", s.Name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// NewClients returns n new Clients on the store, closed when t ends.
func (s Store) NewClients(t testing.TB, n int, opts ...lock.Option) []*lock.Client {
	t.Helper()
	out := make([]*lock.Client, n)
	for i := range out {
		out[i] = s.NewClient(t, opts...)
	}
	return out
}

// Matrix runs fn once per backend, each in a subtest named after it and on a
// fresh store of its own.
func Matrix(t *testing.T, fn func(t *testing.T, s Store)) {
	t.Helper()
	for _, name := range Backends {
		t.Run(name, func(t *testing.T) { fn(t, NewStore(t, name)) })
	}
}
