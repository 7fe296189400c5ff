package api

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/recorder/chtest"
	"github.com/hookpipe/hookpipe/recorder/retention"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestMessageExpunge, on ClickHouse 18.16: another tenant's key and an
// unknown event get 404; the tenant's key expunges its event: the answer
// says what went and what stays until when, the samples are cleared (the
// other event's kept), and from then on the message log shows neither
// payload nor sample, a retry is refused (410), a replay skips it, and the
// dead-letter list hides its data and a redrive skips it.
func TestMessageExpunge(t *testing.T) {
	t.Parallel()
	r, t0 := recordedAgo(t, time.Minute, func(t0 time.Time) [][]any {
		return [][]any{
			{"x1", "evt_x", "order.created", "sub_x", "acme", uint32(1), "retry", "server_error", uint16(500), 2.0, t0, "endpoint answered 500", t0, t0, `{"echo":"4111 1111"}`},
			{"x2", "evt_x", "order.created", "sub_x", "acme", uint32(2), "success", "", uint16(200), 2.0, t0.Add(time.Second), "", epoch, t0, `{"echo":"4111 1111"}`},
			{"y1", "evt_y", "order.created", "sub_x", "acme", uint32(1), "success", "", uint16(200), 2.0, t0, "", epoch, t0, "kept"},
		}
	})
	c := r.c
	var recs []*kgo.Record
	for _, id := range []string{"evt_x", "evt_y"} {
		b, err := json.Marshal(topics.Event{ID: id, Type: "order.created", Tenant: "acme", Data: []byte(`{"card":"4111 1111"}`)})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: c.names.Events(), Value: b, Timestamp: t0})
	}
	dl := topics.DeadLetter{Delivery: &topics.Delivery{SubscriptionID: "sub_x", EventID: "evt_x", EventType: "order.created", Tenant: "acme",
		Timestamp: t0.Format(time.RFC3339), Data: []byte(`{"card":"4111 1111"}`), Attempt: 3}, Reason: "endpoint answered 503",
		FailureCategory: topics.FailureExhausted, Attempts: 3, DeadAt: t0, Source: topics.Source{Topic: c.names.Deliveries()}}
	recs = append(recs, &kgo.Record{Topic: c.names.DLQ(), Key: []byte("sub_x/evt_x"), Value: dl.Encode()})
	if err := c.cl.ProduceSync(testkit.Ctx(t, 10*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"id": "sub_x", "tenant": "acme",
		"url": "https://a.example/", "event_types": []string{"*"}}, nil)
	var m service.Message
	r.must(http.StatusOK, "GET", "/v1/messages/evt_x", adminKey, nil, &m)
	if m.Event == nil || m.ExpungedAt != nil {
		t.Fatalf("before the expunge: event %+v, expunged %v", m.Event, m.ExpungedAt)
	}

	acme := r.tenantKey("acme")
	r.must(http.StatusNotFound, "POST", "/v1/messages/evt_x/expunge", r.tenantKey("globex"), nil, nil)
	r.must(http.StatusNotFound, "POST", "/v1/messages/evt_none/expunge", adminKey, nil, nil)
	var x Expunged
	r.must(http.StatusOK, "POST", "/v1/messages/evt_x/expunge", acme, nil, &x)
	if x.EventID != "evt_x" || x.Tenant != "acme" || x.SamplesCleared != 2 || len(x.Removed) == 0 || len(x.Remains) == 0 ||
		!x.EventsTopicUntil.Equal(t0.Add(7*24*time.Hour)) {
		t.Fatalf("expunge: %+v", x)
	}
	if err := retention.Wait(chtest.Ctx(t, time.Minute), c.ch, r.s.cfg.Database, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var samples uint64
	if err := c.ch.QueryRow(chtest.Ctx(t, 30*time.Second), "SELECT countIf(response_sample != '') FROM "+r.s.cfg.Database+".attempts").Scan(&samples); err != nil {
		t.Fatal(err)
	}
	if samples != 1 {
		t.Errorf("%d response samples left, want evt_y's", samples)
	}

	m = service.Message{}
	r.must(http.StatusOK, "GET", "/v1/messages/evt_x", acme, nil, &m)
	if m.Event != nil || m.ExpungedAt == nil || !m.ExpungedAt.Equal(x.ExpungedAt) {
		t.Fatalf("after the expunge: event %+v, expunged %v", m.Event, m.ExpungedAt)
	}
	for _, a := range m.Deliveries[0].Attempts {
		if a.ResponseSample != "" {
			t.Errorf("attempt %d still shows its sample %q", a.Attempt, a.ResponseSample)
		}
	}
	var y service.Message
	r.must(http.StatusOK, "GET", "/v1/messages/evt_y", acme, nil, &y)
	if y.Event == nil || y.Deliveries[0].Attempts[0].ResponseSample != "kept" {
		t.Fatalf("evt_y: %+v", y)
	}
	if a := r.do("POST", "/v1/messages/evt_x/retry", acme, map[string]any{"subscription_id": "sub_x"}); a.status != http.StatusGone {
		t.Errorf("retry of an expunged event: %d %s", a.status, a.body)
	}

	var dls struct {
		Data []service.DeadLetter `json:"data"`
	}
	r.must(http.StatusOK, "GET", "/v1/dlq", adminKey, nil, &dls)
	if len(dls.Data) != 1 || !dls.Data[0].Expunged || dls.Data[0].Data != nil {
		t.Fatalf("dead letters: %+v", dls.Data)
	}

	before := len(c.records(c.names.Deliveries()))
	var o service.Operation
	r.must(http.StatusAccepted, "POST", "/v1/replays", adminKey, map[string]any{"subscription_id": "sub_x", "since": t0.Add(-time.Second), "rate": 1000}, &o)
	o = r.finished(o.ID, adminKey)
	if o.State != topics.OperationDone || o.Sent != 1 || o.Skipped != 1 {
		t.Fatalf("replay: %+v, want evt_y sent and evt_x skipped", o)
	}
	r.must(http.StatusAccepted, "POST", "/v1/dlq/redrive", adminKey, map[string]any{"subscription_id": "sub_x", "rate": 1000}, &o)
	o = r.finished(o.ID, adminKey)
	if o.State != topics.OperationDone || o.Sent != 0 || o.Skipped != 1 {
		t.Fatalf("redrive: %+v, want the expunged dead letter skipped", o)
	}
	for _, rec := range c.records(c.names.Deliveries())[before:] {
		if d, err := topics.DecodeDelivery(rec.Value); err != nil || d.EventID != "evt_y" {
			t.Errorf("sent %s (%v), want evt_y only", rec.Value, err)
		}
	}
}
