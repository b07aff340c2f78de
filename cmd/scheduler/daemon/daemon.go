package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
	"github.com/lockcron/lockcron/fleet"
	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/execjob"
	"github.com/lockcron/lockcron/lock"
	"github.com/lockcron/lockcron/scheduler"
)

// closeTimeout bounds the flush of telemetry and the admin listener's
// shutdown after the scheduler has stopped.
const closeTimeout = 5 * time.Second

// Options are what a program that embeds the daemon may set.
type Options struct {
	// Registry holds the Go funcs that func jobs name. Default
	// jobs.DefaultRegistry.
	Registry *jobs.Registry
	// Environ is the environment that overrides the config file. Default
	// os.Environ().
	Environ []string
	// Stdout and Stderr are where command output and logs go. Default the
	// process's.
	Stdout, Stderr io.Writer
	// Force, when it fires, stops the daemon at once (a second signal),
	// without waiting for running jobs any longer.
	Force <-chan struct{}
	// Reload, each time it receives, makes the daemon read its config
	// file again and apply its jobs, as SIGHUP does for `scheduler run`.
	// Default none.
	Reload <-chan struct{}
	// SchedulerOptions are added after those the config gives, for
	// example scheduler.WithClock in a program that tests clock skew.
	// Default none.
	SchedulerOptions []scheduler.Option
}

func (o *Options) defaults() {
	if o.Registry == nil {
		o.Registry = jobs.DefaultRegistry
	}
	if o.Environ == nil {
		o.Environ = os.Environ()
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
}

// load reads the config file with o's registry and environment; path ""
// is the default ($LOCKCRON_CONFIG, else lockcron.hcl). A file that is
// not there gets an error that says how to name another.
func load(path string, o Options, more ...config.LoadOption) (*config.Config, error) {
	if path == "" {
		path = defaultConfigPath(o.Environ)
	}
	cfg, err := config.Load(path, append([]config.LoadOption{config.WithRegistry(o.Registry), config.WithEnviron(o.Environ)}, more...)...)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no config file %s: give one with -config FILE, or set LOCKCRON_CONFIG (the default is lockcron.hcl in the working directory; config.example.hcl shows every setting)", path)
	}
	return cfg, err
}

// pageURL is the URL of the status page on the admin listener at addr; a
// listener on every interface (0.0.0.0, [::]) is reached on localhost.
func pageURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// newLocks opens the lock client the config asks for: Redis, or the
// in-memory backend when there is no Redis. The dialLog (nil without
// Redis) records the Redis client's failed dials.
func newLocks(cfg *config.Config, log hclog.Logger, opts ...lock.Option) (*lock.Client, *dialLog, func(), error) {
	opts = append(cfg.LockOptions(), opts...)
	if !cfg.UsesRedis() {
		c, err := lock.NewMemory(opts...)
		return c, nil, func() {}, err
	}
	rdb, err := cfg.RedisClient()
	if err != nil {
		return nil, nil, nil, err
	}
	dials := newDialLog(rdb)
	c, err := lock.New(rdb, opts...)
	if err != nil {
		_ = rdb.Close()
		return nil, nil, nil, err
	}
	return c, dials, func() { _ = rdb.Close() }, nil
}

// newScheduler builds a Scheduler with every job of the config, on locks.
// It does not run it.
func newScheduler(cfg *config.Config, locks *lock.Client, reg *jobs.Registry, log hclog.Logger, opts ...scheduler.Option) (*scheduler.Scheduler, error) {
	s, err := scheduler.New(locks, append(append(cfg.SchedulerOptions(), scheduler.WithLogger(log)), opts...)...)
	if err != nil {
		return nil, err
	}
	js, err := cfg.SchedulerJobs(reg, log.Named("job"))
	if err != nil {
		return nil, err
	}
	for _, j := range js {
		if err := s.Add(j); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Run runs the daemon with the config file at path until ctx ends, then
// stops it gracefully (within the config's shutdown_timeout; o.Force stops
// it at once). It returns nil after a clean stop, and an error if the
// config is invalid (a config.Errors), if the admin listener cannot listen,
// if Redis does not answer within redis.connect_timeout, or if the stop was
// cut short.
//
// It starts the admin listener first, then waits for Redis (see connect):
// meanwhile /healthz answers, /readyz and the API answer 503 "connecting
// to redis", and ctx ending stops the wait at once with a clean stop (nil).
// Once Redis answers, the scheduler starts.
//
// With no redis block and no REDIS_URL, it runs on the in-memory lock
// backend, with no wait, and logs once that locks are local to this
// process.
//
// From the start of the admin listener to the start of the stop, it
// reloads the config file (see reloader.reload) on each receive from
// o.Reload, on POST /api/reload, and, with watch = true, when the file
// changes; one reload at a time. A file that is not valid is logged and
// changes nothing: the daemon never stops on a reload.
func Run(ctx context.Context, path string, o Options) error {
	o.defaults()
	cfg, err := load(path, o)
	if err != nil {
		return err
	}
	loadedAt := time.Now()
	log := newLogger(cfg, o.Stderr)
	logRedisTo(log, cfg.Redact)
	for _, w := range cfg.Warnings {
		log.Warn("config warning", "warning", w)
	}
	tel, err := newTelemetry(ctx, cfg.Telemetry, cfg.ReplicaID, o.Stdout)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := tel.close(cctx); err != nil {
			log.Warn("telemetry not flushed", "error", err)
		}
	}()

	locks, dials, closeRedis, err := newLocks(cfg, log, lock.WithLogger(log), lock.WithTracerProvider(tel.tracer), lock.WithMeterProvider(tel.meter))
	if err != nil {
		return err
	}
	defer closeRedis()
	defer locks.Close()
	aud, closeAudit, err := openAudit(cfg)
	if err != nil {
		return err
	}
	defer closeAudit()
	if cfg.UsesRedis() {
		log.Info("locks in redis", "redis", cfg.Redis.Describe(), "replica", cfg.ReplicaID)
	} else {
		log.Warn("no redis configured: running on the in-memory lock backend; locks are local to this process, so run one replica only")
	}

	// Built before the wait for Redis, so that a job the scheduler refuses
	// is reported at once; it does no I/O until it runs.
	sopts := append([]scheduler.Option{scheduler.WithTracerProvider(tel.tracer), scheduler.WithMeterProvider(tel.meter)}, o.SchedulerOptions...)
	// The webhooks hear each run the scheduler records, and each run of
	// this replica going on past its alert_after; they are sent until the
	// scheduler has stopped, then drained (within closeTimeout).
	notify := func(scheduler.Run) {}
	if n := newNotifier(cfg, log.Named("notify")); n != nil {
		notify = n.onRun
		sopts = append(sopts, scheduler.WithOnRunningLong(n.onRun))
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
			defer cancel()
			n.close(cctx)
		}()
	}
	// A job that paused itself (pause_after_failures) is in the audit
	// trail, appended by the replica whose finish paused it: once, on a
	// goroutine of its own (WithOnRun must not block), drained once the
	// scheduler has stopped (within closeTimeout).
	ap := startAutoPauses(aud, log.Named("admin").Warn)
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		ap.stop(cctx)
	}()
	sopts = append(sopts, scheduler.WithOnRun(func(r scheduler.Run) {
		if r.Outcome == scheduler.OutcomeAutoPaused {
			ap.add(r)
		}
		notify(r)
	}))
	s, err := newScheduler(cfg, locks, o.Registry, log, sopts...)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Admin.Listen)
	if err != nil {
		_ = s.Close()
		return fmt.Errorf("admin: listen on %q: %w", cfg.Admin.Listen, err)
	}
	// Reloads go on until the stop begins: stopReloads ends those under
	// way and refuses later ones, before the scheduler stops.
	rl := newReloader(cfg, s, o, log, loadedAt)
	bg := startReloads(rl, o.Reload, cfg.Watch, log)
	stopReloads := func() {
		bg.stop()
		rl.close()
	}
	defer stopReloads()
	a := &admin{s: s, locks: locks, access: newAccess(cfg.Admin), metrics: tel.metrics, log: log.Named("admin"), reload: rl, audit: aud}
	srv := &http.Server{Handler: a.handler(), ReadHeaderTimeout: 10 * time.Second}
	// serveErr is set before serveDone closes.
	serveDone := make(chan struct{})
	var serveErr error
	go func() {
		serveErr = srv.Serve(ln)
		close(serveDone)
	}()
	log.Info("admin listening", "addr", ln.Addr().String(), "status_page", pageURL(ln.Addr()))
	closeAdmin := func(stopErr error) error {
		sctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil && stopErr == nil {
			stopErr = fmt.Errorf("admin: %w", err)
		}
		<-serveDone
		log.Info("stopped")
		return stopErr
	}

	if cfg.UsesRedis() {
		if err := connect(ctx, serveDone, locks, dials, cfg.Redis, log); err != nil {
			stopReloads()
			_ = s.Close()
			if errors.Is(err, errStopped) {
				select {
				case <-serveDone:
					err = fmt.Errorf("admin: %w", serveErr)
				default:
					log.Info("stop requested while connecting to redis")
					err = nil
				}
			}
			return closeAdmin(err)
		}
	}
	a.connected.Store(true)

	// This replica reports itself to the fleet until its scheduler has
	// stopped, then reports itself stopped (replicas.go).
	rp := &reporter{store: fleet.New(locks), id: cfg.ReplicaID, s: s, reload: rl, log: log.Named("replicas")}
	stopReports := rp.start()

	// The scheduler runs until this function stops it: Shutdown's error
	// tells whether the graceful stop was cut short.
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background()) }()

	var stopErr error
	forceStop := func() {
		stopReloads()
		// Kill the exec jobs first: Close hands their ticks off, and a
		// survivor must not start one while the old process still runs.
		if n := execjob.KillRunning(); n > 0 {
			log.Warn("exec jobs killed", "process_groups", n)
		}
		_ = s.Close()
	}
	select {
	case <-ran:
	case <-ctx.Done():
		log.Info("stop requested: graceful stop", "timeout", cfg.ShutdownTimeout)
		stopReloads()
		sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
		shut := make(chan error, 1)
		go func() { shut <- s.Shutdown(sctx) }()
		select {
		case err := <-shut:
			if err != nil {
				stopErr = fmt.Errorf("graceful stop cut short after %v: %w", cfg.ShutdownTimeout, err)
			}
		case <-o.Force:
			log.Warn("second stop request: stopping at once")
			forceStop()
			<-shut
			stopErr = errors.New("stopped at once by a second signal: running jobs were killed")
		}
		cancel()
		<-ran
	case <-serveDone:
		stopErr = fmt.Errorf("admin: %w", serveErr)
		forceStop()
		<-ran
	}
	stopReports()
	return closeAdmin(stopErr)
}
