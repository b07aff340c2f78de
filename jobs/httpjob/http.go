package httpjob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lockcron/lockcron/jobs"
	"github.com/lockcron/lockcron/jobs/internal/runerr"
)

const (
	bodySummaryBytes = 512      // bytes of a response body a StatusError keeps
	bodyDrainBytes   = 64 << 10 // read and dropped, so that the connection can be reused
)

// HTTP is the http job kind: a Runner that sends one request per run and
// succeeds if the response status is one it expects.
//
// Besides Headers, each request carries the run's Info in the headers
// Lockcron-Job, Lockcron-Tick (RFC 3339, UTC), Lockcron-Token,
// Lockcron-Replica, Lockcron-Attempt and Lockcron-Trigger (a manual run's
// number, empty for a scheduled run; from the zero Info if the run's ctx
// has none), and Lockcron-Parent (job@tick) on a run that follows another. The response body is not logged; the first 512 bytes of
// it go into a StatusError.
//
// Errors never show the URL's userinfo nor the values of its query (they
// appear as "xxxxx"), and nothing is logged, so Authorization headers and
// the like stay out of logs. Keep secrets out of the URL's path: it is
// shown as it is.
//
// HTTP is safe for concurrent use, as long as its fields are not changed
// while it runs (and Client is, as http.Client is).
type HTTP struct {
	// URL is an absolute http or https URL.
	URL string
	// Method is the request method, case-insensitive and sent in upper
	// case; empty means GET.
	Method string
	// Headers are added to the request. "Host" sets the Host header (the
	// request's Host). No Content-Type is set unless given here.
	Headers map[string]string
	// Body is the request body; empty means none.
	Body string
	// ExpectStatus lists the statuses that mean success; empty means any
	// 2xx. Redirects are followed (as Client does), and only the final
	// status counts.
	ExpectStatus []int
	// Client sends the request; nil means http.DefaultClient. Its Timeout,
	// if set, bounds each run besides ctx.
	Client *http.Client
}

// Validate reports what is wrong with h, if anything: a URL that does not
// parse, is not absolute http or https, or has no host; a Method that is
// not an HTTP token; a header name that is not a token or starts with
// Lockcron-, or a value with control characters; a status in ExpectStatus
// outside 100..599. Each problem is an error wrapping jobs.ErrInvalid that
// names the field; several are joined (errors.Join). Errors about URL never
// show its userinfo. It is safe for concurrent use.
func (h *HTTP) Validate() error {
	if h == nil {
		return fmt.Errorf("http: %w: nil HTTP", jobs.ErrInvalid)
	}
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("http %s: %w: %s", field, jobs.ErrInvalid, fmt.Sprintf(format, args...)))
	}
	if _, err := h.parseURL(); err != nil {
		bad("URL", "%v", err)
	}
	if h.Method != "" && !isToken(h.Method) {
		bad("Method", "%q is not a valid method", h.Method)
	}
	for _, k := range slices.Sorted(maps.Keys(h.Headers)) {
		switch {
		case !isToken(k):
			bad(fmt.Sprintf("Headers[%q]", k), "not a valid header name")
		case strings.HasPrefix(http.CanonicalHeaderKey(k), jobs.HeaderPrefix):
			bad(fmt.Sprintf("Headers[%q]", k), "names starting with %s are set from the run's info", jobs.HeaderPrefix)
		}
		if strings.ContainsFunc(h.Headers[k], func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			bad(fmt.Sprintf("Headers[%q]", k), "value has control characters")
		}
	}
	for i, code := range h.ExpectStatus {
		if code < 100 || code > 599 {
			bad(fmt.Sprintf("ExpectStatus[%d]", i), "%d is not in 100..599", code)
		}
	}
	return errors.Join(errs...)
}

// parseURL parses h.URL and checks it. Its errors do not quote the URL,
// which may hold a password.
func (h *HTTP) parseURL() (*url.URL, error) {
	if h.URL == "" {
		return nil, errors.New("empty")
	}
	u, err := url.Parse(h.URL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // ue.Error() quotes the whole URL
		}
		return nil, err
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("scheme %q is not http or https", u.Scheme)
	case u.Host == "":
		return nil, errors.New("no host")
	}
	return u, nil
}

// Run sends the request once, with ctx, and reads up to 64 KiB of the
// response body before closing it.
//
// It returns nil if the response status is one of ExpectStatus (any 2xx
// if that is empty). Otherwise:
//   - Validate's error (jobs.ErrInvalid) if h is not valid;
//   - a *StatusError for any other status;
//   - if the request failed, an error naming the method and the URL that
//     wraps the transport's error (a *url.Error is replaced by the error
//     it wraps, since it would show the URL's query).
//
// When ctx ends, the request is aborted, and the error wraps ctx.Err() and
// context.Cause(ctx). Run is safe for concurrent use.
func (h *HTTP) Run(ctx context.Context) error {
	if err := h.Validate(); err != nil {
		return err
	}
	u, _ := h.parseURL()
	method := strings.ToUpper(h.Method)
	if method == "" {
		method = http.MethodGet
	}
	shown := redactURL(u)

	var body io.Reader
	if h.Body != "" {
		body = strings.NewReader(h.Body)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.URL, body)
	if err != nil {
		return fmt.Errorf("jobs: http %s %s: %w", method, shown, unwrapURLError(err))
	}
	for k, v := range h.Headers {
		if http.CanonicalHeaderKey(k) == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	info, _ := jobs.InfoFrom(ctx)
	req.Header.Set(jobs.HeaderJob, info.Job)
	req.Header.Set(jobs.HeaderTick, info.Tick.UTC().Format(time.RFC3339Nano))
	req.Header.Set(jobs.HeaderToken, strconv.FormatInt(info.Token, 10))
	req.Header.Set(jobs.HeaderReplica, info.Replica)
	req.Header.Set(jobs.HeaderAttempt, strconv.Itoa(info.Attempt))
	req.Header.Set(jobs.HeaderTrigger, info.TriggerString())
	if info.Backfill {
		req.Header.Set(jobs.HeaderBackfill, "1")
	}
	for k, v := range info.Params {
		req.Header.Set(jobs.ParamHeader(k), v)
	}
	if info.Parent != "" {
		req.Header.Set(jobs.HeaderParent, info.Parent)
	}
	injectTraceHeaders(ctx, req.Header)

	client := h.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		err = unwrapURLError(err)
		if ctx.Err() != nil {
			return fmt.Errorf("jobs: http %s %s: %w", method, shown, runerr.Ctx(ctx))
		}
		return fmt.Errorf("jobs: http %s %s: %w", method, shown, err)
	}
	defer resp.Body.Close()
	head, readErr := io.ReadAll(io.LimitReader(resp.Body, bodySummaryBytes+1))
	if readErr == nil {
		_, readErr = io.Copy(io.Discard, io.LimitReader(resp.Body, bodyDrainBytes))
	}
	if !h.expected(resp.StatusCode) {
		return &StatusError{
			Method: method,
			URL:    shown,
			Code:   resp.StatusCode,
			Body:   summarize(head),
		}
	}
	if readErr != nil && ctx.Err() != nil {
		// The status was right, but the run was cut short while the body
		// was still coming: report it as stopped.
		return fmt.Errorf("jobs: http %s %s: reading body: %w", method, shown, runerr.Ctx(ctx))
	}
	return nil
}

func (h *HTTP) expected(code int) bool {
	if len(h.ExpectStatus) == 0 {
		return code >= 200 && code <= 299
	}
	return slices.Contains(h.ExpectStatus, code)
}

// StatusError is the error of an HTTP run whose response status was not
// one it expected. It is only read after Run returns, so it is safe for
// concurrent use.
type StatusError struct {
	Method string // the request method
	URL    string // the URL, without userinfo and with query values replaced by "xxxxx"
	Code   int    // the response status code
	// Body is the start of the response body (up to 512 bytes), with
	// control characters and runs of white space replaced by one space,
	// trimmed, and ending in "…" if it was cut.
	Body string
}

// Error names the method, the URL and the status, and quotes the start of
// the body, for example:
//
//	jobs: http POST https://example.com/hook: status 503 Service Unavailable: body "try later"
func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "jobs: http %s %s: status %d", e.Method, e.URL, e.Code)
	if text := http.StatusText(e.Code); text != "" {
		b.WriteString(" " + text)
	}
	if e.Body != "" {
		fmt.Fprintf(&b, ": body %q", e.Body)
	}
	return b.String()
}

// summarize returns the start of a body for a StatusError: head is up to
// bodySummaryBytes+1 bytes of it; more than bodySummaryBytes means there
// was more.
func summarize(head []byte) string {
	cut := len(head) > bodySummaryBytes
	if cut {
		head = head[:bodySummaryBytes]
	}
	s := runerr.Clean(string(head), bodySummaryBytes)
	if cut && s != "" && !strings.HasSuffix(s, "…") {
		s += "…"
	}
	return s
}

// redactURL returns u as errors show it: without userinfo and fragment,
// with the values of its query replaced by "xxxxx".
func redactURL(u *url.URL) string {
	r := *u
	r.User = nil
	r.Fragment, r.RawFragment = "", ""
	if r.RawQuery != "" {
		q := r.Query()
		for _, vs := range q {
			for i := range vs {
				vs[i] = "xxxxx"
			}
		}
		r.RawQuery = q.Encode()
	}
	return r.String()
}

// unwrapURLError returns the error a *url.Error wraps, or err: the
// *url.Error's message would show the URL, query and all.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}

// isToken reports whether s is an HTTP token (RFC 9110, section 5.6.2), as
// method and header names must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
