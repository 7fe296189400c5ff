package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/testkit/otlptest"
	"github.com/hookpipe/hookpipe/runtime/tracing"
	"github.com/hookpipe/hookpipe/topics"
)

// TestTraceOfRetriedDelivery: with tracing on, a delivery that fails twice
// (500, 500, then 204) makes one trace: the dispatcher's fan-out, three
// attempts, two retries scheduled and released, each span the child of the
// one before. Every request the endpoint received carries the traceparent
// of its attempt span, and so does every attempt record. A traceparent the
// producer put on the event is the fan-out's parent; an event without one
// starts a trace of its own. No span attribute carries the subscription's
// secret, its bearer token or the payload.
func TestTraceOfRetriedDelivery(t *testing.T) {
	recv := otlptest.New(t)
	t.Setenv(tracing.EnvEndpoint, recv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100") // milliseconds
	tp, err := tracing.Start(context.Background(), "e2e", os.Getenv)
	if err != nil || tp == nil {
		t.Fatalf("tracing.Start: %v, %v", tp, err)
	}
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	e := newEnv(t)
	e.base = tracing.NewContext(context.Background(), tp)
	r := newReceiver(t)
	var mu sync.Mutex
	calls := map[string]int{}
	r.answer(func(q request, _ http.ResponseWriter) int {
		mu.Lock()
		defer mu.Unlock()
		if calls[q.ID]++; calls[q.ID] <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	const token, payload = "tok_never_in_a_span", "payload_never_in_a_span"
	sub := e.subscribe(topics.Subscription{ID: "traced", URL: r.url("traced"), EventTypes: []string{"*"}, Enabled: true,
		RetrySchedule: []string{"1s", "1s", "1s"}, Auth: &topics.EndpointAuth{Type: topics.AuthBearer, Token: token}})
	r.trust(sub)
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()

	const producerTrace, producerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	traced, err := json.Marshal(topics.Event{ID: "evt_traced", Type: "order.created", Tenant: "acme",
		Data: json.RawMessage(`{"note":"` + payload + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	e.produce(&kgo.Record{Topic: e.names.Events(), Value: traced, Headers: []kgo.RecordHeader{
		{Key: "traceparent", Value: []byte("00-" + producerTrace + "-" + producerSpan + "-01")}}})
	e.publish(topics.Event{ID: "evt_untraced", Type: "order.created", Data: json.RawMessage(`{}`)})
	wait(t, 60*time.Second, "both deliveries on attempt 3", func() bool { return r.count() == 2 })

	// The untraced event's trace is the one its fan-out started.
	var rootTrace string
	wait(t, 30*time.Second, "the spans of both traces", func() bool {
		for _, s := range recv.Named(tracing.SpanFanOut) {
			if s.Attrs["hookpipe.event.id"] == "evt_untraced" {
				rootTrace = s.TraceID
			}
		}
		return rootTrace != "" && len(spansOf(recv, producerTrace)) >= 8 && len(spansOf(recv, rootTrace)) >= 8
	})
	if rootTrace == producerTrace {
		t.Fatal("the event without a traceparent joined the producer's trace")
	}
	checkTrace(t, spansOf(recv, producerTrace), producerSpan, r.attempts("evt_traced"))
	checkTrace(t, spansOf(recv, rootTrace), "", r.attempts("evt_untraced"))

	// Attempt records carry their attempt span's context.
	attemptSpans := map[string]bool{}
	for _, s := range recv.Named(tracing.SpanAttempt) {
		attemptSpans["00-"+s.TraceID+"-"+s.SpanID+"-01"] = true
	}
	e.consume(e.names.Attempts(), 30*time.Second, func(recs []*kgo.Record) bool {
		n := 0
		for _, rec := range recs {
			if tp := (*tracing.Carrier)(&rec.Headers).Get("traceparent"); attemptSpans[tp] {
				n++
			}
		}
		return n == 6
	})

	for _, s := range recv.Spans() {
		for k, v := range s.Attrs {
			for _, secret := range []string{token, payload, sub.Secret, strings.TrimPrefix(sub.Secret, topics.SecretPrefix), r.url("")} {
				if strings.Contains(v, secret) {
					t.Errorf("span %q attribute %s=%q holds a secret, the payload or the URL", s.Name, k, v)
				}
			}
		}
	}
}

// spansOf returns the spans of one trace.
func spansOf(recv *otlptest.Receiver, traceID string) []otlptest.Span {
	var out []otlptest.Span
	for _, s := range recv.Spans() {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}

// checkTrace checks the spans of one delivery retried twice: a fan-out
// whose parent is parent ("" for a root), then attempt 1, retry scheduled,
// retry released, attempt 2, retry scheduled, retry released, attempt 3,
// each the child of the one before; the attempts answered 500, 500, 204,
// and each request carried the traceparent of its attempt span.
func checkTrace(t *testing.T, spans []otlptest.Span, parent string, reqs []request) {
	t.Helper()
	byName := map[string][]otlptest.Span{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	for name, n := range map[string]int{tracing.SpanFanOut: 1, tracing.SpanAttempt: 3, tracing.SpanRetryScheduled: 2,
		tracing.SpanRetryReleased: 2} {
		if len(byName[name]) != n {
			t.Fatalf("%d %q spans, want %d, in %+v", len(byName[name]), name, n, spans)
		}
	}
	fan := byName[tracing.SpanFanOut][0]
	if fan.ParentID != parent || fan.Attrs["hookpipe.deliveries"] != "1" || fan.Attrs["hookpipe.event.type"] != "order.created" {
		t.Errorf("fan-out %+v, want the child of %q with one delivery", fan, parent)
	}
	byAttempt := func(name string) []otlptest.Span {
		out := slices.Clone(byName[name])
		slices.SortFunc(out, func(a, b otlptest.Span) int {
			x, _ := strconv.Atoi(a.Attrs["hookpipe.attempt"])
			y, _ := strconv.Atoi(b.Attrs["hookpipe.attempt"])
			return x - y
		})
		return out
	}
	attempts, scheduled := byAttempt(tracing.SpanAttempt), byAttempt(tracing.SpanRetryScheduled)
	released := byName[tracing.SpanRetryReleased]
	// Each released retry is the child of a scheduled one: order them so.
	slices.SortFunc(released, func(a, b otlptest.Span) int {
		return slices.IndexFunc(scheduled, func(s otlptest.Span) bool { return s.SpanID == a.ParentID }) -
			slices.IndexFunc(scheduled, func(s otlptest.Span) bool { return s.SpanID == b.ParentID })
	})
	chain := []otlptest.Span{fan, attempts[0], scheduled[0], released[0], attempts[1], scheduled[1], released[1], attempts[2]}
	for i := 1; i < len(chain); i++ {
		if chain[i].ParentID != chain[i-1].SpanID {
			t.Errorf("%q (span %d of the chain) is the child of %s, want %q %s", chain[i].Name, i, chain[i].ParentID,
				chain[i-1].Name, chain[i-1].SpanID)
		}
	}
	statuses := []string{"500", "500", "204"}
	outcomes := []string{topics.OutcomeRetry, topics.OutcomeRetry, topics.OutcomeSuccess}
	for i, a := range attempts {
		want := map[string]string{"hookpipe.attempt": strconv.Itoa(i + 1), "http.response.status_code": statuses[i],
			"hookpipe.outcome": outcomes[i], "hookpipe.subscription.id": "traced"}
		for k, v := range want {
			if a.Attrs[k] != v {
				t.Errorf("attempt %d: %s=%q, want %q", i+1, k, a.Attrs[k], v)
			}
		}
		if a.Kind != "SPAN_KIND_CLIENT" || a.Error != (i < 2) {
			t.Errorf("attempt %d: kind %s, error %v", i+1, a.Kind, a.Error)
		}
		if i < 2 && a.Attrs["hookpipe.failure_category"] == "" {
			t.Errorf("attempt %d: no failure category", i+1)
		}
	}
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	slices.SortFunc(reqs, func(a, b request) int { return a.At.Compare(b.At) })
	for i, q := range reqs {
		if got, want := q.Header.Get("traceparent"), fmt.Sprintf("00-%s-%s-01", attempts[i].TraceID, attempts[i].SpanID); got != want {
			t.Errorf("request %d: traceparent %q, want %q (its attempt span)", i+1, got, want)
		}
	}
}
