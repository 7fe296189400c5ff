package topics

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// HeaderNotBefore is set on retry-tier records: the unix milliseconds before
// which the record must not be released. It duplicates Delivery.NotBefore so
// the retrier can hold records back without decoding them.
const HeaderNotBefore = "webhooks-not-before"

// Delivery is the value on the deliveries, retry and dlq topics: one event
// for one subscription. The subscription's URL, secret and headers are not
// copied: the deliverer reads the current ones from the subscription table.
type Delivery struct {
	SubscriptionID string `json:"subscription_id"`
	EventID        string `json:"event_id"`
	EventType      string `json:"event_type"`
	Tenant         string `json:"tenant,omitempty"`
	// Key is the event's ordering key, empty when it had none.
	Key string `json:"key,omitempty"`
	// Timestamp is the event's created_at, or its publish time when it had
	// none; it is the "timestamp" of the request body.
	Timestamp string `json:"timestamp"`
	// Data is the event's data, byte for byte as published (base64 in this
	// JSON so no re-encoding can alter it).
	Data []byte `json:"data"`
	// Attempt is the 1-based number of the attempt this record is for.
	Attempt int `json:"attempt"`
	// PublishedAt is the event record's timestamp on the events topic.
	PublishedAt time.Time `json:"published_at"`
	// FirstAttemptAt is set once the first attempt was made.
	FirstAttemptAt time.Time `json:"first_attempt_at,omitzero"`
	// NotBefore is when a record in a retry tier becomes due.
	NotBefore time.Time `json:"not_before,omitzero"`
	// Priority is the event's priority, empty for normal.
	Priority string `json:"priority,omitempty"`
}

// Encode renders the record value.
func (d *Delivery) Encode() []byte {
	b, err := json.Marshal(d)
	if err != nil { // only unsupported types fail; Delivery has none
		panic(err)
	}
	return b
}

// DecodeDelivery decodes and validates a delivery value.
func DecodeDelivery(b []byte) (Delivery, error) {
	var d Delivery
	if err := decodeStrict("delivery", b, &d); err != nil {
		return Delivery{}, err
	}
	return d, d.Validate()
}

// Validate checks the fields the deliverer relies on.
func (d *Delivery) Validate() error {
	if err := checkID("delivery", "subscription_id", d.SubscriptionID); err != nil {
		return err
	}
	if err := checkID("delivery", "event_id", d.EventID); err != nil {
		return err
	}
	if !isType(d.EventType) {
		return invalid("delivery", "event_type", "%q is not a valid type", d.EventType)
	}
	if d.Attempt < 1 {
		return invalid("delivery", "attempt", "must be at least 1")
	}
	if !json.Valid(d.Data) {
		return invalid("delivery", "data", "not valid JSON")
	}
	return ValidatePriority("delivery", d.Priority)
}

// DueAt is now+delay rounded up to the millisecond, the precision of
// HeaderNotBefore, so the header and the JSON time agree and nothing is
// released before the time an attempt record announced.
func DueAt(now time.Time, delay time.Duration) time.Time {
	t := now.Add(delay)
	if r := t.Truncate(time.Millisecond); r.Before(t) {
		return r.Add(time.Millisecond)
	}
	return t
}

// NotBeforeHeader renders t for HeaderNotBefore.
func NotBeforeHeader(t time.Time) kgo.RecordHeader {
	return kgo.RecordHeader{Key: HeaderNotBefore, Value: []byte(strconv.FormatInt(t.UnixMilli(), 10))}
}

// NotBeforeOf reads HeaderNotBefore from a record; ok is false when absent
// or malformed.
func NotBeforeOf(r *kgo.Record) (t time.Time, ok bool) {
	for _, h := range r.Headers {
		if h.Key == HeaderNotBefore {
			ms, err := strconv.ParseInt(string(h.Value), 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			return time.UnixMilli(ms), true
		}
	}
	return time.Time{}, false
}

// DeliveryRecord is the record an event record makes for one subscription:
// the first attempt, on the deliveries topic of the event's priority,
// keyed by Subscription.DeliveryKey so that the subscription's deliveries
// share a partition and a key's stay in order. An ordered subscription's
// deliveries all go to the normal topic, whatever their priority: per-key
// order needs one queue per key, and order beats priority. The dispatcher and replays build it
// with this one function: a replayed delivery is the record the
// dispatcher made.
func DeliveryRecord(r *kgo.Record, ev *Event, sub *Subscription, names Names) *kgo.Record {
	ts := ev.CreatedAt
	if ts == "" {
		ts = r.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	d := Delivery{
		SubscriptionID: sub.ID,
		EventID:        ev.ID,
		EventType:      ev.Type,
		Tenant:         ev.Tenant,
		Key:            ev.Key,
		Timestamp:      ts,
		Data:           ev.Data,
		Attempt:        1,
		PublishedAt:    r.Timestamp.UTC(),
		Priority:       ev.Priority,
	}
	topic := names.DeliveriesFor(ev.Priority)
	if sub.Ordering == OrderingKey {
		topic = names.Deliveries()
	}
	return &kgo.Record{Topic: topic, Key: []byte(sub.DeliveryKey(ev)), Value: d.Encode()}
}
