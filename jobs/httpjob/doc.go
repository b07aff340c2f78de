// Package httpjob is the http job kind: HTTP, a jobs.Runner that sends one
// request per run.
//
//	r := &httpjob.HTTP{URL: "https://billing.internal/close-day", Method: "POST", Headers: map[string]string{"Authorization": "Bearer " + token}}
//
// Each request carries the run's jobs.Info in the headers Lockcron-Job,
// Lockcron-Tick, Lockcron-Token, Lockcron-Replica, Lockcron-Attempt and
// Lockcron-Trigger (jobs.HeaderJob and the like), and a manual run's
// parameters (jobs.Info.Params) as Lockcron-Param-<Name> headers
// (jobs.ParamHeader: each _ of the name made a -, as proxies drop names
// with _; report_date is Lockcron-Param-Report-Date). A header value loses
// its leading and trailing spaces at the receiver (HTTP trims them), and
// UTF-8 other than ASCII is sent as raw bytes, which HTTP allows but some
// receivers refuse. HTTP.Headers may not set Lockcron-* names. It succeeds on any 2xx status, or on one of
// HTTP.ExpectStatus; another status is a *StatusError with the start of the
// body. Errors never show the URL's userinfo or query values, and nothing is
// logged, request headers included.
//
// When the run's ctx holds a span (the scheduler's job.run, with tracing
// on), the request carries its W3C traceparent and tracestate headers, so
// that the receiver's spans join the run's trace.
//
// Config calls Validate (errors wrapping jobs.ErrInvalid that name the
// field) before it builds a job; Run validates too. A run stopped by its
// ctx returns an error that wraps ctx.Err() and context.Cause(ctx).
// Nothing in this package panics.
package httpjob
