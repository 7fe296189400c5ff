package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestScheduledDelivery: through the API, a tenant publishes an event with
// deliver_at 5 s ahead, another with the same deliver_at that it cancels
// at once, and one without: the first arrives no earlier than its
// deliver_at (the deadline waited on is generous; only "never before" is
// asserted), the cancelled one never, recorded as an attempt skipped with
// category cancelled, the unscheduled one at once. The dispatcher recorded
// both scheduled deliveries as scheduled, due at their deliver_at.
func TestScheduledDelivery(t *testing.T) {
	e := newEnv(t)
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	base := e.startAPI()
	r := newReceiver(t)

	var key struct{ Key string }
	call(t, "POST", base+"/v1/api-keys", apiAdminKey, map[string]string{"name": "acme", "tenant": "acme"}, &key, http.StatusCreated)
	for _, id := range []string{"sub_plain", "sub_ordered"} {
		ordering := topics.OrderingNone
		if id == "sub_ordered" {
			ordering = topics.OrderingKey
		}
		var sub struct{ ID, Secret string }
		call(t, "POST", base+"/v1/subscriptions", key.Key, map[string]any{"id": id, "url": r.url(id),
			"event_types": []string{"*"}, "ordering": ordering}, &sub, http.StatusCreated)
		r.trust(topics.Subscription{ID: sub.ID, Secret: sub.Secret})
	}

	deliverAt := time.Now().Add(5 * time.Second).UTC()
	call(t, "POST", base+"/v1/events/batch", key.Key, map[string]any{"events": []any{
		map[string]any{"id": "evt_later", "type": "order.created", "key": "o1", "data": 1, "deliver_at": deliverAt},
		map[string]any{"id": "evt_off", "type": "order.created", "key": "o2", "data": 2, "deliver_at": deliverAt},
		map[string]any{"id": "evt_now", "type": "order.created", "key": "o3", "data": 3},
	}}, nil, http.StatusAccepted)
	call(t, "POST", base+"/v1/events/evt_off/cancel", key.Key, nil, nil, http.StatusAccepted)

	wait(t, 60*time.Second, "evt_later at both subscriptions", func() bool {
		return r.pairs()["sub_plain/evt_later"] > 0 && r.pairs()["sub_ordered/evt_later"] > 0
	})
	for _, q := range r.attempts("evt_later") {
		if q.At.Before(deliverAt) {
			t.Errorf("%s received evt_later at %v, before its deliver_at %v", q.Sub, q.At, deliverAt)
		}
	}
	if r.pairs()["sub_plain/evt_now"] != 1 || r.pairs()["sub_ordered/evt_now"] != 1 {
		t.Errorf("evt_now delivered %v, want once to each subscription", r.pairs())
	}

	outcomes := map[string]topics.Attempt{}
	e.consume(e.names.Attempts(), 60*time.Second, func(recs []*kgo.Record) bool {
		for _, rec := range recs {
			if a, err := topics.DecodeAttempt(rec.Value); err == nil {
				outcomes[a.SubscriptionID+"/"+a.EventID+"/"+a.Outcome] = a
			}
		}
		return len(outcomes) > 0 && outcomes["sub_plain/evt_off/skipped"].AttemptID != "" && outcomes["sub_ordered/evt_off/skipped"].AttemptID != ""
	})
	for _, sub := range []string{"sub_plain", "sub_ordered"} {
		if a := outcomes[sub+"/evt_off/skipped"]; a.FailureCategory != topics.FailureCancelled || a.Tenant != "acme" {
			t.Errorf("%s: evt_off's last record %+v, want skipped, cancelled", sub, a)
		}
		for _, ev := range []string{"evt_later", "evt_off"} {
			if a := outcomes[sub+"/"+ev+"/scheduled"]; !a.NextAttemptAt.Equal(topics.DueAt(deliverAt, 0)) {
				t.Errorf("%s: %s scheduled record %+v, want due at %v", sub, ev, a, deliverAt)
			}
		}
	}
	wait(t, 30*time.Second, "the deliverer to commit everything", e.drained)
	if n := len(r.attempts("evt_off")); n != 0 {
		t.Errorf("the cancelled evt_off was delivered %d times", n)
	}
	r.checkSignatures(t)
}
