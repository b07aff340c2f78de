package daemon

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/redis/go-redis/v9"
)

// redisLogger sends go-redis's own log lines (a pool that cannot dial, a
// Pub/Sub connection discarded) through hclog, at WARN, so that they take
// the daemon's format: with log.json, every line stays JSON. Secrets are
// removed from them first.
type redisLogger struct {
	log    hclog.Logger
	redact func(string) string
}

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.Warn(l.redact(msg))
}

// logRedisTo makes go-redis log through log. go-redis has one logger per
// process (redis.SetLogger), so the last daemon or command started in a
// process wins.
func logRedisTo(log hclog.Logger, redact func(string) string) {
	redis.SetLogger(redisLogger{log: log.Named("redis"), redact: redact})
}
