package topics

import (
	"time"
)

// CancellationRetention is how long the cancellations topic keeps a
// record: longer than any event may be scheduled ahead (MaxScheduleAhead),
// with a week to spare for a backlog of events dispatched late.
const CancellationRetention = 2 * MaxScheduleAhead

// Cancellation is the value on the cancellations topic: a scheduled
// event's deliveries are not to be attempted. It is keyed by
// CancellationKey, so that a tenant's cancellation applies to its own
// events only and never writes over an administrator's or another
// tenant's.
type Cancellation struct {
	EventID string `json:"event_id"`
	// Tenant is the canceller's: an administrator's (empty) cancels the
	// event whatever its tenant, a tenant's only its own tenant's event.
	Tenant      string    `json:"tenant,omitempty"`
	CancelledAt time.Time `json:"cancelled_at"`
}

// CancellationKey is the key of tenant's cancellation of event eventID
// ("" for an administrator): neither contains '/'.
func CancellationKey(tenant, eventID string) string { return tenant + "/" + eventID }

// Key is the record key of c.
func (c *Cancellation) Key() string { return CancellationKey(c.Tenant, c.EventID) }

// Encode renders the record value.
func (c *Cancellation) Encode() []byte {
	return encodeRecord(c)
}

// DecodeCancellation decodes and validates a cancellations value strictly;
// key is its record key, which must be the value's.
func DecodeCancellation(key string, b []byte) (Cancellation, error) {
	var c Cancellation
	if err := decodeStrict("cancellation", b, &c); err != nil {
		return Cancellation{}, err
	}
	if err := checkID("cancellation", "event_id", c.EventID); err != nil {
		return Cancellation{}, err
	}
	if c.Tenant != "" {
		if err := checkID("cancellation", "tenant", c.Tenant); err != nil {
			return Cancellation{}, err
		}
	}
	if key != c.Key() {
		return Cancellation{}, invalid("cancellation", "", "key %q is not %q", key, c.Key())
	}
	return c, nil
}

// CancellationKeys are the keys of the cancellations that cancel d: an
// administrator's, and its event's tenant's.
func CancellationKeys(d *Delivery) []string {
	keys := []string{CancellationKey("", d.EventID)}
	if d.Tenant != "" {
		keys = append(keys, CancellationKey(d.Tenant, d.EventID))
	}
	return keys
}
