package api

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// deadLetters writes n dead letters of sub (of tenant) to the dlq, dead an
// hour ago, with event ids prefix-0 on; and returns their records.
func (c *cluster) deadLetters(n int, prefix, sub, tenant string) []*kgo.Record {
	c.t.Helper()
	at := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		id := fmt.Sprintf("%s-%d", prefix, i)
		dl := topics.DeadLetter{Delivery: &topics.Delivery{SubscriptionID: sub, EventID: id, EventType: "order.created", Tenant: tenant,
			Timestamp: at.Format(time.RFC3339), Data: []byte(`{"n":1}`), Attempt: 3}, Reason: "endpoint answered 503",
			FailureCategory: "exhausted", Attempts: 3, DeadAt: at, Source: topics.Source{Topic: c.names.Deliveries()}}
		recs[i] = &kgo.Record{Topic: c.names.DLQ(), Key: []byte(sub + "/" + id), Value: dl.Encode()}
	}
	if err := c.cl.ProduceSync(testkit.Ctx(c.t, 10*time.Second), recs...).FirstErr(); err != nil {
		c.t.Fatal(err)
	}
	return recs
}

// deliveries counts the deliveries on the deliveries topic by event id.
func (c *cluster) deliveries() map[string]int {
	c.t.Helper()
	out := map[string]int{}
	for _, r := range c.records(c.names.Deliveries()) {
		d, err := topics.DecodeDelivery(r.Value)
		if err != nil {
			c.t.Fatalf("delivery %s: %v", r.Value, err)
		}
		out[d.EventID]++
	}
	return out
}

// finished waits until operation id is finished, as replica r shows it.
func (r *replica) finished(id, key string) service.Operation {
	r.t.Helper()
	var o service.Operation
	testkit.WaitEvery(r.t, 50*time.Millisecond, 60*time.Second, "operation "+id+" finished", func() bool {
		r.must(http.StatusOK, "GET", "/v1/operations/"+id, key, nil, &o)
		return o.State == topics.OperationDone || o.State == topics.OperationFailed
	})
	return o
}

// TestRedriveOperation: a redrive operation started on one replica is
// carried out by the one running operations, followed on any, sends every
// matching dead letter back once, and a second redrive of the same dead
// letters sends nothing; a tenant key redrives its tenant's only and cannot
// see another tenant's operation.
func TestRedriveOperation(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	one, two := c.replica(), c.replica()
	c.deadLetters(25, "acme", "sub_a", "acme")
	c.deadLetters(5, "globex", "sub_g", "globex")
	undecodable := &kgo.Record{Topic: c.names.DLQ(), Key: []byte("junk"), Value: []byte("not json")}
	if err := c.cl.ProduceSync(testkit.Ctx(t, 10*time.Second), undecodable).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var o service.Operation
	one.must(http.StatusAccepted, "POST", "/v1/dlq/redrive", adminKey, map[string]any{"rate": 20}, &o)
	if o.State != topics.OperationPending || o.Kind != topics.OperationRedrive {
		t.Fatalf("started %+v", o)
	}
	o = two.finished(o.ID, adminKey)
	if o.State != topics.OperationDone || o.Matched != 31 || o.Sent != 30 || o.Failed != 1 || o.Done != 31 || o.Progress != 1 {
		t.Fatalf("redrive of 30 dead letters and an undecodable one: %+v", o)
	}
	sent := c.deliveries()
	if len(sent) != 30 {
		t.Fatalf("%d dead letters sent back, want 30", len(sent))
	}
	for id, n := range sent {
		if n != 1 {
			t.Errorf("%s sent back %d times", id, n)
		}
	}

	one.must(http.StatusAccepted, "POST", "/v1/dlq/redrive", adminKey, map[string]any{}, &o)
	o = one.finished(o.ID, adminKey)
	if o.State != topics.OperationDone || o.Sent != 0 || o.Skipped != 30 {
		t.Fatalf("second redrive: %+v, want nothing sent, 30 skipped as already redriven", o)
	}
	if n := len(c.records(c.names.Deliveries())); n != 30 {
		t.Fatalf("%d deliveries after the second redrive, want 30", n)
	}

	c.deadLetters(3, "acme-later", "sub_a", "acme")
	c.deadLetters(2, "globex-later", "sub_g", "globex")
	acme, globex := one.tenantKey("acme"), one.tenantKey("globex")
	one.must(http.StatusAccepted, "POST", "/v1/dlq/redrive", acme, map[string]any{}, &o)
	o = two.finished(o.ID, acme)
	if o.State != topics.OperationDone || o.Sent != 3 || o.Tenant != "acme" {
		t.Fatalf("acme's redrive: %+v", o)
	}
	sent = c.deliveries()
	for i := range 2 {
		if id := fmt.Sprintf("globex-later-%d", i); sent[id] != 0 {
			t.Errorf("acme's redrive sent globex's %s", id)
		}
	}
	if a := two.do("GET", "/v1/operations/"+o.ID, globex, nil); a.status != http.StatusNotFound {
		t.Errorf("globex reads acme's operation: %d %s", a.status, a.body)
	}
	var l service.ListOperationsOutput
	two.must(http.StatusOK, "GET", "/v1/operations", globex, nil, &l.Body)
	if len(l.Body.Data) != 0 {
		t.Errorf("globex lists %d operations, none of them its own", len(l.Body.Data))
	}
	two.must(http.StatusOK, "GET", "/v1/operations", adminKey, nil, &l.Body)
	if len(l.Body.Data) != 3 || l.Body.Data[0].ID != o.ID {
		t.Errorf("the admin lists %d operations (newest %s), want 3, newest %s", len(l.Body.Data), l.Body.Data[0].ID, o.ID)
	}
	if a := one.do("POST", "/v1/dlq/redrive", acme, map[string]any{"subscription_id": "sub_g"}); a.status != http.StatusNotFound {
		t.Errorf("acme redrives globex's subscription: %d %s", a.status, a.body)
	}
}

// TestRedriveResumes: a redrive whose runner stops half way is resumed by
// the next runner where the last committed batch left it, and every dead
// letter is sent back exactly once.
func TestRedriveResumes(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	first := c.replica()
	c.deadLetters(40, "evt", "sub_a", "acme")
	var o service.Operation
	// Batches of 4 a second: ten seconds in all.
	first.must(http.StatusAccepted, "POST", "/v1/dlq/redrive", adminKey, map[string]any{"rate": 4}, &o)
	testkit.WaitEvery(t, 20*time.Millisecond, 30*time.Second, "the redrive under way", func() bool {
		var now service.Operation
		first.must(http.StatusOK, "GET", "/v1/operations/"+o.ID, adminKey, nil, &now)
		return now.Sent > 0
	})
	first.stop()
	var stopped service.Operation
	second := c.replica()
	second.must(http.StatusOK, "GET", "/v1/operations/"+o.ID, adminKey, nil, &stopped)
	if stopped.State != topics.OperationRunning {
		t.Fatalf("the redrive is not running half way when its runner stopped: %+v", stopped)
	}
	o = second.finished(o.ID, adminKey)
	if o.State != topics.OperationDone || o.Sent != 40 || o.Matched != 40 {
		t.Fatalf("resumed redrive: %+v, want 40 of 40 sent", o)
	}
	sent := c.deliveries()
	if len(sent) != 40 {
		t.Fatalf("%d dead letters sent back, want 40", len(sent))
	}
	for id, n := range sent {
		if n != 1 {
			t.Errorf("%s sent back %d times", id, n)
		}
	}
}

// TestReplayOperation: a replay sends the events of its time range that
// its subscription takes (and its type filter keeps) as new deliveries,
// once; bad replays are refused before anything is written.
func TestReplayOperation(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	since := time.Now().UTC().Add(-time.Minute)
	var sub, other service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"tenant": "acme", "url": "https://a.example/",
		"event_types": []string{"order.*"}}, &sub)
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"tenant": "globex", "url": "https://g.example/",
		"event_types": []string{"*"}}, &other)
	var events []any
	for i := range 12 {
		typ, tenant := "order.created", "acme"
		switch i % 4 {
		case 1:
			typ = "invoice.paid"
		case 2:
			typ = "order.cancelled"
		case 3:
			tenant = "globex"
		}
		events = append(events, map[string]any{"id": fmt.Sprintf("evt_%d", i), "type": typ, "tenant": tenant, "key": fmt.Sprint(i), "data": i})
	}
	r.must(http.StatusAccepted, "POST", "/v1/events/batch", adminKey, map[string]any{"events": events}, nil)
	if err := c.cl.ProduceSync(context.Background(), &kgo.Record{Topic: c.names.Events(), Value: []byte("{garbage")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	before := len(c.records(c.names.Deliveries()))

	var o service.Operation
	r.must(http.StatusAccepted, "POST", "/v1/replays", adminKey, map[string]any{"subscription_id": sub.ID, "since": since, "rate": 1000}, &o)
	o = r.finished(o.ID, adminKey)
	if o.State != topics.OperationDone || o.Matched != 13 || o.Sent != 6 || o.Skipped != 6 || o.Failed != 1 {
		t.Fatalf("replay of 13 events, 6 for the subscription: %+v", o)
	}
	r.must(http.StatusAccepted, "POST", "/v1/replays", r.tenantKey("acme"), map[string]any{"subscription_id": sub.ID, "since": since,
		"event_type": "order.cancelled"}, &o)
	o = r.finished(o.ID, adminKey)
	if o.State != topics.OperationDone || o.Sent != 3 {
		t.Fatalf("replay of order.cancelled: %+v, want 3 sent", o)
	}
	got := map[string]int{}
	for _, rec := range c.records(c.names.Deliveries())[before:] {
		d, err := topics.DecodeDelivery(rec.Value)
		if err != nil || d.SubscriptionID != sub.ID {
			t.Fatalf("replayed %s (%v), want a delivery to %s", rec.Value, err, sub.ID)
		}
		got[d.EventID]++
	}
	for i := range 12 {
		want := 0
		switch i % 4 {
		case 0:
			want = 1
		case 2:
			want = 2
		}
		if id := fmt.Sprintf("evt_%d", i); got[id] != want {
			t.Errorf("%s replayed %d times, want %d", id, got[id], want)
		}
	}

	ops := len(c.records(c.names.Operations()))
	r.must(http.StatusOK, "POST", "/v1/subscriptions/"+other.ID+"/disable", adminKey, map[string]any{"reason": "test"}, nil)
	for _, tc := range []struct {
		name   string
		key    string
		body   map[string]any
		status int
	}{
		{"no subscription", adminKey, map[string]any{"since": since}, http.StatusUnprocessableEntity},
		{"missing subscription", adminKey, map[string]any{"subscription_id": "sub_nope", "since": since}, http.StatusNotFound},
		{"another tenant's", r.tenantKey("globex"), map[string]any{"subscription_id": sub.ID, "since": since}, http.StatusNotFound},
		{"disabled", adminKey, map[string]any{"subscription_id": other.ID, "since": since}, http.StatusConflict},
		{"no since", adminKey, map[string]any{"subscription_id": sub.ID}, http.StatusUnprocessableEntity},
		{"since after until", adminKey, map[string]any{"subscription_id": sub.ID, "since": since, "until": since.Add(-time.Second)}, http.StatusUnprocessableEntity},
		{"bad type", adminKey, map[string]any{"subscription_id": sub.ID, "since": since, "event_type": "a b"}, http.StatusUnprocessableEntity},
		{"zero rate", adminKey, map[string]any{"subscription_id": sub.ID, "since": since, "rate": 0}, http.StatusUnprocessableEntity},
		{"rate too high", adminKey, map[string]any{"subscription_id": sub.ID, "since": since, "rate": 20000}, http.StatusUnprocessableEntity},
	} {
		if a := r.do("POST", "/v1/replays", tc.key, tc.body); a.status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, a.status, a.body, tc.status)
		}
	}
	if n := len(c.records(c.names.Operations())); n != ops {
		t.Errorf("%d operations written by refused replays", n-ops)
	}
}

// TestRedriveSelected: a redrive naming dead letters sends those back and
// no other, however many pass its filters.
func TestRedriveSelected(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	r := c.replica()
	c.deadLetters(5, "evt", "sub_a", "acme")
	var l service.ListDLQOutput
	r.must(http.StatusOK, "GET", "/v1/dlq", adminKey, nil, &l.Body)
	if len(l.Body.Data) != 5 {
		t.Fatalf("%d dead letters listed, want 5", len(l.Body.Data))
	}
	picked := []service.DeadLetter{l.Body.Data[1], l.Body.Data[3]}
	var refs []service.DeadLetterRef
	for _, d := range picked {
		refs = append(refs, service.DeadLetterRef{Partition: d.Partition, Offset: d.Offset})
	}
	var o service.Operation
	r.must(http.StatusAccepted, "POST", "/v1/dlq/redrive", adminKey, map[string]any{"dead_letters": refs}, &o)
	o = r.finished(o.ID, adminKey)
	if o.State != topics.OperationDone || o.Sent != 2 || o.Matched != 2 || o.DeadLetters != 2 {
		t.Fatalf("redrive of two named dead letters: %+v", o)
	}
	sent := c.deliveries()
	if len(sent) != 2 || sent[picked[0].EventID] != 1 || sent[picked[1].EventID] != 1 {
		t.Fatalf("sent back %v, want %s and %s once", sent, picked[0].EventID, picked[1].EventID)
	}
	r.must(http.StatusOK, "GET", "/v1/dlq", adminKey, nil, &l.Body)
	if len(l.Body.Data) != 3 {
		t.Fatalf("%d dead letters left, want 3", len(l.Body.Data))
	}
	r.must(http.StatusUnprocessableEntity, "POST", "/v1/dlq/redrive", adminKey, map[string]any{"dead_letters": []any{map[string]any{"partition": -1, "offset": 0}}}, nil)
}
