// Command lockdemo shows the lock at work on the in-memory backend: three
// replicas (Clients on one store) take turns at a reentrant lock, each run
// with its fencing token, until Ctrl-C or SIGTERM; then every lease is
// released and the program exits. `make run` starts it.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/lock"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lockdemo:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := hclog.New(&hclog.LoggerOptions{Name: "lockdemo", Level: hclog.Info})
	log.Info("locks are local to this process: in-memory backend")

	store := lock.NewMemoryStore()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("replica-%d", i)
		c, err := store.NewClient(lock.WithClientID(id), lock.WithLogger(log))
		if err != nil {
			return err
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			errc <- replica(ctx, log.Named(id), c.Mutex("nightly-report"))
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			return err
		}
	}
	log.Info("stopped")
	return nil
}

// replica takes the lock, works under it for a while, releases it, rests,
// and goes again, until ctx ends. (Between Clients there is no queue: a
// replica that locked again at once would often win again.)
func replica(ctx context.Context, log hclog.Logger, mu lock.Locker) error {
	for {
		lease, err := mu.Lock(ctx)
		if errors.Is(err, context.Canceled) {
			return nil
		}
		if err != nil {
			return err
		}
		log.Info("running under the lock", "token", lease.Token())
		select {
		case <-time.After(700 * time.Millisecond): // the work
		case <-lease.Context().Done():
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		err = lease.Unlock(uctx)
		cancel()
		if err != nil {
			return err
		}
		select {
		case <-time.After(300 * time.Millisecond): // other work
		case <-ctx.Done():
			return nil
		}
	}
}
