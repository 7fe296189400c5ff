package main

import (
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

// TestAPIKeys: create prints the key once and stores only its hash; list
// shows the keys without them; revoke marks the key revoked, once.
func TestAPIKeys(t *testing.T) {
	h := newHarness(t, true)
	var admin, tenant apiKeyView
	h.json(&admin, "apikeys", "create", "--name", "support")
	h.json(&tenant, "apikeys", "create", "--name", "portal", "--tenant", "acme")
	if !strings.HasPrefix(admin.Key, topics.APIKeyPrefix) || admin.Tenant != "" || tenant.Tenant != "acme" {
		t.Fatalf("created %+v and %+v", admin, tenant)
	}
	recs := h.records(h.names.APIKeys())
	if len(recs) != 2 {
		t.Fatalf("%d records on the apikeys topic, want 2", len(recs))
	}
	for _, r := range recs {
		k, err := topics.DecodeAPIKey(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(r.Value), admin.Key) || strings.Contains(string(r.Value), tenant.Key) {
			t.Fatalf("a key is stored in the clear: %s", r.Value)
		}
		if want := map[string]string{admin.ID: admin.Key, tenant.ID: tenant.Key}[k.ID]; k.Hash != topics.HashAPIKey(want) {
			t.Fatalf("key %s stored with hash %s, not the hash of the key printed", k.ID, k.Hash)
		}
	}
	var list []apiKeyView
	h.json(&list, "apikeys", "list")
	if len(list) != 2 || list[0].Key != "" || list[1].Key != "" {
		t.Fatalf("list %+v, want two keys without the keys", list)
	}
	h.ok("apikeys", "revoke", tenant.ID)
	h.ok("apikeys", "revoke", tenant.ID) // again: nothing more written
	h.json(&list, "apikeys", "list")
	for _, k := range list {
		if (k.ID == tenant.ID) != (k.RevokedAt != nil) {
			t.Fatalf("after revoke: %+v", list)
		}
	}
	if n := len(h.records(h.names.APIKeys())); n != 3 {
		t.Fatalf("%d records after two revokes of one key, want 3", n)
	}
	if line := h.fails(1, "apikeys", "revoke", "key_nope"); !strings.Contains(line, "API key key_nope not found") {
		t.Fatalf("revoking a missing key: %q", line)
	}
	if line := h.fails(2, "apikeys", "create", "--tenant", "a b"); !strings.Contains(line, "tenant") {
		t.Fatalf("a bad tenant: %q", line)
	}
}
