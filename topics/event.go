package topics

import (
	"bytes"
	"encoding/json"
	"time"
	"unicode/utf8"
)

// DefaultMaxEventBytes is the largest event value accepted by default.
const DefaultMaxEventBytes = 256 << 10

// isType reports whether s is in the grammar of event types,
// [a-zA-Z0-9_.-]+ (a loop, not a regexp: it runs for every event and
// delivery).
func isType(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return s != ""
}

// Event is the value producers write to the events topic.
type Event struct {
	ID             string `json:"id"`
	Type           string `json:"type"`
	Tenant         string `json:"tenant,omitempty"`
	Key            string `json:"key,omitempty"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	CreatedAt      string `json:"created_at,omitempty"`
	// Priority is the event's class: PriorityHigh, PriorityNormal (also
	// when empty) or PriorityLow.
	Priority string `json:"priority,omitempty"`
	// DeliverAt, RFC 3339, schedules the event's deliveries: none is
	// attempted before it (at most MaxScheduleAhead after the event's
	// publish time). Empty: at once.
	DeliverAt string          `json:"deliver_at,omitempty"`
	Data      json.RawMessage `json:"data"`
}

// Priorities of an event. The deliverer serves high before normal before
// low as a share, not a strict order (ADR 0019).
const (
	PriorityHigh   = "high"
	PriorityNormal = "normal"
	PriorityLow    = "low"
)

// ValidatePriority accepts "", "high", "normal" and "low", naming record
// and field in its error.
func ValidatePriority(record, p string) error {
	switch p {
	case "", PriorityHigh, PriorityNormal, PriorityLow:
		return nil
	}
	return invalid(record, "priority", "%q is not high, normal or low", p)
}

// DecodeEvent decodes and validates an event value. maxBytes <= 0 means
// DefaultMaxEventBytes. Data keeps the exact bytes the producer published.
func DecodeEvent(b []byte, maxBytes int) (Event, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxEventBytes
	}
	if len(b) > maxBytes {
		return Event{}, invalid("event", "", "%d bytes is over the %d byte limit", len(b), maxBytes)
	}
	// RFC 8259 section 8.1: JSON exchanged between systems is UTF-8. The
	// decoder would replace invalid bytes in strings, but data is kept
	// byte for byte, and strict receivers could not parse it.
	if !utf8.Valid(b) {
		return Event{}, invalid("event", "", "not valid UTF-8 (RFC 8259 section 8.1)")
	}
	var e Event
	if err := decodeStrict("event", b, &e); err != nil {
		return Event{}, err
	}
	return e, e.Validate()
}

// Validate checks the required fields and their grammar.
func (e Event) Validate() error {
	if err := checkID("event", "id", e.ID); err != nil {
		return err
	}
	if e.Type == "" {
		return invalid("event", "type", "required")
	}
	if len(e.Type) > 255 || !isType(e.Type) {
		return invalid("event", "type", "%q does not match [a-zA-Z0-9_.-]{1,255}", e.Type)
	}
	if e.Tenant != "" {
		if err := checkID("event", "tenant", e.Tenant); err != nil {
			return err
		}
	}
	if len(e.Key) > 1024 {
		return invalid("event", "key", "longer than 1024 bytes")
	}
	if len(e.IdempotencyKey) > 1024 {
		return invalid("event", "idempotency_key", "longer than 1024 bytes")
	}
	if e.CreatedAt != "" {
		if _, err := time.Parse(time.RFC3339Nano, e.CreatedAt); err != nil {
			return invalid("event", "created_at", "not an RFC 3339 time: %q", e.CreatedAt)
		}
	}
	if err := ValidatePriority("event", e.Priority); err != nil {
		return err
	}
	if _, err := e.Schedule(); err != nil {
		return err
	}
	if len(bytes.TrimSpace(e.Data)) == 0 || bytes.Equal(bytes.TrimSpace(e.Data), []byte("null")) {
		return invalid("event", "data", "required")
	}
	return nil
}

// MaxScheduleAhead is how far after its publish time an event's
// deliver_at may be: no longer than the events topic keeps it (a replay
// store of 7 days).
const MaxScheduleAhead = 7 * day

// Schedule is the event's deliver_at rounded up to the millisecond (the
// precision of the retry tiers' headers), zero when it has none.
func (e *Event) Schedule() (time.Time, error) {
	if e.DeliverAt == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, e.DeliverAt)
	if err != nil {
		return time.Time{}, invalid("event", "deliver_at", "not an RFC 3339 time: %q", e.DeliverAt)
	}
	return DueAt(t, 0).UTC(), nil
}

// CheckSchedule judges the event's deliver_at against ref, its publish
// time: more than MaxScheduleAhead after it, or more than skew before it,
// is refused. The API passes its clock and ScheduleSkew; the dispatcher the
// record's timestamp and DispatchSkew, so that a backlog is judged as it
// was published, whenever it is dispatched.
func (e *Event) CheckSchedule(ref time.Time, skew time.Duration) error {
	at, err := e.Schedule()
	if err != nil || at.IsZero() {
		return err
	}
	if at.After(ref.Add(MaxScheduleAhead)) {
		return invalid("event", "deliver_at", "%s is more than 7 days after %s", e.DeliverAt, ref.UTC().Format(time.RFC3339))
	}
	if at.Before(ref.Add(-skew)) {
		return invalid("event", "deliver_at", "%s is in the past (before %s, more than %s ago)", e.DeliverAt, ref.UTC().Format(time.RFC3339), skew)
	}
	return nil
}

// ScheduleSkew is how far in the past the API takes a deliver_at (the
// caller's clock may be behind): such an event is delivered at once.
const ScheduleSkew = time.Minute

// DispatchSkew is how far before an event record's timestamp the
// dispatcher takes a deliver_at: more than ScheduleSkew, so that an event
// the API took is never refused because its record was written a moment
// after the API judged it; producers' clocks get the same leeway.
const DispatchSkew = 5 * time.Minute

// ValidateID checks an id (of an event, a subscription, a tenant, a key)
// as the codecs do, naming record and field in its error.
func ValidateID(record, field, s string) error { return checkID(record, field, s) }

// checkID accepts 1-255 printable ASCII characters without spaces or '/',
// which keeps ids safe in HTTP headers and in delivery keys.
func checkID(record, field, s string) error {
	if s == "" {
		return invalid(record, field, "required")
	}
	if len(s) > 255 {
		return invalid(record, field, "longer than 255 bytes")
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '/' {
			return invalid(record, field, "%q: only printable ASCII without spaces or '/'", s)
		}
	}
	return nil
}
