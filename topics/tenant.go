package topics

import (
	"math"
	"time"
)

// Tenant is the value on the tenants topic (compacted, keyed by the
// tenant): what one tenant may use, overriding the defaults
// (WEBHOOKS_TENANT_RATE, WEBHOOKS_TENANT_MAX_SUBSCRIPTIONS,
// WEBHOOKS_CLICKHOUSE_RETENTION_DAYS). A nil field keeps the default; zero
// means unlimited. A tombstone drops every override of the tenant.
type Tenant struct {
	ID string `json:"id"`
	// RatePerS is the most deliveries per second of the tenant's events,
	// across all deliverer replicas.
	RatePerS *float64 `json:"rate_per_s,omitempty"`
	// MaxSubscriptions is the most subscriptions the tenant may have.
	MaxSubscriptions *int `json:"max_subscriptions,omitempty"`
	// RetentionDays is how many days the tenant's attempts stay in
	// ClickHouse (webhookctl clickhouse expire enforces it); 0 keeps them
	// for good.
	RetentionDays *int      `json:"retention_days,omitempty"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Rate is the tenant's delivery rate given the default: 0 is unlimited.
func (t *Tenant) Rate(def float64) float64 {
	if t == nil || t.RatePerS == nil {
		return def
	}
	return *t.RatePerS
}

// SubscriptionLimit is the tenant's most subscriptions given the default:
// 0 is unlimited.
func (t *Tenant) SubscriptionLimit(def int) int {
	if t == nil || t.MaxSubscriptions == nil {
		return def
	}
	return *t.MaxSubscriptions
}

// Retention is the tenant's retention in days given the default: 0 keeps
// its attempts for good.
func (t *Tenant) Retention(def int) int {
	if t == nil || t.RetentionDays == nil {
		return def
	}
	return *t.RetentionDays
}

// Validate checks the id and the limits.
func (t *Tenant) Validate() error {
	if err := checkID("tenant", "id", t.ID); err != nil {
		return err
	}
	if r := t.RatePerS; r != nil && (*r < 0 || math.IsNaN(*r) || math.IsInf(*r, 0)) {
		return invalid("tenant", "rate_per_s", "must be a finite number, not negative (0: unlimited)")
	}
	if m := t.MaxSubscriptions; m != nil && *m < 0 {
		return invalid("tenant", "max_subscriptions", "must not be negative (0: unlimited)")
	}
	if d := t.RetentionDays; d != nil && *d < 0 {
		return invalid("tenant", "retention_days", "must not be negative (0: kept for good)")
	}
	return nil
}

// Encode renders the record value.
func (t *Tenant) Encode() []byte {
	return encodeRecord(t)
}

// DecodeTenant decodes and validates a tenants value strictly.
func DecodeTenant(b []byte) (Tenant, error) {
	var t Tenant
	if err := decodeStrict("tenant", b, &t); err != nil {
		return Tenant{}, err
	}
	return t, t.Validate()
}
