package lock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/lockcron/lockcron/internal/locktest"
	"github.com/lockcron/lockcron/internal/redistest"
	"github.com/lockcron/lockcron/internal/testkit"
	"github.com/lockcron/lockcron/lock"
)

// loseReply is a go-redis hook that runs a script and then reports its
// reply lost, once, for the script whose SHA is armed.
type loseReply struct {
	mu    sync.Mutex
	armed string         // the SHA of the script whose next reply is lost
	calls map[string]int // EVALSHA calls by SHA
}

func (h *loseReply) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseReply) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *loseReply) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if len(args) < 2 || cmd.Name() != "evalsha" {
			return err
		}
		sha, _ := args[1].(string)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.calls[sha]++
		if err == nil && sha == h.armed {
			h.armed = ""
			cmd.SetErr(io.ErrUnexpectedEOF)
			return io.ErrUnexpectedEOF
		}
		return err
	}
}

func scriptSHA(t *testing.T, files ...string) string {
	t.Helper()
	sum := sha1.Sum([]byte(locktest.ScriptSource(t, files...)))
	return hex.EncodeToString(sum[:])
}

// A waiter's attempt takes the lock but its reply is lost: the waiter's next
// attempt (same owner) finds the lock its own and gets the lease with its
// time started again; nothing releases the lock behind the lease's back,
// and no one else gets it meanwhile.
func TestLostReplyDuringWait(t *testing.T) {
	srv := redistest.Start(t)
	ctx := testkit.Context(t)
	const leaseTime = time.Second
	holder := locktest.NewClient(t, srv)
	hook := &loseReply{calls: map[string]int{}}
	rdb := srv.Client()
	rdb.AddHook(hook)
	waiterC, err := lock.New(rdb, lock.WithLeaseTime(leaseTime))
	if err != nil {
		t.Fatal(err)
	}
	defer waiterC.Close()
	acquireSHA, releaseSHA := scriptSHA(t, "lib.lua", "acquire.lua"), scriptSHA(t, "release.lua")

	held, err := holder.Mutex("lost").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *lock.Lease, 1)
	go func() {
		l, err := waiterC.Mutex("lost").Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	locktest.WaitQueued(t, waiterC, "lost", 1)
	hook.mu.Lock()
	hook.armed = acquireSHA
	hook.mu.Unlock()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var l *lock.Lease
	select {
	case l = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not acquire after its lost reply")
	}
	if l == nil {
		t.FailNow()
	}
	hook.mu.Lock()
	armed, releases := hook.armed, hook.calls[releaseSHA]
	hook.mu.Unlock()
	if armed != "" {
		t.Fatal("no reply was lost: the test did not exercise the retry")
	}
	if releases != 0 {
		t.Fatalf("%d releases sent by the waiter's Client while it waited: a clean-up raced its own retry", releases)
	}
	if pttl := srv.Do("PTTL", "lockcron:{lost}").(int64); time.Duration(pttl)*time.Millisecond < leaseTime*8/10 {
		t.Fatalf("the lease taken over by the retry has %dms left in Redis; its time was not started again", pttl)
	}
	other := locktest.NewClient(t, srv)
	for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if x, err := other.Mutex("lost").TryLock(ctx); err == nil {
			_ = x.Unlock(ctx)
			t.Fatal("a second owner got the lock while the retried lease held it")
		} else if !errors.Is(err, lock.ErrLocked) {
			t.Fatal(err)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("the lease ended: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
