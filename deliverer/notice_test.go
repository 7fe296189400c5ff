package deliverer

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestNoticesOfOutcomes: a disabled subscription is announced, with an id
// that is the same when the outcome is produced again; a dead-lettered
// operational event is not (two failing endpoints would tell each other
// forever); without WEBHOOKS_OPERATIONAL_EVENTS nothing is.
func TestNoticesOfOutcomes(t *testing.T) {
	names := topics.Names{Prefix: "webhooks."}
	d := &deliverer{cfg: Config{Notices: true}, names: names}
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	sub := topics.Subscription{ID: "sub_1", Tenant: "acme", URL: "https://a.example/hooks?token=x", EventTypes: []string{"*"},
		Secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", DisabledReason: "endpoint answered 410 Gone", UpdatedAt: at}
	disabled := &kgo.Record{Topic: names.Subscriptions(), Key: []byte(sub.ID), Value: sub.EncodeWith(nil)}
	deadNotice := topics.DeadLetter{Delivery: &topics.Delivery{SubscriptionID: "sub_2", EventID: "ntf_x", EventType: topics.NoticeFailing,
		Attempt: 1}, Reason: "endpoint answered 400", FailureCategory: topics.FailurePermanent4xx, Attempts: 1, DeadAt: at}
	recs := []*kgo.Record{disabled, {Topic: names.DLQ(), Key: []byte("sub_2/ntf_x"), Value: deadNotice.Encode()}}

	out := d.notices(recs)
	if len(out) != 1 || out[0].Topic != names.Events() || string(out[0].Key) != sub.ID {
		t.Fatalf("notices %v, want one on the events topic keyed by the subscription", out)
	}
	var ev topics.Event
	if err := json.Unmarshal(out[0].Value, &ev); err != nil {
		t.Fatal(err)
	}
	var n topics.Notice
	if err := json.Unmarshal(ev.Data, &n); err != nil {
		t.Fatal(err)
	}
	if ev.Type != topics.NoticeDisabled || ev.Tenant != "acme" || ev.IdempotencyKey != ev.ID || n.Reason != sub.DisabledReason ||
		n.URL != topics.RedactURL(sub.URL) || n.SubscriptionID != sub.ID {
		t.Fatalf("notice %+v with %+v", ev, n)
	}
	if again := d.notices(recs); string(again[0].Value) != string(out[0].Value) {
		t.Fatalf("produced again, the notice differs:\n%s\n%s", again[0].Value, out[0].Value)
	}
	d.cfg.Notices = false
	if out := d.notices(recs); len(out) != 0 {
		t.Fatalf("notices with operational events off: %v", out)
	}
}
