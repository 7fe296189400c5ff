// Package otlptest is an OTLP/HTTP trace receiver for tests: an httptest
// server on 127.0.0.1 that decodes the spans exporters send it (protobuf,
// gzipped or not) and keeps them for the test to read.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is a span the receiver got, its ids in hex.
type Span struct {
	Service  string // the resource's service.name
	Scope    string // the instrumentation scope's name
	Name     string
	Kind     string // as OTLP names it: SPAN_KIND_CLIENT ...
	TraceID  string
	SpanID   string
	ParentID string // "" for the root of a trace
	// Attrs are the span's attributes, their values as text.
	Attrs map[string]string
	// Error is whether the span's status is an error.
	Error bool
}

// Receiver collects the spans exported to it.
type Receiver struct {
	// URL is the receiver's base URL, a value for
	// OTEL_EXPORTER_OTLP_ENDPOINT (spans go to URL/v1/traces).
	URL string

	mu    sync.Mutex
	spans []Span
}

// New starts a receiver, closed at the end of the test. A request it
// cannot decode fails the test.
func New(tb testing.TB) *Receiver {
	tb.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" {
			http.NotFound(w, req)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				tb.Errorf("otlptest: gzip: %v", err)
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		var in coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &in)
		}
		if err != nil {
			tb.Errorf("otlptest: decoding an export: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.add(&in)
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	tb.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) add(in *coltracepb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range in.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, Span{
					Service:  service,
					Scope:    ss.GetScope().GetName(),
					Name:     s.GetName(),
					Kind:     s.GetKind().String(),
					TraceID:  hex.EncodeToString(s.GetTraceId()),
					SpanID:   hex.EncodeToString(s.GetSpanId()),
					ParentID: hex.EncodeToString(s.GetParentSpanId()),
					Attrs:    attrs(s.GetAttributes()),
					Error:    s.GetStatus().GetCode() == tracepb.Status_STATUS_CODE_ERROR,
				})
			}
		}
	}
}

// attrs renders attributes as text.
func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.GetValue().(type) {
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.GetIntValue(), 10)
		case *commonpb.AnyValue_BoolValue:
			m[kv.GetKey()] = strconv.FormatBool(v.GetBoolValue())
		case *commonpb.AnyValue_DoubleValue:
			m[kv.GetKey()] = strconv.FormatFloat(v.GetDoubleValue(), 'g', -1, 64)
		default:
			m[kv.GetKey()] = v.GetStringValue()
		}
	}
	return m
}

// Spans returns a copy of the spans received so far, in arrival order.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Named returns the spans received so far with the given name.
func (r *Receiver) Named(name string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}
