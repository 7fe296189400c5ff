package main

import (
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

// TestTenantQuotas: set-quota writes a tenant's overrides (a number,
// unlimited, or back to the default, which leaves a tombstone when nothing
// is overridden); list shows them; creating a subscription past the
// tenant's limit (its own, else WEBHOOKS_TENANT_MAX_SUBSCRIPTIONS), or
// moving one into a full tenant, is refused with a clear error.
func TestTenantQuotas(t *testing.T) {
	h := newHarness(t, true)
	h.env[envTenantMaxSubscriptions] = "1"
	var set []topics.Tenant
	h.json(&set, "tenants", "set-quota", "acme", "--rate", "50", "--max-subscriptions", "2")
	if len(set) != 1 || *set[0].RatePerS != 50 || *set[0].MaxSubscriptions != 2 {
		t.Fatalf("set-quota printed %+v", set)
	}
	h.json(&set, "tenants", "set-quota", "acme", "--rate", "unlimited")
	if *set[0].RatePerS != 0 || *set[0].MaxSubscriptions != 2 {
		t.Fatalf("after --rate unlimited: %+v", set[0])
	}
	h.ok("tenants", "set-quota", "quiet", "--rate", "5")
	h.ok("tenants", "set-quota", "quiet", "--rate", "default")
	var list []topics.Tenant
	h.json(&list, "tenants", "list")
	if len(list) != 1 || list[0].ID != "acme" {
		t.Fatalf("list %+v, want acme only (quiet is back to the defaults)", list)
	}
	if out := h.ok("tenants", "list"); !strings.Contains(out, "unlimited") || !strings.Contains(out, "acme") {
		t.Fatalf("list as text:\n%s", out)
	}
	h.fails(2, "tenants", "set-quota", "acme")
	h.fails(2, "tenants", "set-quota", "acme", "--rate", "fast")
	h.fails(2, "tenants", "set-quota", "acme", "--max-subscriptions", "-3")
	h.fails(2, "tenants", "set-quota", "not a tenant", "--rate", "5")

	h.create("--url", "https://a.example/", "--events", "*", "--tenant", "acme")
	h.create("--url", "https://a.example/", "--events", "*", "--tenant", "acme")
	if msg := h.fails(1, "subscriptions", "create", "--url", "https://a.example/", "--events", "*", "--tenant", "acme"); !strings.Contains(msg, "tenant acme has 2 subscriptions, its limit") {
		t.Fatalf("third of acme's subscriptions: %q", msg)
	}
	h.create("--url", "https://a.example/", "--events", "*", "--tenant", "small")
	h.fails(1, "subscriptions", "create", "--url", "https://a.example/", "--events", "*", "--tenant", "small")
	other := h.create("--id", "sub_other", "--url", "https://a.example/", "--events", "*", "--tenant", "other")
	h.fails(1, "subscriptions", "update", other.ID, "--tenant", "acme")
	h.ok("subscriptions", "update", other.ID, "--url", "https://b.example/")
}
