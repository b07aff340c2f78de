package oteltest

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

func TestMetrics(t *testing.T) {
	mp := NewMeterProvider()
	m := mp.Meter("test")
	ctx := context.Background()
	a, b := metric.WithAttributes(attribute.String("k", "a")), metric.WithAttributes(attribute.String("k", "b"))
	c, _ := m.Int64Counter("c")
	c.Add(ctx, 2, a)
	c.Add(ctx, 3, a)
	c.Add(ctx, 1, b)
	h, _ := m.Float64Histogram("h")
	h.Record(ctx, 0.5, a)
	h.Record(ctx, 1.5, a)
	g, _ := m.Int64ObservableGauge("g")
	n := int64(7)
	reg, _ := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(g, n, a)
		return nil
	}, g)

	sums := map[string]float64{}
	for _, p := range mp.Collect("c") {
		v, _ := p.Attributes.Value("k")
		if p.Kind != Counter || !p.Int {
			t.Errorf("c: %+v", p)
		}
		sums[v.AsString()] = p.Value
	}
	if sums["a"] != 5 || sums["b"] != 1 || len(sums) != 2 {
		t.Errorf("counter sums %v, want a=5 b=1", sums)
	}
	if ps := mp.Collect("h"); len(ps) != 1 || ps[0].Count != 2 || ps[0].Sum != 2 || ps[0].Kind != Histogram {
		t.Errorf("histogram %+v, want one point of 2 recordings summing to 2", ps)
	}
	if ps := mp.Collect("g"); len(ps) != 1 || ps[0].Value != 7 {
		t.Errorf("gauge %+v, want 7", ps)
	}
	n = 9
	if ps := mp.Collect("g"); len(ps) != 1 || ps[0].Value != 9 {
		t.Errorf("gauge %+v, want 9 at the second collection", ps)
	}
	_ = reg.Unregister()
	if ps := mp.Collect("g"); len(ps) != 0 {
		t.Errorf("gauge %+v after its callback was unregistered, want no point", ps)
	}
	if ps := mp.Collect("none"); len(ps) != 0 {
		t.Errorf("an instrument never made has points: %+v", ps)
	}
}

func TestSpans(t *testing.T) {
	tp := NewTracerProvider()
	tr := tp.Tracer("test")
	ctx, parent := tr.Start(context.Background(), "parent", trace.WithAttributes(attribute.Int("n", 1)))
	_, child := tr.Start(ctx, "child")
	child.SetAttributes(attribute.String("s", "x"))
	child.RecordError(errors.New("boom"))
	child.SetStatus(codes.Error, "boom")
	if !child.IsRecording() {
		t.Error("a span not ended is not recording")
	}
	child.End()
	child.SetAttributes(attribute.String("late", "y")) // after End: dropped
	if child.IsRecording() {
		t.Error("an ended span is recording")
	}
	if len(tp.Ended()) != 1 {
		t.Fatalf("%d spans ended, want 1", len(tp.Ended()))
	}
	parent.End()
	ended := tp.Ended()
	if len(ended) != 2 || ended[0].Name() != "child" || ended[1].Name() != "parent" {
		t.Fatalf("ended spans %v, want child then parent", ended)
	}
	c, p := ended[0], ended[1]
	if c.Parent().SpanID() != p.SpanContext().SpanID() || c.SpanContext().TraceID() != p.SpanContext().TraceID() {
		t.Error("the child's parent is not the parent span, or its trace differs")
	}
	if p.Parent().IsValid() || !p.SpanContext().IsValid() || !p.SpanContext().IsSampled() {
		t.Errorf("parent: parent %v, context %v; want a root with a valid, sampled context", p.Parent(), p.SpanContext())
	}
	if got := attribute.NewSet(c.Attributes()...); got.Len() != 1 || !got.HasValue("s") {
		t.Errorf("child attributes %v, want s only", c.Attributes())
	}
	if ps := attribute.NewSet(p.Attributes()...); !ps.HasValue("n") || len(p.Attributes()) != 1 || p.Attributes()[0].Value.AsInt64() != 1 {
		t.Errorf("parent attributes %v, want n=1", p.Attributes())
	}
	if st := c.Status(); st.Code != codes.Error || st.Description != "boom" {
		t.Errorf("child status %+v", st)
	}
	if ev := c.Events(); len(ev) != 1 || ev[0].Name != "exception" {
		t.Errorf("child events %+v, want one exception", ev)
	}
	if c.EndTime().Before(c.StartTime()) {
		t.Error("the child ended before it started")
	}
}
