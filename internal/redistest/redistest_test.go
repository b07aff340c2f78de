package redistest_test

import (
	"context"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
)

func TestServerFaults(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client()
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := srv.Do("GET", "k"); got != "v" {
		t.Fatalf("GET k = %v", got)
	}

	srv.Pause()
	pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.Ping(pctx).Err()
	cancel()
	if err == nil {
		t.Fatal("PING answered by a paused server")
	}
	srv.Resume()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}

	addr := srv.Addr()
	srv.Restart()
	if srv.Addr() != addr {
		t.Fatalf("Restart moved the server from %s to %s", addr, srv.Addr())
	}
	if n := srv.Do("EXISTS", "k").(int64); n != 0 {
		t.Fatal("the restarted server kept its data")
	}

	srv.Kill()
	kctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := c.Ping(kctx).Err(); err == nil {
		t.Fatal("PING answered by a killed server")
	}
}

func TestMissingBinaryHint(t *testing.T) {
	t.Setenv("REDIS_SERVER", "")
	t.Setenv("PATH", t.TempDir())
	if _, err := redistest.Binary(); err == nil || err.Error() != redistest.InstallHint {
		t.Fatalf("Binary() with no redis-server: %v, want the install hint", err)
	}
}
