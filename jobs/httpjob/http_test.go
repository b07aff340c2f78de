package httpjob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/internal/runtest"
)

// received is what a test server saw of a request.
type received struct {
	method, host, body string
	header             http.Header
	contentLength      int64
}

// recordingServer answers every request with status and body, and sends
// what it received on the returned channel (buffered, one request).
func recordingServer(t *testing.T, status int, body string) (*httptest.Server, <-chan received) {
	t.Helper()
	ch := make(chan received, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case ch <- received{method: r.Method, host: r.Host, body: string(b), header: r.Header.Clone(), contentLength: r.ContentLength}:
		default:
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func TestHTTPRequest(t *testing.T) {
	t.Parallel()
	srv, got := recordingServer(t, http.StatusNoContent, "")
	h := &HTTP{
		URL:    srv.URL + "/hooks/backup?dry_run=1",
		Method: "post",
		Headers: map[string]string{
			"content-type":  "application/json",
			"X-Api-Key":     "k1",
			"Authorization": "Bearer t0ken",
			"Host":          "jobs.example.test",
		},
		Body:   `{"full":true}`,
		Client: srv.Client(),
	}
	manual := runtest.Info
	manual.Trigger = 12
	manual.Params = map[string]string{"customer": "42", "report_date": "2026-11-27"}
	if err := h.Run(jobs.WithInfo(t.Context(), manual)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := <-got
	if r.method != "POST" || r.body != `{"full":true}` || r.contentLength != int64(len(h.Body)) || r.host != "jobs.example.test" {
		t.Errorf("server saw %s %q (length %d), Host %q; want POST, the body, Host jobs.example.test", r.method, r.body, r.contentLength, r.host)
	}
	for k, want := range map[string]string{
		"Lockcron-Job":               "backup",
		"Lockcron-Tick":              runtest.Tick,
		"Lockcron-Token":             "1740798300000042",
		"Lockcron-Replica":           "replica-1",
		"Lockcron-Attempt":           "2",
		"Lockcron-Trigger":           "12",
		"Lockcron-Param-Customer":    "42",
		"Lockcron-Param-Report-Date": "2026-11-27",
		"Content-Type":               "application/json",
		"X-Api-Key":                  "k1",
		"Authorization":              "Bearer t0ken",
	} {
		if got := r.header.Values(k); len(got) != 1 || got[0] != want {
			t.Errorf("header %s = %q, want [%q]", k, got, want)
		}
	}
}

func TestHTTPDefaults(t *testing.T) {
	t.Parallel()
	srv, got := recordingServer(t, http.StatusOK, "fine")
	h := &HTTP{URL: srv.URL} // GET, DefaultClient, any 2xx
	if err := h.Run(t.Context()); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := <-got
	if r.method != "GET" || r.body != "" || r.contentLength != 0 {
		t.Errorf("server saw %s with body %q, want GET without one", r.method, r.body)
	}
	if v := r.header.Get("Lockcron-Tick"); v != "0001-01-01T00:00:00Z" {
		t.Errorf("Lockcron-Tick = %q without Info, want the zero time", v)
	}
	if v, ok := r.header["Lockcron-Trigger"]; !ok || len(v) != 1 || v[0] != "" {
		t.Errorf("Lockcron-Trigger = %q for a scheduled run, want one empty value", v)
	}
	if v := r.header.Get("Content-Type"); v != "" {
		t.Errorf("Content-Type = %q, want none", v)
	}
	if v, ok := r.header["Lockcron-Backfill"]; ok {
		t.Errorf("Lockcron-Backfill = %q on a run not of a backfill, want none", v)
	}
}

func TestHTTPBackfillHeader(t *testing.T) {
	t.Parallel()
	srv, got := recordingServer(t, http.StatusOK, "")
	h := &HTTP{URL: srv.URL, Client: srv.Client()}
	info := runtest.Info
	info.Backfill = true
	if err := h.Run(jobs.WithInfo(t.Context(), info)); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r := <-got
	if v := r.header.Values(jobs.HeaderBackfill); len(v) != 1 || v[0] != "1" {
		t.Errorf("%s = %q on a backfill's run, want [\"1\"]", jobs.HeaderBackfill, v)
	}
	if v := r.header.Get(jobs.HeaderTick); v != runtest.Tick {
		t.Errorf("Lockcron-Tick = %q, want the backfilled tick %q", v, runtest.Tick)
	}
}

func TestHTTPStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		expect []int
		ok     bool
	}{
		{name: "200", status: 200, ok: true},
		{name: "204", status: 204, ok: true},
		{name: "299", status: 299, ok: true},
		{name: "302 without Location", status: 302},
		{name: "404", status: 404},
		{name: "500", status: 500},
		{name: "202 not expected", status: 202, expect: []int{200}},
		{name: "418 expected", status: 418, expect: []int{418}, ok: true},
		{name: "503 expected", status: 503, expect: []int{200, 503}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := recordingServer(t, tt.status, "status body")
			h := &HTTP{URL: srv.URL + "/x", Method: http.MethodPut, ExpectStatus: tt.expect}
			err := h.Run(t.Context())
			if tt.ok {
				if err != nil {
					t.Errorf("Run = %v, want nil", err)
				}
				return
			}
			var se *StatusError
			if !errors.As(err, &se) {
				t.Fatalf("Run = %v, want a *StatusError", err)
			}
			if se.Code != tt.status || se.Body != "status body" || se.Method != "PUT" || se.URL != srv.URL+"/x" {
				t.Errorf("StatusError = %+v", se)
			}
			for _, s := range []string{"PUT", srv.URL + "/x", fmt.Sprintf("status %d", tt.status), `"status body"`} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %s", err, s)
				}
			}
		})
	}
}

func TestHTTPStatusErrorBody(t *testing.T) {
	t.Parallel()
	body := "  \x1b[31mdatabase\tis\r\ndown\x00 " + strings.Repeat("é", 1000) + "\xff"
	srv, _ := recordingServer(t, http.StatusServiceUnavailable, body)
	err := (&HTTP{URL: srv.URL}).Run(t.Context())
	var se *StatusError
	if !errors.As(err, &se) {
		t.Fatalf("Run = %v, want a *StatusError", err)
	}
	if !strings.HasPrefix(se.Body, "[31mdatabase is down éé") || !strings.HasSuffix(se.Body, "é…") {
		t.Errorf("Body = %q, want the start of the body, cleaned, cut with …", se.Body)
	}
	if n := len(strings.TrimSuffix(se.Body, "…")); n > 512 {
		t.Errorf("Body has %d bytes, want at most 512", n)
	}
	if strings.ContainsFunc(se.Body, unicode.IsControl) {
		t.Errorf("Body %q has control characters", se.Body)
	}
	if !strings.Contains(err.Error(), "status 503 Service Unavailable") {
		t.Errorf("error %q does not give the status", err)
	}
}

func TestHTTPCancel(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(started) })
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for the handler

	cause := errors.New("lease lost")
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- (&HTTP{URL: srv.URL}).Run(ctx) }()
	select {
	case <-started:
	case <-time.After(runtest.Safety):
		t.Fatal("the request did not arrive")
	}
	start := time.Now()
	cancel(cause)
	select {
	case err := <-done:
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Run returned %v after cancel", d)
		}
		if !errors.Is(err, context.Canceled) || !errors.Is(err, cause) {
			t.Errorf("Run = %v, want it to wrap context.Canceled and the cause", err)
		}
	case <-time.After(runtest.Safety):
		t.Fatal("Run did not return after cancel")
	}
}

func TestHTTPTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	err := jobs.Chain(&HTTP{URL: srv.URL}, jobs.Timeout(100*time.Millisecond)).Run(t.Context())
	if !errors.Is(err, jobs.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run = %v, want ErrTimeout", err)
	}
}

func TestHTTPSecretsNotShown(t *testing.T) {
	t.Parallel()
	secrets := []string{"alice", "s3cret", "t0psecret", "Bearer", "frag"}
	check := func(t *testing.T, err error, wantHost string) {
		t.Helper()
		if err == nil {
			t.Fatal("Run = nil, want an error")
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error %q shows %q", err, s)
			}
		}
		for _, s := range []string{wantHost, "token=xxxxx", "/path"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("error %q does not contain %s", err, s)
			}
		}
	}

	t.Run("status", func(t *testing.T) {
		t.Parallel()
		basic := make(chan bool, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _, ok := r.BasicAuth()
			basic <- ok
			http.Error(w, "nope", http.StatusUnauthorized)
		}))
		defer srv.Close()
		u, _ := url.Parse(srv.URL)
		h := &HTTP{
			URL:     "http://alice:s3cret@" + u.Host + "/path?token=t0psecret#frag",
			Headers: map[string]string{"Authorization": "Bearer b3arer"},
		}
		err := h.Run(t.Context())
		check(t, err, u.Host)
		if <-basic {
			// Authorization in Headers wins over the URL's userinfo.
			t.Error("server saw basic auth, want the Bearer header")
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		const host = "127.0.0.1:1" // a privileged port nothing listens on
		h := &HTTP{URL: "http://alice:s3cret@" + host + "/path?token=t0psecret#frag"}
		check(t, h.Run(t.Context()), host)
	})
	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		err := (&HTTP{URL: "http://alice:s3cret@host:80x/path?token=t0psecret"}).Validate()
		if !errors.Is(err, jobs.ErrInvalid) {
			t.Fatalf("Validate = %v, want ErrInvalid", err)
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("error %q shows %q", err, s)
			}
		}
	})
}

func TestHTTPValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		h     *HTTP
		field string // "": valid
	}{
		{name: "ok", h: &HTTP{URL: "https://example.com/hook"}},
		{name: "ok full", h: &HTTP{URL: "http://user:pw@example.com:8080/x?y=z", Method: "purge", Headers: map[string]string{"X-A": "b\tc", "Host": "h"}, Body: "b", ExpectStatus: []int{100, 599}}},
		{name: "nil", h: nil, field: "nil HTTP"},
		{name: "empty URL", h: &HTTP{}, field: "URL"},
		{name: "bad scheme", h: &HTTP{URL: "ftp://example.com/x"}, field: "URL"},
		{name: "relative", h: &HTTP{URL: "/hook"}, field: "URL"},
		{name: "no host", h: &HTTP{URL: "http:///hook"}, field: "URL"},
		{name: "unparsable", h: &HTTP{URL: "http://exa mple.com/"}, field: "URL"},
		{name: "bad method", h: &HTTP{URL: "http://h/", Method: "GE T"}, field: "Method"},
		{name: "bad header name", h: &HTTP{URL: "http://h/", Headers: map[string]string{"X A": "b"}}, field: `Headers["X A"]`},
		{name: "reserved header", h: &HTTP{URL: "http://h/", Headers: map[string]string{"lockcron-token": "1"}}, field: `Headers["lockcron-token"]`},
		{name: "CRLF in header", h: &HTTP{URL: "http://h/", Headers: map[string]string{"X-A": "b\r\nX-B: c"}}, field: `Headers["X-A"]`},
		{name: "status 99", h: &HTTP{URL: "http://h/", ExpectStatus: []int{200, 99}}, field: "ExpectStatus[1]"},
		{name: "status 600", h: &HTTP{URL: "http://h/", ExpectStatus: []int{600}}, field: "ExpectStatus[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.h.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, jobs.ErrInvalid) {
				t.Fatalf("Validate = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("error %q does not name %s", err, tt.field)
			}
			if runErr := tt.h.Run(t.Context()); !errors.Is(runErr, jobs.ErrInvalid) {
				t.Errorf("Run = %v, want ErrInvalid", runErr)
			}
		})
	}
}
