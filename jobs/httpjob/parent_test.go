package httpjob

import (
	"net/http"
	"testing"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/internal/runtest"
)

// A run that follows another carries it in Lockcron-Parent; one that
// follows none has no such header.
func TestHTTPParentHeader(t *testing.T) {
	t.Parallel()
	srv, got := recordingServer(t, http.StatusOK, "")
	h := &HTTP{URL: srv.URL, Client: srv.Client()}
	child := runtest.Info
	child.Parent = "extract@" + runtest.Tick
	if err := h.Run(jobs.WithInfo(t.Context(), child)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if v := (<-got).header.Values(jobs.HeaderParent); len(v) != 1 || v[0] != child.Parent {
		t.Errorf("Lockcron-Parent = %q, want [%q]", v, child.Parent)
	}
	if err := h.Run(jobs.WithInfo(t.Context(), runtest.Info)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if v, ok := (<-got).header[jobs.HeaderParent]; ok {
		t.Errorf("Lockcron-Parent = %q on a run that follows none", v)
	}
}
