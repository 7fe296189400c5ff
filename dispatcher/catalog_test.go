package dispatcher

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/catalog"
	"github.com/hookpipe/hookpipe/topics"
)

// eventType writes an event type to the catalog.
func (h *harness) eventType(et topics.EventType) {
	h.t.Helper()
	if et.Version == 0 {
		et.Version = 1
	}
	if _, err := catalog.Compile(et); err != nil {
		h.t.Fatal(err)
	}
	h.produce(&kgo.Record{Topic: h.names().EventTypes(), Key: []byte(et.Name), Value: et.Encode()})
}

// TestSchemaValidation: an enforced type's invalid event is dead-lettered
// with category schema, the failing pointer and keyword and its exact
// value; a warned type's is delivered; an unknown type is rejected when
// unknown types are; valid events go out. A schema changed after events
// were produced judges the events polled after the change.
func TestSchemaValidation(t *testing.T) {
	h := newHarness(t, 3)
	h.sub(topics.Subscription{ID: "all", EventTypes: []string{"*"}, Enabled: true})
	schema := json.RawMessage(`{"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}`)
	h.eventType(topics.EventType{Name: "order.created", Schema: schema, Validation: topics.ValidationEnforce})
	h.eventType(topics.EventType{Name: "order.noted", Schema: schema, Validation: topics.ValidationWarn})
	h.eventType(topics.EventType{Name: "order.free", Schema: schema, Validation: topics.ValidationOff})
	cfg := h.config("schema")
	cfg.UnknownEventTypes = catalog.UnknownReject
	run := h.start(cfg)

	ev := func(id, typ, data string) []byte { return event(t, topics.Event{ID: id, Type: typ, Key: id}, data) }
	values := [][]byte{
		ev("valid", "order.created", `{"id": 1}`),
		ev("refused", "order.created", `{"id": "one"}`),
		ev("warned", "order.noted", `{"id": "one"}`),
		ev("unchecked", "order.free", `{}`),
		ev("unknown", "order.other", `{"id": 1}`),
	}
	published := h.publish(values...)
	h.waitDispatched(published)

	got := map[string]int{}
	for _, d := range h.deliveries() {
		got[d.EventID]++
	}
	for _, id := range []string{"valid", "warned", "unchecked"} {
		if got[id] != 1 {
			t.Errorf("event %s: %d deliveries, want 1", id, got[id])
		}
	}
	if got["refused"]+got["unknown"] != 0 {
		t.Errorf("refused events delivered: %v", got)
	}
	dead := map[[2]int64]topics.DeadLetter{}
	for _, r := range h.readAll(h.names().DLQ(), true) {
		dl, err := topics.DecodeDeadLetter(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		dead[[2]int64{int64(dl.Source.Partition), dl.Source.Offset}] = dl
	}
	for i, want := range map[int]string{1: "at /id: type:", 4: "order.other is not in the catalog"} {
		dl, ok := dead[[2]int64{int64(published[i].Partition), published[i].Offset}]
		if !ok {
			t.Fatalf("event %d not dead-lettered (%d dead letters)", i, len(dead))
		}
		if dl.FailureCategory != topics.FailureSchema || !strings.Contains(dl.Reason, want) || string(dl.RawEvent) != string(values[i]) {
			t.Errorf("event %d: dead letter %s %q %q, want schema, %q and the exact value", i, dl.FailureCategory, dl.Reason, dl.RawEvent, want)
		}
	}
	if len(dead) != 2 {
		t.Errorf("%d dead letters, want 2", len(dead))
	}

	// Relaxed, the schema takes the same data: the events polled after
	// the change are judged by it.
	h.eventType(topics.EventType{Name: "order.created", Version: 2, Validation: topics.ValidationEnforce,
		Schema: json.RawMessage(`{"type": "object", "properties": {"id": {"type": ["integer", "string"]}}}`)})
	published = h.publish(ev("again", "order.created", `{"id": "one"}`))
	h.waitDispatched(published)
	n := 0
	for _, d := range h.deliveries() {
		if d.EventID == "again" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("after the schema was relaxed: %d deliveries, want 1", n)
	}
	if err := run.Stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestValidationMetrics: a committed batch counts each checked event
// under its type and outcome, unknown types under "", and the schema's
// dead letters under their category.
func TestValidationMetrics(t *testing.T) {
	m := newMetrics(prometheus.NewRegistry())
	counts := validationCounts{}
	batch := []polled{
		{ev: topics.Event{Type: "a"}, verdict: catalog.Verdict{Outcome: catalog.OutcomeValid, Known: true}},
		{ev: topics.Event{Type: "a"}, verdict: catalog.Verdict{Outcome: catalog.OutcomeInvalid, Known: true, Refuse: true}},
		{ev: topics.Event{Type: "zzz"}, verdict: catalog.Verdict{Outcome: catalog.OutcomeUnknown}},
		{ev: topics.Event{Type: "b"}, verdict: catalog.Verdict{Outcome: catalog.OutcomeUnchecked}},
		{bad: topics.ErrInvalid},
	}
	var d dead
	for i := range batch {
		counts.add(&batch[i])
		if batch[i].refused() {
			d.add(&batch[i])
		}
	}
	m.transaction(true, len(batch), 1, d, 0, time.Millisecond)
	m.validated(counts)
	for _, c := range []struct {
		typ, outcome string
		want         float64
	}{{"a", "valid", 1}, {"a", "invalid", 1}, {"", "unknown", 1}, {"b", "unchecked", 0}} {
		if got := testutil.ToFloat64(m.validation.WithLabelValues(c.typ, c.outcome)); got != c.want {
			t.Errorf("events_validated_total{type=%q,outcome=%q} = %v, want %v", c.typ, c.outcome, got, c.want)
		}
	}
	if got := testutil.ToFloat64(m.schemaDead); got != 1 {
		t.Errorf("dlq_total{category=schema} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.deadLetters); got != 1 {
		t.Errorf("dlq_total{category=invalid_record} = %v, want 1", got)
	}
}
