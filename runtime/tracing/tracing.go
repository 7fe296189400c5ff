// Package tracing is the OpenTelemetry tracing every component shares: a
// tracer provider set up from the standard OTEL_* environment, exporting
// over OTLP/HTTP, and the trace context of a delivery carried from record
// to record in Kafka headers (W3C Trace Context: traceparent, tracestate).
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set (and OTEL_SDK_DISABLED is not
// true). Off, a Tracer makes no spans and allocates nothing; records still
// pass a producer's trace headers on, so the endpoint receives them.
//
// The provider travels in the context a component's Run gets (NewContext),
// not in a global: components run in one test process each see their own.
package tracing

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The standard variables that decide whether tracing is on. The SDK reads
// the others (OTEL_EXPORTER_OTLP_HEADERS, OTEL_TRACES_SAMPLER,
// OTEL_SERVICE_NAME, OTEL_BSP_* ...) itself.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvDisabled       = "OTEL_SDK_DISABLED"
)

// Enabled tells whether the environment turns tracing on: an OTLP endpoint
// is set and the SDK is not disabled.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvDisabled)), "true") {
		return false
	}
	return getenv(EnvEndpoint) != "" || getenv(EnvTracesEndpoint) != ""
}

// Start returns the tracer provider the environment asks for, or nil when
// tracing is off. Its spans are batched and exported over OTLP/HTTP to the
// endpoint the OTEL_EXPORTER_OTLP_* variables name; the service name is
// OTEL_SERVICE_NAME, or "hookpipe-" and the component's name. Shut it down
// to flush the spans not yet exported.
func Start(ctx context.Context, component string, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	if !Enabled(getenv) {
		return nil, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the default name.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName("hookpipe-"+component)),
		resource.WithFromEnv(),
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// providerKey is the context key of the tracer provider.
type providerKey struct{}

// NewContext returns ctx carrying tp, which For finds there.
func NewContext(ctx context.Context, tp trace.TracerProvider) context.Context {
	return context.WithValue(ctx, providerKey{}, tp)
}

// For returns the tracer of a component (its import path names it) from
// the provider in ctx; the zero Tracer, tracing off, when there is none.
func For(ctx context.Context, component string) Tracer {
	tp, _ := ctx.Value(providerKey{}).(trace.TracerProvider)
	if tp == nil {
		return Tracer{}
	}
	return Tracer{t: tp.Tracer(component)}
}

// Tracer makes a component's spans. The zero Tracer makes none: its Start
// returns a span that records nothing, and it allocates nothing.
type Tracer struct {
	t trace.Tracer
}

// off is the span a zero Tracer returns, stored once so returning it
// allocates nothing.
var off trace.Span = trace.SpanFromContext(context.Background())

// On tells whether the tracer makes spans.
func (t Tracer) On() bool { return t.t != nil }

// Start starts a span, the child of the span in ctx or the root of a new
// trace. Callers set attributes only when the span IsRecording, so that a
// zero Tracer costs nothing.
func (t Tracer) Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	if t.t == nil {
		return ctx, off
	}
	return t.t.Start(ctx, name, trace.WithSpanKind(kind))
}

// Extract returns ctx with the remote span context that headers carry (a
// record's traceparent and tracestate), or ctx itself when they carry none
// or the tracer is off.
func (t Tracer) Extract(ctx context.Context, headers []kgo.RecordHeader) context.Context {
	if t.t == nil {
		return ctx
	}
	return extract(ctx, headers)
}

// extract is Extract's work, apart so that the zero Tracer's path does not
// move headers to the heap.
func extract(ctx context.Context, headers []kgo.RecordHeader) context.Context {
	return propagator.Extract(ctx, (*Carrier)(&headers))
}
