package topics

import (
	"strings"
	"testing"
)

// TestTenantRetention: retention_days round-trips, nil keeps the default,
// 0 keeps the rows for good, and a negative one is refused naming the
// field.
func TestTenantRetention(t *testing.T) {
	var none *Tenant
	if got := none.Retention(90); got != 90 {
		t.Errorf("no tenant record: %d, want the default", got)
	}
	if got := (&Tenant{ID: "acme"}).Retention(90); got != 90 {
		t.Errorf("no override: %d, want the default", got)
	}
	days := 30
	in := Tenant{ID: "acme", RetentionDays: &days}
	out, err := DecodeTenant(in.Encode())
	if err != nil || out.RetentionDays == nil || out.Retention(90) != 30 {
		t.Fatalf("round trip of %s: %+v, %v", in.Encode(), out, err)
	}
	if !strings.Contains(string(in.Encode()), `"retention_days":30`) {
		t.Errorf("encoded as %s", in.Encode())
	}
	zero := 0
	if got := (&Tenant{ID: "acme", RetentionDays: &zero}).Retention(90); got != 0 {
		t.Errorf("kept for good: %d, want 0", got)
	}
	neg := -1
	if err := (&Tenant{ID: "acme", RetentionDays: &neg}).Validate(); err == nil || !strings.Contains(err.Error(), "retention_days") {
		t.Errorf("negative retention: %v", err)
	}
	if _, err := DecodeTenant([]byte(`{"id":"acme","retention_days":-5,"updated_at":"2026-01-01T00:00:00Z"}`)); err == nil {
		t.Error("a negative retention_days decoded")
	}
}
