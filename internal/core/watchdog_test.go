package core

import (
	"bufio"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lockcron/lockcron/internal/redistest"
)

// monitor records every command the server runs, in order, until stopped.
// stop sends a marker command and returns once the marker is read, so no
// command run before it is missed.
func monitor(t *testing.T, srv *redistest.Server) (stop func() []string) {
	addr := srv.Addr()
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "+OK") {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}
	var lines []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			line, err := r.ReadString('\n')
			if err != nil || strings.Contains(line, `"monitor-end"`) {
				return
			}
			lines = append(lines, line)
		}
	}()
	return func() []string {
		srv.Do("ECHO", "monitor-end")
		wg.Wait()
		_ = conn.Close()
		return lines
	}
}

var quoted = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

// The watchdog stops, and its last renewal completes, before the unlock is
// sent: the server never runs a renewal of a lease after its release.
func TestNoRenewalAfterUnlock(t *testing.T) {
	srv := redistest.Start(t)
	c, err := New(srv.Client(), WithLeaseTime(60*time.Millisecond)) // renew every 20ms
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Load the scripts first so that every call below is an EVALSHA.
	if l, err := c.Mutex("warm").Lock(ctx); err == nil {
		_ = l.Unlock(ctx)
	}
	_ = renewScript.Load(ctx, srv.Client()).Err()

	stop := monitor(t, srv)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mu := c.Mutex("wd" + string(rune('a'+g)))
			for range 25 {
				l, err := mu.Lock(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond) // a hold of 0-2.5 renewal periods
				// Under load a lease this short may be lost; its Unlock
				// still sends the release, which is what is checked here.
				if err := l.Unlock(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	lines := stop()

	released := map[string]bool{}
	renewals, releases := 0, 0
	for _, line := range lines {
		args := quoted.FindAllStringSubmatch(line, -1)
		if len(args) < 5 || (args[0][1] != "evalsha" && args[0][1] != "eval") {
			continue
		}
		sha := args[1][1]
		if args[0][1] == "eval" && strings.HasPrefix(sha, "-- renew.lua") {
			sha = renewScript.Hash() // renewals are sent whole
		}
		switch sha {
		case renewScript.Hash():
			owner := args[4][1]
			renewals++
			if released[owner] {
				t.Fatalf("renewal of %s ran after its release", owner)
			}
		case releaseScript.Hash():
			owner := args[5][1]
			releases++
			released[owner] = true
		}
	}
	if releases != 100 {
		t.Fatalf("saw %d releases, want 100", releases)
	}
	if renewals == 0 {
		t.Fatal("saw no renewals: the test proves nothing")
	}
	t.Logf("%d renewals, %d releases", renewals, releases)
}
