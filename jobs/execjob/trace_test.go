package execjob

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/internal/runtest"
)

// An exec job gets TRACEPARENT and TRACESTATE; without a span, not the
// daemon's own.
func TestExecTraceContext(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "env")
	e := &Exec{Command: []string{"sh", "-c", `echo "$TRACEPARENT|$TRACESTATE" > "$OUT"`}, Env: map[string]string{"OUT": out}}
	ctx, parent := runtest.Span(t)
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(b)); got != parent+"|vendor=abc" {
		t.Errorf("TRACEPARENT|TRACESTATE = %q, want %q", got, parent+"|vendor=abc")
	}

	t.Setenv("TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if err := e.Run(jobs.WithInfo(context.Background(), runtest.Info)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(out); strings.TrimSpace(string(b)) != "|" {
		t.Errorf("without a span the job got %q, want no trace context", b)
	}
}
