package daemon

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// waitCh waits for a receive on ch, or fails the test after within.
func waitCh(t *testing.T, ch <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(within):
		t.Fatalf("%s: not within %v", what, within)
	}
}

func TestWatchFileReloadsOnChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lockcron.hcl")
	writeFile(t, path, "# v1\n")
	reloads := make(chan struct{}, 16)
	var mu sync.Mutex
	n := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	logs := &syncBuf{}
	log := hclog.New(&hclog.LoggerOptions{JSONFormat: true, Output: logs})
	// A long quiet time, so that a burst stays one burst on a loaded
	// machine.
	const debounce = time.Second
	go func() {
		defer close(done)
		watchFile(ctx, path, debounce, log, func() {
			mu.Lock()
			n++
			mu.Unlock()
			reloads <- struct{}{}
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}

	// The watch is set up asynchronously: write until it is seen. A burst
	// of writes makes one reload.
	deadline := time.Now().Add(10 * time.Second)
	for seen := false; !seen; {
		for i := range 5 {
			writeFile(t, path, "# v2 "+string(rune('a'+i))+"\n")
		}
		select {
		case <-reloads:
			seen = true
		case <-time.After(2 * debounce):
			if time.Now().After(deadline) {
				t.Fatal("no reload after writes to the file")
			}
		}
	}
	if c := count(); c != 1 {
		t.Errorf("%d reloads after a burst of writes, want 1", c)
	}

	// A file replaced by a rename, as editors and `mv` do.
	tmp := filepath.Join(dir, "new.hcl")
	writeFile(t, tmp, "# v3\n")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitCh(t, reloads, 10*time.Second, "a reload after a rename over the file")

	// Removed, then back: the watch breaks, is set up again, and reloads.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	writeFile(t, tmp, "# v4\n")
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	waitCh(t, reloads, 10*time.Second, "a reload after the file came back")
	if len(logs.lines("config watch broken: setting it up again")) == 0 {
		t.Errorf("the broken watch was not logged:\n%s", logs.String())
	}
}

func TestSIGHUPAsksForAReload(t *testing.T) {
	ctx, force, reload, stop := signals(context.Background())
	defer stop()
	for range 2 {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		waitCh(t, reload, 5*time.Second, "a reload request after SIGHUP")
	}
	select {
	case <-ctx.Done():
		t.Errorf("SIGHUP stopped the daemon")
	case <-force:
		t.Errorf("SIGHUP forced a stop")
	default:
	}
}
