package daemon

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/knadh/koanf/providers/file"
)

// The file watch (watch = true).
const (
	// watchDebounce is how long the file must stay quiet after a change
	// before it is reloaded: an editor's save, or a write in several
	// pieces, is a burst of events that makes one reload.
	watchDebounce = 250 * time.Millisecond
	// watchRetry is the wait between attempts to watch the file again
	// after the watch broke (the file was removed, say).
	watchRetry = time.Second
)

// reloads runs the daemon's reloads that no request waits for: those that
// Options.Reload asks for (SIGHUP), and, with watch = true, those of the
// file watch. It owns their goroutines: stop ends them and waits for them.
type reloads struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// startReloads starts serving requests (nil: none) and, if watch, the
// watch of r's file, each reload through r.
func startReloads(r *reloader, requests <-chan struct{}, watch bool, log hclog.Logger) *reloads {
	ctx, cancel := context.WithCancel(context.Background())
	l := &reloads{cancel: cancel}
	if requests != nil {
		l.wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case <-requests:
					_, _ = r.reload(ctx, triggerSignal) // logged
				}
			}
		})
	}
	if watch {
		l.wg.Go(func() {
			watchFile(ctx, r.path, watchDebounce, log, func() { _, _ = r.reload(ctx, triggerWatch) })
		})
	}
	return l
}

// stop ends the reloads, after the one under way, and waits for them. It
// may be called more than once.
func (l *reloads) stop() {
	l.once.Do(func() {
		l.cancel()
		l.wg.Wait()
	})
}

// watchFile calls reload once path has changed and stayed quiet for
// debounce, until ctx ends. The file is watched with koanf's file
// provider, which watches its directory, so that a file replaced by a
// rename or a swapped symlink (a Kubernetes ConfigMap) is seen too. If the
// watch breaks (the file was removed), it is set up again every
// watchRetry, and the file reloaded once it is back. It returns after
// stopping the watch.
func watchFile(ctx context.Context, path string, debounce time.Duration, log hclog.Logger, reload func()) {
	// The provider watches the file's directory, which a bare file name
	// does not name.
	watched := path
	if abs, err := filepath.Abs(path); err == nil {
		watched = abs
	}
	// koanf's goroutine calls back; it must never block, and may call
	// once more while the watch is being stopped.
	changed := make(chan struct{}, 1)
	broken := make(chan error, 1)
	callback := func(_ any, err error) {
		if err != nil {
			select {
			case broken <- err:
			default:
			}
			return
		}
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	quiet := time.NewTimer(debounce)
	quiet.Stop()
	defer quiet.Stop()
	var due <-chan time.Time // quiet.C while a reload is due
	failing := false         // the watch could not be set up: logged once
	first := true
	for {
		w := file.Provider(watched)
		if err := w.Watch(callback); err != nil {
			// A Watch that failed holds nothing to stop.
			if !failing {
				log.Warn("config watch not set up: retrying", "path", path, "retry_in", watchRetry, "error", err)
				failing = true
			}
			if !sleep(ctx, nil, watchRetry) {
				return
			}
			continue
		}
		switch {
		case first:
			log.Info("watching the config file: a change reloads it", "path", path)
			first = false
		case failing:
			// The file may have changed while it was not watched.
			log.Info("config watch set up again", "path", path)
			quiet.Reset(debounce)
			due = quiet.C
		}
		failing = false
	watching:
		for {
			select {
			case <-ctx.Done():
				_ = w.Unwatch()
				return
			case <-changed:
				quiet.Reset(debounce)
				due = quiet.C
			case <-due:
				due = nil
				reload()
			case err := <-broken:
				_ = w.Unwatch()
				log.Warn("config watch broken: setting it up again", "path", path, "error", err)
				failing = true
				break watching
			}
		}
	}
}
