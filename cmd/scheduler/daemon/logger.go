package daemon

import (
	"io"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// newLogger is the root logger the config asks for. Its durations are Go
// duration strings ("1.5s", "250ms") in both formats: hclog's JSON would
// give a time.Duration as an integer of nanoseconds.
func newLogger(cfg *config.Config, w io.Writer) hclog.Logger {
	return durations{hclog.New(&hclog.LoggerOptions{
		Name:          "lockcron",
		Level:         cfg.Log.HCLogLevel(),
		JSONFormat:    cfg.Log.JSON,
		Output:        w,
		SubloggerHook: func(sub hclog.Logger) hclog.Logger { return durations{sub} },
	})}
}

// durations is a logger that writes each time.Duration among its
// arguments as its String. Its sub-loggers (Named, With) are durations
// too, through the root's SubloggerHook.
type durations struct{ hclog.Logger }

func (l durations) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, msg, durationStrings(args)...)
}
func (l durations) Trace(msg string, args ...any) { l.Logger.Trace(msg, durationStrings(args)...) }
func (l durations) Debug(msg string, args ...any) { l.Logger.Debug(msg, durationStrings(args)...) }
func (l durations) Info(msg string, args ...any)  { l.Logger.Info(msg, durationStrings(args)...) }
func (l durations) Warn(msg string, args ...any)  { l.Logger.Warn(msg, durationStrings(args)...) }
func (l durations) Error(msg string, args ...any) { l.Logger.Error(msg, durationStrings(args)...) }
func (l durations) With(args ...any) hclog.Logger { return l.Logger.With(durationStrings(args)...) }

// durationStrings returns args with each time.Duration value replaced by
// its String; args itself is left alone.
func durationStrings(args []any) []any {
	var out []any
	for i, a := range args {
		d, ok := a.(time.Duration)
		if !ok || i%2 == 0 {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = d.String()
	}
	if out == nil {
		return args
	}
	return out
}
