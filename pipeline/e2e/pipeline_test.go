package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestFanOut: every event reaches exactly the subscriptions whose patterns
// and tenant match, each once, and nothing else is delivered.
func TestFanOut(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	subs := []topics.Subscription{
		{ID: "orders-acme", Tenant: "acme", EventTypes: []string{"order.*"}},
		{ID: "everything", EventTypes: []string{"*"}},
		{ID: "invoice-paid", EventTypes: []string{"invoice.paid"}},
		{ID: "orders-globex", Tenant: "globex", EventTypes: []string{"order.*"}},
		{ID: "two-patterns", EventTypes: []string{"order.created", "order.*"}},
		{ID: "disabled", EventTypes: []string{"*"}, Enabled: false},
	}
	for _, s := range subs {
		enabled := s.ID != "disabled"
		s.URL, s.Enabled = r.url(s.ID), enabled
		r.trust(e.subscribe(s))
	}
	e.startDispatcher()
	e.startDeliverer()
	evs := []topics.Event{
		{ID: "e1", Type: "order.created", Tenant: "acme", Data: json.RawMessage(`{"n":1}`)},
		{ID: "e2", Type: "invoice.paid", Tenant: "acme", Data: json.RawMessage(`{"n":2}`)},
		{ID: "e3", Type: "order.created", Tenant: "globex", Data: json.RawMessage(`{"n":3}`)},
		{ID: "e4", Type: "user.signup", Data: json.RawMessage(`{"n":4}`)},
		{ID: "e5", Type: "order", Tenant: "acme", Data: json.RawMessage(`{"n":5}`)},
	}
	e.publish(evs...)
	want := map[string]int{
		"orders-acme/e1": 1, "everything/e1": 1, "two-patterns/e1": 1,
		"everything/e2": 1, "invoice-paid/e2": 1,
		"everything/e3": 1, "orders-globex/e3": 1, "two-patterns/e3": 1,
		"everything/e4": 1,
		"everything/e5": 1,
	}
	wait(t, 60*time.Second, "every expected delivery", func() bool { return r.count() >= len(want) })
	wait(t, 30*time.Second, "the deliverer to commit everything", e.drained)
	got := r.pairs()
	for k := range want {
		if got[k] != 1 {
			t.Errorf("%s delivered %d times, want once", k, got[k])
		}
	}
	for k := range got {
		if want[k] == 0 {
			t.Errorf("unexpected delivery %s", k)
		}
	}
	r.checkSignatures(t)
}

// TestRequestFormat: body, headers and data bytes are exactly as docs/design.md
// section 3 says; signatures verify with the official library; during a
// secret rotation both secrets' signatures are present and each verifies.
func TestRequestFormat(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	s := e.subscribe(topics.Subscription{ID: "fmt", URL: r.url("fmt"), EventTypes: []string{"*"}, Enabled: true,
		Headers: map[string]string{"X-Team": "payments"}})
	r.trust(s)
	e.startDispatcher()
	e.startDeliverer()

	data := "{ \"b\" :2,\n \"a\": \"\\u00e9t\u00e9\" }"
	// Raw bytes: json.Marshal would compact the data before it is published.
	e.produceEvent([]byte(`{"id":"evt_fmt","type":"order.created","created_at":"2026-11-22T10:00:00Z","data":` + data + `}`))
	wait(t, 60*time.Second, "the first delivery", func() bool { return r.count() == 1 })
	q := r.got()[0]
	wantBody := `{"id":"evt_fmt","type":"order.created","timestamp":"2026-11-22T10:00:00Z","data":` + data + `}`
	if string(q.Body) != wantBody {
		t.Errorf("body\n got %s\nwant %s", q.Body, wantBody)
	}
	if got := q.Header.Get("webhook-id"); got != "evt_fmt" {
		t.Errorf("webhook-id = %q", got)
	}
	if got := q.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("content-type = %q", got)
	}
	if got := q.Header.Get("X-Team"); got != "payments" {
		t.Errorf("X-Team = %q", got)
	}
	ts, err := strconv.ParseInt(q.Header.Get("webhook-timestamp"), 10, 64)
	if err != nil || time.Since(time.Unix(ts, 0)).Abs() > time.Minute {
		t.Errorf("webhook-timestamp %q is not the time of the attempt", q.Header.Get("webhook-timestamp"))
	}

	// Rotate: the new secret signs, the old one keeps signing during grace.
	// The deliverer sees the rotation when its subscription table does, a
	// moment after the subscriptions topic has it, so until then it signs
	// with the old secret alone; the endpoint keeps the old one, as an
	// endpoint does until it learns the new one. Events go out one at a
	// time until one carries two signatures.
	old := s.Secret
	s.PreviousSecret, s.PreviousSecretUntil = old, time.Now().Add(topics.RotationGrace)
	if s.Secret, err = topics.NewSecret(); err != nil {
		t.Fatal(err)
	}
	e.subscribe(s)
	base, published := r.count(), 0
	wait(t, 60*time.Second, "a delivery signed with both secrets after rotation", func() bool {
		got := r.got()
		if len(got) < base+published {
			return false // the last one published is on its way
		}
		if published > 0 {
			q = got[base+published-1]
			if len(bytes.Fields([]byte(q.Header.Get("webhook-signature")))) == 2 {
				return true
			}
		}
		published++
		e.publish(topics.Event{ID: fmt.Sprintf("evt_rot%d", published), Type: "order.created", Data: json.RawMessage(`{}`)})
		return false
	})
	for _, secret := range []string{s.Secret, old} {
		wh, _ := standardwebhooks.NewWebhook(secret)
		if err := wh.Verify(q.Body, q.Header); err != nil {
			t.Errorf("signature with one of the two secrets does not verify: %v", err)
		}
	}
	r.checkSignatures(t)
}

// TestPerKeyOrderUnderConcurrency: deliveries of one key arrive in publish
// order even though many keys are in flight at once.
func TestPerKeyOrderUnderConcurrency(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	r.delay = 3 * time.Millisecond
	r.trust(e.subscribe(topics.Subscription{ID: "ordered", URL: r.url("ordered"), EventTypes: []string{"*"},
		Enabled: true, Ordering: topics.OrderingKey}))
	e.startDispatcher()
	e.startDeliverer()
	const keys, perKey = 8, 40
	var evs []topics.Event
	for i := range perKey {
		for k := range keys {
			evs = append(evs, topics.Event{ID: fmt.Sprintf("k%d-%03d", k, i), Type: "order.updated",
				Key: fmt.Sprintf("order-%d", k), Data: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i))})
		}
	}
	e.publish(evs...)
	wait(t, 90*time.Second, "every delivery", func() bool { return r.count() >= keys*perKey })
	seen := map[string][]string{}
	for _, q := range r.got() {
		k := q.ID[:2]
		seen[k] = append(seen[k], q.ID)
	}
	for k, ids := range seen {
		if !slices.IsSorted(ids) {
			t.Errorf("key %s arrived out of order: %v", k, ids)
		}
	}
	r.mu.Lock()
	maxFlight := r.maxFlight
	r.mu.Unlock()
	if maxFlight < 2 {
		t.Errorf("at most %d request in flight: keys were not delivered concurrently", maxFlight)
	}
	r.checkSignatures(t)
}

// TestSubscriptionCreatedJustBeforePublish: an event produced right after
// the subscription write was acknowledged is matched, every time.
func TestSubscriptionCreatedJustBeforePublish(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	e.startDispatcher()
	e.startDeliverer()
	const n = 10
	for i := range n {
		id := fmt.Sprintf("late-%d", i)
		r.trust(e.subscribe(topics.Subscription{ID: id, URL: r.url(id), EventTypes: []string{"late." + strconv.Itoa(i)}, Enabled: true}))
		e.publish(topics.Event{ID: "evt-" + id, Type: "late." + strconv.Itoa(i), Data: json.RawMessage(`{}`)})
	}
	wait(t, 60*time.Second, "a delivery for every new subscription", func() bool { return r.count() >= n })
	for i := range n {
		k := fmt.Sprintf("late-%d/evt-late-%d", i, i)
		if r.pairs()[k] != 1 {
			t.Errorf("%s delivered %d times", k, r.pairs()[k])
		}
	}
}

// TestMalformedEventsInTheMiddle: bad events go to the dlq with a reason;
// the good ones around them are delivered.
func TestMalformedEventsInTheMiddle(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	r.trust(e.subscribe(topics.Subscription{ID: "all", URL: r.url("all"), EventTypes: []string{"*"}, Enabled: true}))
	e.startDispatcher()
	e.startDeliverer()
	good := func(id string) []byte {
		return []byte(`{"id":"` + id + `","type":"ok.event","data":{}}`)
	}
	bad := [][]byte{
		[]byte(`not json at all`),
		[]byte(`{"id":"x","type":"ok.event"}`),
		[]byte(`{"id":"y","type":"bad type!","data":{}}`),
		[]byte(`{"id":"z","type":"ok.event","data":{},"extra":1}`),
		nil,
	}
	for i, b := range bad {
		e.produceEvent(good(fmt.Sprintf("good-%d", i)))
		e.produceEvent(b)
	}
	e.produceEvent(good("good-last"))
	wait(t, 60*time.Second, "every good event", func() bool { return r.count() >= len(bad)+1 })
	recs := e.consume(e.names.DLQ(), 30*time.Second, func(recs []*kgo.Record) bool { return len(recs) >= len(bad) })
	for _, rec := range recs {
		dl, err := topics.DecodeDeadLetter(rec.Value)
		if err != nil {
			t.Fatalf("dlq record: %v", err)
		}
		if dl.Reason == "" || dl.FailureCategory != topics.FailureInvalid || dl.Source.Topic != e.names.Events() {
			t.Errorf("dead letter without reason or source: %+v", dl)
		}
	}
	if len(recs) != len(bad) {
		t.Errorf("%d dead letters, want %d", len(recs), len(bad))
	}
}
