package scheduler_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// replyLoser drops the reply of the next command written whose bytes hold
// all of its marks: the command reaches Redis and runs, the client reads
// EOF instead of its reply, and go-redis sends it again on a new
// connection (its retry after a lost reply).
type replyLoser struct {
	mu    sync.Mutex
	marks [][]byte // armed: the marks of the command whose reply is lost
	lost  int      // replies lost so far
}

func (l *replyLoser) arm(marks ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marks = nil
	for _, m := range marks {
		l.marks = append(l.marks, []byte(m))
	}
}

func (l *replyLoser) lostReplies() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// client returns a go-redis client of srv, with retries, whose
// connections lose replies as armed.
func (l *replyLoser) client(t *testing.T, srv *redistest.Server) *redis.Client {
	t.Helper()
	opt := srv.Options()
	opt.MaxRetries = 3
	opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &losingConn{Conn: c, l: l}, nil
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

type losingConn struct {
	net.Conn
	l    *replyLoser
	lose bool // the reply to the last write is to be lost
}

func (c *losingConn) Write(p []byte) (int, error) {
	c.l.mu.Lock()
	if len(c.l.marks) > 0 {
		all := true
		for _, m := range c.l.marks {
			all = all && bytes.Contains(p, m)
		}
		if all {
			c.l.marks, c.lose = nil, true
			c.l.lost++
		}
	}
	c.l.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *losingConn) Read(p []byte) (int, error) {
	if c.lose {
		c.lose = false
		_, _ = c.Conn.Read(p) // the reply: the command has run
		_ = c.Conn.Close()
		return 0, io.EOF
	}
	return c.Conn.Read(p)
}

// A freeze whose reply is lost, and which go-redis therefore sends again,
// is made once, and Freeze answers its id; an unfreeze whose reply is lost
// answers success, not "no such freeze" (DESIGN.md: no script may run
// twice because of a client retry).
func TestFreezeLostReplyMadeOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var l replyLoser
	c, err := lock.New(l.client(t, srv), lock.WithClientID("r1"))
	if err != nil {
		t.Fatal(err)
	}
	r := newReplica(t, c, "r1")
	r.add(t, scheduler.Job{Name: "report", Schedule: "@every 1h", Run: newJournal().fn(nil)})
	ctx := testkit.Context(t)
	if _, err := r.s.Freezes(ctx); err != nil { // loads the script: the EVALSHA below runs it
		t.Fatal(err)
	}
	l.arm("freezes:{freezes}", "\r\nadd\r\n")
	f, err := r.s.Freeze(ctx, "", time.Now().Add(time.Hour), "release")
	if err != nil {
		t.Fatalf("Freeze with its reply lost: %v", err)
	}
	if l.lostReplies() != 1 {
		t.Fatalf("%d replies lost, want 1: the test did not lose the add's", l.lostReplies())
	}
	fs, err := r.s.Freezes(ctx)
	if err != nil || len(fs) != 1 || fs[0].ID != f.ID || !fs[0].Created.Equal(f.Created) {
		t.Fatalf("Freezes after a retried add = %+v, %v; want the one freeze %+v", fs, err, f)
	}
	l.arm("freezes:{freezes}", "\r\ndel\r\n")
	if err := r.s.Unfreeze(ctx, f.ID); err != nil {
		t.Errorf("Unfreeze with its reply lost: %v, want success", err)
	}
	if l.lostReplies() != 2 {
		t.Fatalf("%d replies lost, want 2: the test did not lose the del's", l.lostReplies())
	}
	if fs, err := r.s.Freezes(ctx); err != nil || len(fs) != 0 {
		t.Errorf("Freezes after the unfreeze = %+v, %v; want none", fs, err)
	}
	if err := r.s.Unfreeze(ctx, f.ID); !errors.Is(err, scheduler.ErrUnknownFreeze) {
		t.Errorf("a second Unfreeze = %v, want ErrUnknownFreeze", err)
	}
}
