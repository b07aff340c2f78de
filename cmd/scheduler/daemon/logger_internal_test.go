package daemon

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/lockcron/lockcron/cmd/scheduler/config"
)

// The daemon's JSON logs give durations as Go duration strings, on the
// root logger, its named sub-loggers and their implied arguments.
func TestLogDurationsAsStrings(t *testing.T) {
	var buf bytes.Buffer
	cfg := &config.Config{Log: config.Log{Level: "info", JSON: true}}
	log := newLogger(cfg, &buf)
	log.Named("scheduler").With("lease", 30*time.Second).Info("run finished", "duration", 1500*time.Millisecond, "attempt", 1)
	log.Warn("retrying", "retry_in", 200*time.Millisecond)
	dec := json.NewDecoder(&buf)
	for _, want := range []map[string]any{
		{"lease": "30s", "duration": "1.5s", "attempt": float64(1), "@module": "lockcron.scheduler"},
		{"retry_in": "200ms"},
	} {
		var line map[string]any
		if err := dec.Decode(&line); err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if line[k] != v {
				t.Errorf("%s = %#v, want %#v: %v", k, line[k], v, line)
			}
		}
	}
}
