package tracing

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The record headers that carry a trace context (W3C Trace Context), under
// the names the HTTP headers have.
const (
	HeaderTraceparent = "traceparent"
	HeaderTracestate  = "tracestate"
)

// propagator reads and writes the trace context: W3C Trace Context only.
var propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Carrier is a propagation.TextMapCarrier over a record's headers:
// (*Carrier)(&rec.Headers).
type Carrier []kgo.RecordHeader

// Get returns the value of the first header named key, "" when none is.
func (c *Carrier) Get(key string) string {
	for _, h := range *c {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// Set replaces the value of the header named key, or adds the header.
func (c *Carrier) Set(key, value string) {
	put((*[]kgo.RecordHeader)(c), key, []byte(value))
}

// put replaces the value of the header named key, or adds the header.
func put(hs *[]kgo.RecordHeader, key string, value []byte) {
	for i, h := range *hs {
		if h.Key == key {
			(*hs)[i].Value = value
			return
		}
	}
	*hs = append(*hs, kgo.RecordHeader{Key: key, Value: value})
}

// Keys are the names of the headers.
func (c *Carrier) Keys() []string {
	keys := make([]string, len(*c))
	for i, h := range *c {
		keys[i] = h.Key
	}
	return keys
}

// Carry puts the trace context of what a record caused on one of the
// records it caused: the context of the span in ctx when there is one,
// else (tracing off, or no span started for it) the trace headers of the
// record itself, src, unchanged. Every other header of dst is kept.
func Carry(ctx context.Context, dst *[]kgo.RecordHeader, src []kgo.RecordHeader) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, (*Carrier)(dst))
		return
	}
	for _, h := range src {
		if h.Key == HeaderTraceparent || h.Key == HeaderTracestate {
			put(dst, h.Key, h.Value)
		}
	}
}
