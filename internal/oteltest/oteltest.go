// Package oteltest records the spans and metrics that the library makes,
// through the OpenTelemetry API alone, for the library's tests.
//
// It exists so that the library module does not require the OpenTelemetry
// SDK: a program that imports lock or scheduler gets the API in its module
// graph and nothing more. The recorder keeps what the tests look at (span
// names, attributes, status, events and parents; counter sums, histogram
// counts and sums, gauge values, by attribute set) and nothing else: no
// export, no sampling, no views, no aggregation temporality.
package oteltest

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	mnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tnoop "go.opentelemetry.io/otel/trace/noop"
)

// Kind is what an instrument measures.
type Kind int

const (
	Counter       Kind = iota // monotonic sum, synchronous or observable
	UpDownCounter             // sum
	Histogram                 // recordings: their count and sum
	Gauge                     // the last observation
)

// Point is one attribute set's figure of an instrument, as Collect found
// it.
type Point struct {
	Attributes attribute.Set
	Kind       Kind
	Int        bool    // the instrument measures int64 values
	Value      float64 // a counter's sum, a gauge's last value
	Count      uint64  // a histogram's recordings
	Sum        float64 // a histogram's sum
}

// MeterProvider records every measurement of its meters' instruments.
type MeterProvider struct {
	embedded.MeterProvider

	collecting sync.Mutex // one Collect at a time
	mu         sync.Mutex
	insts      map[string][]*inst // by instrument name
	callbacks  map[*callback]struct{}
}

// NewMeterProvider returns an empty MeterProvider.
func NewMeterProvider() *MeterProvider {
	return &MeterProvider{insts: map[string][]*inst{}, callbacks: map[*callback]struct{}{}}
}

// Meter returns a meter that records into p.
func (p *MeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return &meter{p: p} }

// Collect runs the registered callbacks, as an SDK reader does, and
// returns the points of every instrument called name. An observable
// instrument has the points its callbacks observed in this Collect only.
func (p *MeterProvider) Collect(name string) []Point {
	p.collecting.Lock()
	defer p.collecting.Unlock()
	p.mu.Lock()
	for _, ins := range p.insts {
		for _, in := range ins {
			if in.observable {
				clear(in.points)
			}
		}
	}
	cbs := make([]*callback, 0, len(p.callbacks))
	for cb := range p.callbacks {
		cbs = append(cbs, cb)
	}
	p.mu.Unlock()
	for _, cb := range cbs {
		_ = cb.f(context.Background(), observer{p: p})
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Point
	for _, in := range p.insts[name] {
		for _, pt := range in.points {
			out = append(out, *pt)
		}
	}
	return out
}

type inst struct {
	kind       Kind
	isInt      bool
	observable bool
	points     map[attribute.Distinct]*Point
}

func (p *MeterProvider) newInst(name string, kind Kind, isInt, observable bool) *inst {
	p.mu.Lock()
	defer p.mu.Unlock()
	in := &inst{kind: kind, isInt: isInt, observable: observable, points: map[attribute.Distinct]*Point{}}
	p.insts[name] = append(p.insts[name], in)
	return in
}

func (p *MeterProvider) measure(in *inst, v float64, attrs attribute.Set) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pt := in.points[attrs.Equivalent()]
	if pt == nil {
		pt = &Point{Attributes: attrs, Kind: in.kind, Int: in.isInt}
		in.points[attrs.Equivalent()] = pt
	}
	switch in.kind {
	case Counter, UpDownCounter:
		pt.Value += v
	case Histogram:
		pt.Count++
		pt.Sum += v
	case Gauge:
		pt.Value = v
	}
}

type meter struct {
	mnoop.Meter
	p *MeterProvider
}

type int64Counter struct {
	mnoop.Int64Counter
	m *meter
	i *inst
}

func (c int64Counter) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.m.p.measure(c.i, float64(v), metric.NewAddConfig(opts).Attributes())
}

type float64Counter struct {
	mnoop.Float64Counter
	m *meter
	i *inst
}

func (c float64Counter) Add(_ context.Context, v float64, opts ...metric.AddOption) {
	c.m.p.measure(c.i, v, metric.NewAddConfig(opts).Attributes())
}

type int64UpDown struct {
	mnoop.Int64UpDownCounter
	m *meter
	i *inst
}

func (c int64UpDown) Add(_ context.Context, v int64, opts ...metric.AddOption) {
	c.m.p.measure(c.i, float64(v), metric.NewAddConfig(opts).Attributes())
}

type float64UpDown struct {
	mnoop.Float64UpDownCounter
	m *meter
	i *inst
}

func (c float64UpDown) Add(_ context.Context, v float64, opts ...metric.AddOption) {
	c.m.p.measure(c.i, v, metric.NewAddConfig(opts).Attributes())
}

type int64Histogram struct {
	mnoop.Int64Histogram
	m *meter
	i *inst
}

func (h int64Histogram) Record(_ context.Context, v int64, opts ...metric.RecordOption) {
	h.m.p.measure(h.i, float64(v), metric.NewRecordConfig(opts).Attributes())
}

type float64Histogram struct {
	mnoop.Float64Histogram
	m *meter
	i *inst
}

func (h float64Histogram) Record(_ context.Context, v float64, opts ...metric.RecordOption) {
	h.m.p.measure(h.i, v, metric.NewRecordConfig(opts).Attributes())
}

// The observable instruments: their values come from callbacks, which
// find the recording behind each instrument through observed.
type observed interface{ recording() *inst }

type int64ObsCounter struct {
	mnoop.Int64ObservableCounter
	i *inst
}

func (o int64ObsCounter) recording() *inst { return o.i }

type int64ObsUpDown struct {
	mnoop.Int64ObservableUpDownCounter
	i *inst
}

func (o int64ObsUpDown) recording() *inst { return o.i }

type int64ObsGauge struct {
	mnoop.Int64ObservableGauge
	i *inst
}

func (o int64ObsGauge) recording() *inst { return o.i }

type float64ObsCounter struct {
	mnoop.Float64ObservableCounter
	i *inst
}

func (o float64ObsCounter) recording() *inst { return o.i }

type float64ObsUpDown struct {
	mnoop.Float64ObservableUpDownCounter
	i *inst
}

func (o float64ObsUpDown) recording() *inst { return o.i }

type float64ObsGauge struct {
	mnoop.Float64ObservableGauge
	i *inst
}

func (o float64ObsGauge) recording() *inst { return o.i }

func (m *meter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return int64Counter{m: m, i: m.p.newInst(name, Counter, true, false)}, nil
}

func (m *meter) Float64Counter(name string, _ ...metric.Float64CounterOption) (metric.Float64Counter, error) {
	return float64Counter{m: m, i: m.p.newInst(name, Counter, false, false)}, nil
}

func (m *meter) Int64UpDownCounter(name string, _ ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	return int64UpDown{m: m, i: m.p.newInst(name, UpDownCounter, true, false)}, nil
}

func (m *meter) Float64UpDownCounter(name string, _ ...metric.Float64UpDownCounterOption) (metric.Float64UpDownCounter, error) {
	return float64UpDown{m: m, i: m.p.newInst(name, UpDownCounter, false, false)}, nil
}

func (m *meter) Int64Histogram(name string, _ ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	return int64Histogram{m: m, i: m.p.newInst(name, Histogram, true, false)}, nil
}

func (m *meter) Float64Histogram(name string, _ ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return float64Histogram{m: m, i: m.p.newInst(name, Histogram, false, false)}, nil
}

func (m *meter) Int64ObservableCounter(name string, opts ...metric.Int64ObservableCounterOption) (metric.Int64ObservableCounter, error) {
	o := int64ObsCounter{i: m.p.newInst(name, Counter, true, true)}
	m.int64Callbacks(o, metric.NewInt64ObservableCounterConfig(opts...).Callbacks())
	return o, nil
}

func (m *meter) Int64ObservableUpDownCounter(name string, opts ...metric.Int64ObservableUpDownCounterOption) (metric.Int64ObservableUpDownCounter, error) {
	o := int64ObsUpDown{i: m.p.newInst(name, UpDownCounter, true, true)}
	m.int64Callbacks(o, metric.NewInt64ObservableUpDownCounterConfig(opts...).Callbacks())
	return o, nil
}

func (m *meter) Int64ObservableGauge(name string, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	o := int64ObsGauge{i: m.p.newInst(name, Gauge, true, true)}
	m.int64Callbacks(o, metric.NewInt64ObservableGaugeConfig(opts...).Callbacks())
	return o, nil
}

func (m *meter) Float64ObservableCounter(name string, opts ...metric.Float64ObservableCounterOption) (metric.Float64ObservableCounter, error) {
	o := float64ObsCounter{i: m.p.newInst(name, Counter, false, true)}
	m.float64Callbacks(o, metric.NewFloat64ObservableCounterConfig(opts...).Callbacks())
	return o, nil
}

func (m *meter) Float64ObservableUpDownCounter(name string, opts ...metric.Float64ObservableUpDownCounterOption) (metric.Float64ObservableUpDownCounter, error) {
	o := float64ObsUpDown{i: m.p.newInst(name, UpDownCounter, false, true)}
	m.float64Callbacks(o, metric.NewFloat64ObservableUpDownCounterConfig(opts...).Callbacks())
	return o, nil
}

func (m *meter) Float64ObservableGauge(name string, opts ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	o := float64ObsGauge{i: m.p.newInst(name, Gauge, false, true)}
	m.float64Callbacks(o, metric.NewFloat64ObservableGaugeConfig(opts...).Callbacks())
	return o, nil
}

// int64Callbacks registers the callbacks given with an instrument's options.
func (m *meter) int64Callbacks(o interface {
	metric.Int64Observable
	observed
}, fs []metric.Int64Callback) {
	for _, f := range fs {
		m.register(func(ctx context.Context, obs metric.Observer) error {
			return f(ctx, int64Observer{obs: obs, o: o})
		})
	}
}

func (m *meter) float64Callbacks(o interface {
	metric.Float64Observable
	observed
}, fs []metric.Float64Callback) {
	for _, f := range fs {
		m.register(func(ctx context.Context, obs metric.Observer) error {
			return f(ctx, float64Observer{obs: obs, o: o})
		})
	}
}

type int64Observer struct {
	embedded.Int64Observer
	obs metric.Observer
	o   metric.Int64Observable
}

func (x int64Observer) Observe(v int64, opts ...metric.ObserveOption) {
	x.obs.ObserveInt64(x.o, v, opts...)
}

type float64Observer struct {
	embedded.Float64Observer
	obs metric.Observer
	o   metric.Float64Observable
}

func (x float64Observer) Observe(v float64, opts ...metric.ObserveOption) {
	x.obs.ObserveFloat64(x.o, v, opts...)
}

type callback struct {
	f metric.Callback
}

func (m *meter) register(f metric.Callback) *callback {
	cb := &callback{f: f}
	m.p.mu.Lock()
	m.p.callbacks[cb] = struct{}{}
	m.p.mu.Unlock()
	return cb
}

// RegisterCallback registers f, run by every Collect until unregistered.
func (m *meter) RegisterCallback(f metric.Callback, _ ...metric.Observable) (metric.Registration, error) {
	return registration{p: m.p, cb: m.register(f)}, nil
}

type registration struct {
	embedded.Registration
	p  *MeterProvider
	cb *callback
}

func (r registration) Unregister() error {
	r.p.mu.Lock()
	delete(r.p.callbacks, r.cb)
	r.p.mu.Unlock()
	return nil
}

type observer struct {
	embedded.Observer
	p *MeterProvider
}

func (o observer) ObserveFloat64(obs metric.Float64Observable, v float64, opts ...metric.ObserveOption) {
	if r, ok := obs.(observed); ok {
		o.p.measure(r.recording(), v, metric.NewObserveConfig(opts).Attributes())
	}
}

func (o observer) ObserveInt64(obs metric.Int64Observable, v int64, opts ...metric.ObserveOption) {
	if r, ok := obs.(observed); ok {
		o.p.measure(r.recording(), float64(v), metric.NewObserveConfig(opts).Attributes())
	}
}

// TracerProvider records the spans of its tracers.
type TracerProvider struct {
	tnoop.TracerProvider

	mu    sync.Mutex
	ended []*Span
}

// NewTracerProvider returns a TracerProvider with no spans.
func NewTracerProvider() *TracerProvider { return &TracerProvider{} }

// Tracer returns a tracer whose spans p records.
func (p *TracerProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return tracer{p: p} }

// Ended returns the spans ended so far, in the order they ended.
func (p *TracerProvider) Ended() []*Span {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*Span(nil), p.ended...)
}

type tracer struct {
	tnoop.Tracer
	p *TracerProvider
}

// Start starts a span; its parent is the span context in ctx, unless the
// options ask for a new root.
func (t tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	cfg := trace.NewSpanStartConfig(opts...)
	var parent trace.SpanContext
	if !cfg.NewRoot() {
		parent = trace.SpanContextFromContext(ctx)
	}
	scc := trace.SpanContextConfig{TraceFlags: trace.FlagsSampled, TraceState: parent.TraceState()}
	if parent.IsValid() {
		scc.TraceID = parent.TraceID()
	} else {
		_, _ = rand.Read(scc.TraceID[:])
	}
	_, _ = rand.Read(scc.SpanID[:])
	start := cfg.Timestamp()
	if start.IsZero() {
		start = time.Now()
	}
	s := &Span{p: t.p, name: name, sc: trace.NewSpanContext(scc), parent: parent, start: start}
	s.attrs = append(s.attrs, cfg.Attributes()...)
	return trace.ContextWithSpan(ctx, s), s
}

// Span is a recorded span. Its accessors mirror the SDK's ReadOnlySpan.
type Span struct {
	tnoop.Span
	p *TracerProvider

	mu     sync.Mutex
	name   string
	sc     trace.SpanContext
	parent trace.SpanContext
	start  time.Time
	end    time.Time
	attrs  []attribute.KeyValue
	status Status
	events []Event
}

// Status is a span's status.
type Status struct {
	Code        codes.Code
	Description string
}

// Event is an event of a span (RecordError adds one called "exception").
type Event struct {
	Name       string
	Attributes []attribute.KeyValue
	Time       time.Time
}

func (s *Span) SpanContext() trace.SpanContext { return s.sc }

func (s *Span) IsRecording() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end.IsZero()
}

func (s *Span) SetStatus(code codes.Code, description string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.end.IsZero() {
		return
	}
	if code != codes.Error {
		description = "" // as the SDK: only an error has a description
	}
	s.status = Status{Code: code, Description: description}
}

func (s *Span) SetAttributes(kv ...attribute.KeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end.IsZero() {
		s.attrs = append(s.attrs, kv...)
	}
}

func (s *Span) SetName(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end.IsZero() {
		s.name = name
	}
}

func (s *Span) AddEvent(name string, opts ...trace.EventOption) {
	cfg := trace.NewEventConfig(opts...)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.end.IsZero() {
		s.events = append(s.events, Event{Name: name, Attributes: cfg.Attributes(), Time: cfg.Timestamp()})
	}
}

// RecordError adds an "exception" event, as the SDK does; it does not set
// the status.
func (s *Span) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	opts = append(opts, trace.WithAttributes(attribute.String("exception.message", err.Error())))
	s.AddEvent("exception", opts...)
}

func (s *Span) End(opts ...trace.SpanEndOption) {
	cfg := trace.NewSpanEndConfig(opts...)
	s.mu.Lock()
	if !s.end.IsZero() {
		s.mu.Unlock()
		return
	}
	s.end = cfg.Timestamp()
	if s.end.IsZero() {
		s.end = time.Now()
	}
	s.mu.Unlock()
	s.p.mu.Lock()
	s.p.ended = append(s.p.ended, s)
	s.p.mu.Unlock()
}

func (s *Span) TracerProvider() trace.TracerProvider { return s.p }

// Name is the span's name.
func (s *Span) Name() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.name
}

// Parent is the span context the span was started under (invalid: a root).
func (s *Span) Parent() trace.SpanContext { return s.parent }

// Attributes are the span's attributes, in the order they were set.
func (s *Span) Attributes() []attribute.KeyValue {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]attribute.KeyValue(nil), s.attrs...)
}

// Status is the span's status.
func (s *Span) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// Events are the span's events.
func (s *Span) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Event(nil), s.events...)
}

// StartTime and EndTime are when the span started and ended.
func (s *Span) StartTime() time.Time { return s.start }

func (s *Span) EndTime() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.end
}
