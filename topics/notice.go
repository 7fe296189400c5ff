package topics

import (
	"encoding/json"
	"strings"
	"time"
)

// Operational events: the pipeline publishes them to the events topic in a
// subscription's tenant, keyed by that subscription's id, when its
// endpoint starts failing (its circuit breaker opened), recovers (closed),
// is disabled, or one of its deliveries is dead-lettered. A tenant receives
// them with an ordinary subscription (event types "webhook.*"); a
// subscription never receives those about itself (Subscription.Matches).
const (
	NoticePrefix      = "webhook."
	NoticeFailing     = "webhook.endpoint.failing"
	NoticeRecovered   = "webhook.endpoint.recovered"
	NoticeDisabled    = "webhook.endpoint.disabled"
	NoticeMessageDead = "webhook.message.dead"
)

// Notice is the data of an operational event.
type Notice struct {
	SubscriptionID string `json:"subscription_id"`
	// URL is the endpoint's, its credentials and query redacted.
	URL string `json:"url"`
	// Reason says why, in words: the breaker's counts, why it was
	// disabled, why the delivery died.
	Reason string `json:"reason,omitempty"`
	// FailureCategory is the dead letter's (webhook.message.dead) or the
	// last failure's.
	FailureCategory string `json:"failure_category,omitempty"`
	// EventID, EventType and Attempts are the dead delivery's
	// (webhook.message.dead).
	EventID   string    `json:"event_id,omitempty"`
	EventType string    `json:"event_type,omitempty"`
	Attempts  int       `json:"attempts,omitempty"`
	At        time.Time `json:"at"`
}

// IsNotice reports whether an event type is an operational event's.
func IsNotice(typ string) bool { return strings.HasPrefix(typ, NoticePrefix) }

// NoticeEvent is the operational event of type typ about sub, with the id
// given: derived from what it reports, so that a copy produced again after
// a crash carries the same id (and idempotency key: the dispatcher drops
// it within its dedup window, and an endpoint sees the same webhook-id).
func NoticeEvent(id, typ string, sub *Subscription, n Notice) Event {
	n.SubscriptionID, n.URL = sub.ID, RedactURL(sub.URL)
	data, err := json.Marshal(n)
	if err != nil {
		panic(err) // Notice has no type that fails
	}
	return Event{ID: id, Type: typ, Tenant: sub.Tenant, Key: sub.ID, IdempotencyKey: id,
		CreatedAt: n.At.UTC().Format(time.RFC3339Nano), Data: data}
}
