package topics

import (
	"encoding/base64"
	"strconv"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/twmb/franz-go/pkg/kgo"
)

// HeaderNotBefore is set on retry-tier records: the unix milliseconds before
// which the record must not be released. It duplicates Delivery.NotBefore so
// the retrier can hold records back without decoding them.
const HeaderNotBefore = "webhooks-not-before"

// HeaderDeliverAt is set on the tier records of a scheduled delivery: the
// unix milliseconds of its deliver_at, which Delivery.DeliverAt duplicates.
// The retrier releases a record whose deliver_at is still ahead into its
// next wait (a hop) instead of to redeliveries, and reads it without
// decoding the record.
const HeaderDeliverAt = "webhooks-deliver-at"

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
	// DeliverAt is the event's deliver_at when its deliveries were
	// scheduled: the first attempt is not made before it.
	DeliverAt time.Time `json:"deliver_at,omitzero"`
}

// Encode renders the record value: what json.Marshal renders, written
// field by field (one of these per delivery and per retry; reflection was
// about a twelfth of the dispatcher's CPU). Strings are quoted without
// json.Marshal's HTML escapes, which decodeDeliveryFast then reads too.
func (d *Delivery) Encode() []byte {
	b := make([]byte, 0, 256+base64.StdEncoding.EncodedLen(len(d.Data)))
	b = appendField(b, `{"subscription_id":`, d.SubscriptionID)
	b = appendField(b, `,"event_id":`, d.EventID)
	b = appendField(b, `,"event_type":`, d.EventType)
	if d.Tenant != "" {
		b = appendField(b, `,"tenant":`, d.Tenant)
	}
	if d.Key != "" {
		b = appendField(b, `,"key":`, d.Key)
	}
	b = appendField(b, `,"timestamp":`, d.Timestamp)
	b = append(b, `,"data":`...)
	if d.Data == nil {
		b = append(b, "null"...)
	} else {
		b = append(base64.StdEncoding.AppendEncode(append(b, '"'), d.Data), '"')
	}
	b = strconv.AppendInt(append(b, `,"attempt":`...), int64(d.Attempt), 10)
	b = appendTime(append(b, `,"published_at":`...), d.PublishedAt)
	if !d.FirstAttemptAt.IsZero() {
		b = appendTime(append(b, `,"first_attempt_at":`...), d.FirstAttemptAt)
	}
	if !d.NotBefore.IsZero() {
		b = appendTime(append(b, `,"not_before":`...), d.NotBefore)
	}
	if d.Priority != "" {
		b = appendField(b, `,"priority":`, d.Priority)
	}
	if !d.DeliverAt.IsZero() {
		b = appendTime(append(b, `,"deliver_at":`...), d.DeliverAt)
	}
	return append(b, '}')
}

// DecodeDelivery decodes and validates a delivery value: what Encode
// writes by a direct scan (decodeDeliveryFast), anything else with
// decodeStrict.
func DecodeDelivery(b []byte) (Delivery, error) {
	d, ok := decodeDeliveryFast(b)
	if !ok {
		d = Delivery{}
		if err := decodeStrict("delivery", b, &d); err != nil {
			return Delivery{}, err
		}
	}
	return d, d.Validate()
}

// decodeDeliveryFast decodes a delivery as Encode writes it: no
// whitespace, each member once and by its exact name, strings of printable
// ASCII without escapes, data in padded base64, attempt a plain positive
// integer, times in UTC ("Z"). It is false for anything else, which
// decodeStrict then decodes or refuses; what it decodes is what
// decodeStrict would (FuzzDecodeDelivery holds it to that). It costs the
// deliverer about a third of decodeStrict's time.
func decodeDeliveryFast(b []byte) (d Delivery, ok bool) {
	if len(b) < 2 || b[0] != '{' {
		return d, false
	}
	var seen uint16
	for i := 1; ; {
		var name []byte
		if name, i, ok = fastString(b, i); !ok || i >= len(b) || b[i] != ':' {
			return d, false
		}
		i++
		member := -1
		for k, m := range deliveryMembers {
			if string(name) == m {
				member = k
				break
			}
		}
		texts := [...]*string{&d.SubscriptionID, &d.EventID, &d.EventType, &d.Tenant, &d.Key, &d.Timestamp, &d.Priority}
		times := [...]*time.Time{&d.PublishedAt, &d.FirstAttemptAt, &d.NotBefore, &d.DeliverAt}
		switch {
		case member < 0:
			return d, false
		case member < len(texts):
			*texts[member], i, ok = fastText(b, i)
		case member < len(texts)+len(times):
			*times[member-len(texts)], i, ok = fastTime(b, i)
		case deliveryMembers[member] == "attempt":
			d.Attempt, i, ok = fastInt(b, i)
		default: // data
			var v []byte
			if v, i, ok = fastString(b, i); ok {
				d.Data, ok = fastBase64(v)
			}
		}
		bit := uint16(1) << member
		if !ok || seen&bit != 0 || i >= len(b) {
			return d, false
		}
		seen |= bit
		switch b[i] {
		case ',':
			i++
		case '}':
			return d, i == len(b)-1
		default:
			return d, false
		}
	}
}

// validJSON is json.Valid (RFC 8259: any names, repeated or not, any
// bytes in strings) at under half its cost: 0.8 µs against 0.3 µs for a
// 200-byte value, on every delivery (FuzzValidJSON holds the two equal).
func validJSON(b []byte) bool {
	return jsontext.Value(b).IsValid(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
}

// deliveryMembers are a delivery's JSON names as decodeDeliveryFast takes
// them: its text fields, its times, then attempt and data.
var deliveryMembers = [...]string{"subscription_id", "event_id", "event_type", "tenant", "key", "timestamp", "priority",
	"published_at", "first_attempt_at", "not_before", "deliver_at", "attempt", "data"}

// fastString is the string at b[i:], without its quotes, when it is
// printable ASCII without escapes, and the index after it.
func fastString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c >= 0x7f || c == '\\':
			return nil, i, false
		}
	}
	return nil, i, false
}

// fastText is fastString as a string.
func fastText(b []byte, i int) (string, int, bool) {
	v, i, ok := fastString(b, i)
	return string(v), i, ok
}

// fastBase64 decodes padded standard base64, as decodeStrict does.
func fastBase64(v []byte) ([]byte, bool) {
	out := make([]byte, base64.StdEncoding.DecodedLen(len(v)))
	n, err := base64.StdEncoding.Decode(out, v)
	if err != nil || len(v) != base64.StdEncoding.EncodedLen(n) {
		return nil, false
	}
	return out[:n], true
}

// fastInt is the integer at b[i:] when it is 1 to 18 digits without a
// leading zero, and the index after it.
func fastInt(b []byte, i int) (int, int, bool) {
	n, j := 0, i
	for ; j < len(b) && j-i < 18 && b[j] >= '0' && b[j] <= '9'; j++ {
		n = n*10 + int(b[j]-'0')
	}
	if j == i || b[i] == '0' || j < len(b) && b[j] >= '0' && b[j] <= '9' {
		return 0, i, false
	}
	return n, j, true
}

// fastTime is the time at b[i:] when it is in UTC ("Z") and passes the
// checks decodeStrict adds to time.Time's (two-digit hour, a period before
// the fraction).
func fastTime(b []byte, i int) (time.Time, int, bool) {
	v, j, ok := fastString(b, i)
	var t time.Time
	if !ok || len(v) < len("2006-01-02T15:04:05Z") || v[len(v)-1] != 'Z' || v[len("2006-01-02T")+1] == ':' ||
		v[len("2006-01-02T15:04:05")] == ',' || t.UnmarshalText(v) != nil {
		return time.Time{}, i, false
	}
	return t, j, true
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
	if !validJSON(d.Data) {
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
func NotBeforeOf(r *kgo.Record) (t time.Time, ok bool) { return msHeader(r, HeaderNotBefore) }

// DeliverAtOf reads HeaderDeliverAt from a record; ok is false when absent
// or malformed (a record that is no scheduled delivery's wait).
func DeliverAtOf(r *kgo.Record) (t time.Time, ok bool) { return msHeader(r, HeaderDeliverAt) }

// msHeader reads a header of unix milliseconds.
func msHeader(r *kgo.Record, key string) (t time.Time, ok bool) {
	for _, h := range r.Headers {
		if h.Key == key {
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
	d := deliveryOf(r, ev, sub)
	topic := names.DeliveriesFor(ev.Priority)
	if sub.Ordering == OrderingKey {
		topic = names.Deliveries()
	}
	return &kgo.Record{Topic: topic, Key: []byte(sub.DeliveryKey(ev)), Value: d.Encode()}
}

// ScheduledRecord is the record an event record scheduled for deliverAt
// makes for one subscription, at now (before deliverAt): the first
// attempt's delivery, carrying deliverAt, in its first wait (Names.Wait).
// The retrier releases it into its next waits, and to redeliveries at
// deliverAt; it is then attempted as a due retry, and, for an ordered
// subscription, takes its place in its key's order (ADR 0035).
func ScheduledRecord(r *kgo.Record, ev *Event, sub *Subscription, names Names, deliverAt, now time.Time) *kgo.Record {
	d := deliveryOf(r, ev, sub)
	d.DeliverAt = DueAt(deliverAt, 0).UTC() // whole milliseconds, as in HeaderDeliverAt
	return names.Wait([]byte(sub.DeliveryKey(ev)), &d, now)
}

// Wait is the record that holds a scheduled delivery d (DeliverAt set) from
// now until its next release: in the tier of the time left, due as Hop
// says, with HeaderNotBefore and HeaderDeliverAt. d.NotBefore is set.
func (n Names) Wait(key []byte, d *Delivery, now time.Time) *kgo.Record {
	tier, due := n.Hop(now, d.DeliverAt)
	d.NotBefore = due
	return &kgo.Record{Topic: n.Retry(tier), Key: key, Value: d.Encode(), Headers: []kgo.RecordHeader{
		NotBeforeHeader(due),
		{Key: HeaderDeliverAt, Value: []byte(strconv.FormatInt(d.DeliverAt.UnixMilli(), 10))},
	}}
}

// Hop is the next wait of a delivery scheduled for deliverAt, from now:
// the tier of the time left (TierFor), and when the record is due there.
// It waits there until deliverAt, as a retry whose delay falls between
// two tiers waits in the lower one, unless more than twice the longest
// tier is left: then it is due one longest tier from now, and the retrier
// makes it wait again. So no record waits in a tier longer than the next
// tier's delay (twice the longest's), and never less than the tier's
// delay unless less than the shortest tier is left: the retrier's look-ahead
// windows and horizons see it as a retry, and a wait of days neither holds
// a window nor outlives a tier's retention.
func (n Names) Hop(now, deliverAt time.Time) (tier time.Duration, due time.Time) {
	left := deliverAt.Sub(now)
	tier = n.TierFor(left)
	if len(n.Tiers) > 0 && tier == n.Tiers[len(n.Tiers)-1] && left > 2*tier {
		return tier, DueAt(now, tier)
	}
	return tier, deliverAt
}

// deliveryOf is the first attempt's delivery of an event record to one
// subscription.
func deliveryOf(r *kgo.Record, ev *Event, sub *Subscription) Delivery {
	ts := ev.CreatedAt
	if ts == "" {
		ts = r.Timestamp.UTC().Format(time.RFC3339Nano)
	}
	return Delivery{
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
}
