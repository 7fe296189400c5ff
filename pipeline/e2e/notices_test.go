package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// TestOperationalEvents: with two deliverers, a tenant's webhook.*
// subscription is told once of each dead letter of its failing endpoint,
// once that its breaker opened, and once that it recovered; the failing
// endpoint is never sent news of itself, and another tenant hears nothing.
func TestOperationalEvents(t *testing.T) {
	e := newEnv(t)
	url, prefix := redistest.Shared(t)
	e.withRedis(url, prefix, map[string]string{"WEBHOOKS_BREAKER_MIN_CALLS": "3", "WEBHOOKS_BREAKER_SLEEP": "2s",
		"WEBHOOKS_BREAKER_PROBES": "1"})
	r := newReceiver(t)
	var bad atomic.Int32 // the status "bad" answers
	bad.Store(http.StatusBadRequest)
	r.answer(func(q request, _ http.ResponseWriter) int {
		if q.Sub == "bad" {
			return int(bad.Load())
		}
		return http.StatusNoContent
	})
	for _, s := range []topics.Subscription{
		{ID: "bad", Tenant: "acme", URL: r.url("bad"), EventTypes: []string{"*"}, Enabled: true, RetrySchedule: []string{"1s", "1s", "1s", "1s", "1s", "1s"}},
		{ID: "ops", Tenant: "acme", URL: r.url("ops"), EventTypes: []string{"webhook.*"}, Enabled: true},
		{ID: "globex-ops", Tenant: "globex", URL: r.url("globex-ops"), EventTypes: []string{"webhook.*"}, Enabled: true},
	} {
		r.trust(e.subscribe(s))
	}
	e.startDispatcher()
	e.startDeliverer()
	e.startDeliverer()
	e.startRetrier()

	notices := func(sub string) map[string][]topics.Notice {
		out := map[string][]topics.Notice{}
		for _, q := range r.got() {
			if q.Sub != sub {
				continue
			}
			var n topics.Notice
			if err := json.Unmarshal(q.Data, &n); err != nil {
				t.Fatalf("%s: %v", q.Body, err)
			}
			out[q.Type] = append(out[q.Type], n)
		}
		return out
	}
	for i := range 2 {
		e.publish(topics.Event{ID: fmt.Sprintf("evt_refused_%d", i), Type: "order.created", Tenant: "acme", Data: json.RawMessage(`{}`)})
	}
	wait(t, 60*time.Second, "two webhook.message.dead", func() bool { return len(notices("ops")[topics.NoticeMessageDead]) >= 2 })
	for _, n := range notices("ops")[topics.NoticeMessageDead] {
		if n.SubscriptionID != "bad" || n.FailureCategory != topics.FailurePermanent4xx || n.Attempts != 1 {
			t.Errorf("webhook.message.dead %+v", n)
		}
	}

	bad.Store(http.StatusInternalServerError)
	for i := range 4 {
		e.publish(topics.Event{ID: fmt.Sprintf("evt_failing_%d", i), Type: "order.created", Tenant: "acme", Data: json.RawMessage(`{}`)})
	}
	wait(t, 60*time.Second, "webhook.endpoint.failing", func() bool { return len(notices("ops")[topics.NoticeFailing]) >= 1 })
	bad.Store(http.StatusOK)
	wait(t, 60*time.Second, "webhook.endpoint.recovered", func() bool { return len(notices("ops")[topics.NoticeRecovered]) >= 1 })
	wait(t, 60*time.Second, "the failing events delivered", func() bool {
		n := 0
		for _, q := range r.got() {
			if q.Sub == "bad" {
				n++
			}
		}
		return n == 4
	})

	got := notices("ops")
	if len(got[topics.NoticeMessageDead]) != 2 || len(got[topics.NoticeFailing]) != 1 || len(got[topics.NoticeRecovered]) != 1 {
		t.Errorf("ops was told %d dead, %d failing, %d recovered; want 2, 1, 1",
			len(got[topics.NoticeMessageDead]), len(got[topics.NoticeFailing]), len(got[topics.NoticeRecovered]))
	}
	for _, q := range r.requests() {
		if q.Sub == "bad" && topics.IsNotice(q.Type) {
			t.Errorf("bad was sent %s about itself", q.Type)
		}
		if q.Sub == "globex-ops" {
			t.Errorf("another tenant's subscription was sent %s", q.Type)
		}
	}
	r.checkSignatures(t)
}
