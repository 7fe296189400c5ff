package tracing

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/otlptest"
)

const (
	traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tracestate  = "vendor=opaque"
)

func header(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }

// TestCarrierRoundTrip: a trace context injected into record headers is
// extracted unchanged, and the headers already there are kept.
func TestCarrierRoundTrip(t *testing.T) {
	tr := For(NewContext(context.Background(), sdktrace.NewTracerProvider()), "test")
	src := []kgo.RecordHeader{header("webhooks-not-before", "1"), header(HeaderTraceparent, traceparent),
		header(HeaderTracestate, tracestate)}
	in := trace.SpanContextFromContext(tr.Extract(context.Background(), src))
	if !in.IsValid() || !in.IsRemote() || in.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		in.SpanID().String() != "00f067aa0ba902b7" || !in.IsSampled() || in.TraceState().String() != tracestate {
		t.Fatalf("extracted %+v", in)
	}

	ctx, span := tr.Start(tr.Extract(context.Background(), src), "child", trace.SpanKindInternal)
	defer span.End()
	dst := []kgo.RecordHeader{header("webhooks-parked-after", "-1"), header(HeaderTraceparent, "stale")}
	Carry(ctx, &dst, src)
	c := (*Carrier)(&dst)
	if got := c.Keys(); !slices.Equal(got, []string{"webhooks-parked-after", HeaderTraceparent, HeaderTracestate}) {
		t.Fatalf("headers %q: want the one there, traceparent replaced, tracestate added", got)
	}
	out := trace.SpanContextFromContext(tr.Extract(context.Background(), dst))
	if out.TraceID() != in.TraceID() || out.SpanID() != span.SpanContext().SpanID() ||
		out.TraceState().String() != tracestate || c.Get("webhooks-parked-after") != "-1" {
		t.Fatalf("round trip: %+v from %q", out, c.Get(HeaderTraceparent))
	}
}

// TestCarryCopiesWhenOff: with no span in the context, the trace headers
// of the record pass on unchanged, and only they.
func TestCarryCopiesWhenOff(t *testing.T) {
	var tr Tracer
	ctx, span := tr.Start(context.Background(), "nothing", trace.SpanKindInternal)
	defer span.End()
	if span.IsRecording() || tr.On() {
		t.Fatal("the zero Tracer records")
	}
	src := []kgo.RecordHeader{header("webhooks-not-before", "1"), header(HeaderTraceparent, traceparent),
		header(HeaderTracestate, tracestate)}
	var dst []kgo.RecordHeader
	Carry(ctx, &dst, src)
	if !slices.EqualFunc(dst, src[1:], func(a, b kgo.RecordHeader) bool { return a.Key == b.Key && string(a.Value) == string(b.Value) }) {
		t.Fatalf("carried %v", dst)
	}
}

// TestOffWithoutEndpoint: tracing is on only with an OTLP endpoint and the
// SDK not disabled; off, components get the zero Tracer.
func TestOffWithoutEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		on   bool
	}{
		{"nothing set", nil, false},
		{"other OTEL variables only", map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, false},
		{"endpoint", map[string]string{EnvEndpoint: "http://127.0.0.1:4318"}, true},
		{"traces endpoint", map[string]string{EnvTracesEndpoint: "http://127.0.0.1:4318/v1/traces"}, true},
		{"disabled", map[string]string{EnvEndpoint: "http://127.0.0.1:4318", EnvDisabled: "true"}, false},
		{"disabled, any case", map[string]string{EnvEndpoint: "http://127.0.0.1:4318", EnvDisabled: " TRUE"}, false},
		{"not disabled", map[string]string{EnvEndpoint: "http://127.0.0.1:4318", EnvDisabled: "false"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string { return tc.env[k] }
			if got := Enabled(getenv); got != tc.on {
				t.Fatalf("Enabled = %v, want %v", got, tc.on)
			}
			tp, err := Start(context.Background(), "test", getenv)
			if err != nil {
				t.Fatal(err)
			}
			if (tp != nil) != tc.on {
				t.Fatalf("provider %v, want one: %v", tp, tc.on)
			}
			if tp != nil {
				_ = tp.Shutdown(context.Background())
			}
		})
	}
	if For(context.Background(), "test").On() {
		t.Fatal("a tracer without a provider in the context")
	}
}

// TestStartExports: the provider Start makes from the environment sends its
// spans to the OTLP endpoint, named for the component.
func TestStartExports(t *testing.T) {
	recv := otlptest.New(t)
	t.Setenv(EnvEndpoint, recv.URL)
	tp, err := Start(context.Background(), "test", os.Getenv)
	if err != nil || tp == nil {
		t.Fatalf("Start: %v, %v", tp, err)
	}
	_, span := For(NewContext(context.Background(), tp), "github.com/hookpipe/hookpipe/test").
		Start(context.Background(), "work", trace.SpanKindInternal)
	span.End()
	if err := tp.Shutdown(testkit.Ctx(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	spans := recv.Spans()
	if len(spans) != 1 || spans[0].Name != "work" || spans[0].Service != "hookpipe-test" ||
		spans[0].Scope != "github.com/hookpipe/hookpipe/test" {
		t.Fatalf("received %+v", spans)
	}
}

// offPath is what a component does per record with tracing off.
func offPath(ctx context.Context, src []kgo.RecordHeader, dst *[]kgo.RecordHeader) {
	var tr Tracer
	ctx, span := tr.Start(tr.Extract(ctx, src), "attempt", trace.SpanKindClient)
	if span.IsRecording() {
		panic("recording")
	}
	Carry(ctx, dst, src)
	span.End()
}

// TestOffAllocatesNothing: with tracing off, a record without trace
// headers costs no allocation.
func TestOffAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	src := []kgo.RecordHeader{header("webhooks-not-before", "1")}
	dst := make([]kgo.RecordHeader, 0, 2)
	if n := testing.AllocsPerRun(100, func() { offPath(ctx, src, &dst) }); n != 0 {
		t.Fatalf("%v allocations per record", n)
	}
}

// BenchmarkOff is the per-record cost with tracing off: a record with a
// producer's traceparent, whose headers are copied.
func BenchmarkOff(b *testing.B) {
	ctx := context.Background()
	src := []kgo.RecordHeader{header(HeaderTraceparent, traceparent)}
	b.ReportAllocs()
	for b.Loop() {
		var dst []kgo.RecordHeader
		offPath(ctx, src, &dst)
	}
}
