package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit/testcert"
	"github.com/hookpipe/hookpipe/topics"
)

// create creates a subscription from flags and returns what -o json printed.
func (h *harness) create(args ...string) topics.Subscription {
	h.t.Helper()
	var s topics.Subscription
	h.json(&s, append([]string{"subscriptions", "create"}, args...)...)
	return s
}

func TestCreateGetList(t *testing.T) {
	h := newHarness(t, true)
	start := time.Now().Add(-time.Second)
	s := h.create("--url", "https://hooks.example/in?token=1", "--events", "order.*, invoice.paid",
		"--tenant", "acme", "--header", "X-Team: payments", "--ordering", "key", "--rate-limit", "2.5",
		"--http-timeout", "5s", "--retry-schedule", "10s,1m")

	if !idRE.MatchString(s.ID) || !strings.HasPrefix(s.ID, "sub_") {
		t.Errorf("generated id %q, want sub_ + 20 lowercase letters and digits", s.ID)
	}
	key, err := topics.DecodeSecret(s.Secret)
	if err != nil || len(key) != 32 {
		t.Errorf("secret %q: %v, %d bytes; want a whsec_ secret of 32 bytes", s.Secret, err, len(key))
	}
	if s.CreatedAt.Before(start) || !s.UpdatedAt.Equal(s.CreatedAt) {
		t.Errorf("created_at %v, updated_at %v; want both now", s.CreatedAt, s.UpdatedAt)
	}
	want := topics.Subscription{
		ID: s.ID, Tenant: "acme", URL: "https://hooks.example/in?token=1", EventTypes: []string{"order.*", "invoice.paid"},
		Enabled: true, Ordering: "key", Headers: map[string]string{"X-Team": "payments"}, TimeoutMS: 5000,
		RateLimitPerS: 2.5, RetrySchedule: []string{"10s", "1m"}, Secret: s.Secret, CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("created\n%+v\nwant\n%+v", s, want)
	}
	if got := h.stored(s.ID); !reflect.DeepEqual(*got, want) {
		t.Errorf("stored\n%+v\nwant\n%+v", *got, want)
	}

	other := h.create("--id", "sub_other", "--url", "https://other.example/", "--events", "*", "--disabled")
	if other.ID != "sub_other" || other.Enabled {
		t.Errorf("create --id sub_other --disabled: got id %q enabled %t", other.ID, other.Enabled)
	}

	// get and list never show a secret.
	mask := "whsec_…" + s.Secret[len(s.Secret)-4:]
	text := h.ok("subscriptions", "get", s.ID)
	if strings.Contains(text, s.Secret) || !strings.Contains(text, mask) {
		t.Errorf("get shows\n%s\nwant the secret masked as %q", text, mask)
	}
	var got topics.Subscription
	h.json(&got, "subscriptions", "get", s.ID)
	want.Secret = "redacted"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("get -o json\n%+v\nwant\n%+v", got, want)
	}
	text = h.ok("subscriptions", "list")
	if strings.Contains(text, s.Secret) || !strings.Contains(text, s.ID) || !strings.Contains(text, "sub_other") {
		t.Errorf("list shows\n%s\nwant both ids and no secret", text)
	}
	for _, tc := range []struct {
		tenant string
		want   []string
	}{
		{"", []string{s.ID, "sub_other"}},
		{"acme", []string{s.ID}},
		{"nobody", []string{}},
	} {
		var list []topics.Subscription
		h.json(&list, "subscriptions", "list", "--tenant", tc.tenant)
		ids := []string{}
		for _, l := range list {
			ids = append(ids, l.ID)
			if l.Secret != "redacted" {
				t.Errorf("list -o json shows secret %q", l.Secret)
			}
		}
		// list sorts by id; the generated id may sort either side of sub_other.
		slices.Sort(tc.want)
		if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
			t.Errorf("list --tenant %q: %v, want %v", tc.tenant, ids, tc.want)
		}
	}

	h.fails(1, "subscriptions", "get", "sub_missing")
}

func TestCreateText(t *testing.T) {
	h := newHarness(t, true)
	out := h.ok("subscriptions", "create", "--id", "sub_text", "--url", "https://a.example/", "--events", "a")
	secret := h.stored("sub_text").Secret
	if strings.Count(out, secret) != 1 || !strings.Contains(out, "Store the secret now") {
		t.Errorf("create prints\n%s\nwant the secret %s once and a reminder to store it", out, secret)
	}
}

func TestCreateRejects(t *testing.T) {
	h := newHarness(t, true)
	h.create("--id", "sub_taken", "--url", "https://a.example/", "--events", "a")
	original := h.stored("sub_taken")
	base := func(args ...string) []string {
		return append([]string{"subscriptions", "create", "--url", "https://b.example/", "--events", "b"}, args...)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"missing url", []string{"subscriptions", "create", "--events", "a"}, 2},
		{"missing events", []string{"subscriptions", "create", "--url", "https://a.example/"}, 2},
		{"bad url scheme", base("--url", "ftp://a.example/"), 2},
		{"url with credentials", base("--url", "https://user:pw@a.example/"), 2},
		{"bad pattern", base("--events", "order created"), 2},
		{"bad prefix pattern", base("--events", "order.*.x"), 2},
		{"bad ordering", base("--ordering", "random"), 2},
		{"header without colon", base("--header", "X-Team"), 2},
		{"reserved header", base("--header", "Webhook-Signature: x"), 2},
		{"header twice", base("--header", "X-A: 1", "--header", "x-a: 2"), 2},
		{"bad secret", base("--secret", "whsec_c2hvcnQ="), 2},
		{"secret without prefix", base("--secret", "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"), 2},
		{"bad retry schedule", base("--retry-schedule", "5s,forever"), 2},
		{"retry status not a number", base("--retry-statuses", "404,gone"), 2},
		{"retry status not permanent", base("--retry-statuses", "503"), 2},
		{"timeout too long", base("--http-timeout", "10m"), 2},
		{"filter does not compile", base("--filter", "data.n >"), 2},
		{"basic auth without password", base("--auth", "basic", "--auth-username", "u"), 2},
		{"unknown auth", base("--auth", "kerberos"), 2},
		{"auth values without --auth", base("--auth-token", "t"), 2},
		{"oauth2 without a client secret", base("--auth", "oauth2", "--auth-token-url", "https://auth.example/t", "--auth-client-id", "c"), 2},
		{"mtls without a key", base("--auth", "mtls", "--auth-cert", os.DevNull), 2},
		{"mtls certificate file missing", base("--auth", "mtls", "--auth-cert", "/nonexistent/client.pem", "--auth-key", "/nonexistent/client.key"), 2},
		{"filter over an unknown name", base("--filter", "amount > 3"), 2},
		{"negative rate", base("--rate-limit", "-1"), 2},
		{"no partitions", base("--partitions", "0"), 2},
		{"too many partitions", base("--partitions", "65"), 2},
		{"bad id", base("--id", "sub 1"), 2},
		{"duplicate id", base("--id", "sub_taken"), 1},
	} {
		t.Run(tc.name, func(*testing.T) { h.fails(tc.code, tc.args...) })
	}
	if n := len(h.records(h.names.Subscriptions())); n != 1 {
		t.Errorf("%d records on the subscriptions topic, want only the first create", n)
	}
	if got := h.stored("sub_taken"); !reflect.DeepEqual(got, original) {
		t.Errorf("duplicate create changed sub_taken to %+v", got)
	}
}

func TestUpdate(t *testing.T) {
	h := newHarness(t, true)
	h.create("--id", "sub_u", "--url", "https://a.example/", "--events", "a.*", "--tenant", "acme",
		"--header", "X-A: 1", "--ordering", "key", "--rate-limit", "5", "--retry-schedule", "1s,2s")
	before := h.stored("sub_u")
	cert := testcert.New(t, "hookpipe-client")
	certFile, keyFile := filepath.Join(t.TempDir(), "client.pem"), filepath.Join(t.TempDir(), "client.key")
	if os.WriteFile(certFile, cert.CertPEM, 0o600) != nil || os.WriteFile(keyFile, cert.KeyPEM, 0o600) != nil {
		t.Fatal("writing the certificate files")
	}

	for _, tc := range []struct {
		name   string
		args   []string
		change func(s *topics.Subscription)
	}{
		{"url", []string{"--url", "https://b.example/"}, func(s *topics.Subscription) { s.URL = "https://b.example/" }},
		{"headers replaced", []string{"--header", "X-B: 2"}, func(s *topics.Subscription) { s.Headers = map[string]string{"X-B": "2"} }},
		{"headers cleared", []string{"--header", ""}, func(s *topics.Subscription) { s.Headers = nil }},
		{"events and timeout", []string{"--events", "b,c", "--http-timeout", "1m"}, func(s *topics.Subscription) {
			s.EventTypes = []string{"b", "c"}
			s.TimeoutMS = 60_000
		}},
		{"tenant cleared", []string{"--tenant", ""}, func(s *topics.Subscription) { s.Tenant = "" }},
		{"default schedule", []string{"--retry-schedule", ""}, func(s *topics.Subscription) { s.RetrySchedule = nil }},
		{"retry statuses", []string{"--retry-statuses", "404, 422"}, func(s *topics.Subscription) { s.RetryStatuses = []int{404, 422} }},
		{"retry statuses cleared", []string{"--retry-statuses", ""}, func(s *topics.Subscription) { s.RetryStatuses = nil }},
		{"filter", []string{"--filter", `data.n > 1 && "vip" in data.tags`}, func(s *topics.Subscription) { s.Filter = `data.n > 1 && "vip" in data.tags` }},
		{"filter cleared", []string{"--filter", ""}, func(s *topics.Subscription) { s.Filter = "" }},
		{"bearer auth", []string{"--auth", "bearer", "--auth-token", "tok_0123456789"}, func(s *topics.Subscription) {
			s.Auth = &topics.EndpointAuth{Type: topics.AuthBearer, Token: "tok_0123456789"}
		}},
		{"oauth2 auth", []string{"--auth", "oauth2", "--auth-token-url", "https://auth.example/token", "--auth-client-id", "hookpipe",
			"--auth-client-secret", "cs_0123456789", "--auth-scopes", "hooks:write, hooks:read"}, func(s *topics.Subscription) {
			s.Auth = &topics.EndpointAuth{Type: topics.AuthOAuth2, TokenURL: "https://auth.example/token", ClientID: "hookpipe",
				ClientSecret: "cs_0123456789", Scopes: []string{"hooks:write", "hooks:read"}}
		}},
		{"mtls auth", []string{"--auth", "mtls", "--auth-cert", certFile, "--auth-key", keyFile, "--auth-ca", certFile}, func(s *topics.Subscription) {
			s.Auth = &topics.EndpointAuth{Type: topics.AuthMTLS, Certificate: string(cert.CertPEM), Key: string(cert.KeyPEM), CA: string(cert.CertPEM)}
		}},
		{"auth removed", []string{"--auth", "none"}, func(s *topics.Subscription) { s.Auth = nil }},
		{"kafka destination", []string{"--destination", `{"type":"kafka","brokers":["b1:9092"],"topic":"hooks","sasl":"plain","username":"u","password":"pw_0123456789"}`},
			func(s *topics.Subscription) {
				s.Destination = &topics.Destination{Type: topics.DestinationKafka, Brokers: []string{"b1:9092"}, Topic: "hooks",
					SASL: topics.SASLPlain, Username: "u", Password: "pw_0123456789"}
				s.URL = "kafka://b1:9092/hooks"
			}},
		{"destination password kept", []string{"--destination", `{"type":"kafka","brokers":["b1:9092"],"topic":"orders","sasl":"plain","username":"u"}`},
			func(s *topics.Subscription) {
				s.Destination = &topics.Destination{Type: topics.DestinationKafka, Brokers: []string{"b1:9092"}, Topic: "orders",
					SASL: topics.SASLPlain, Username: "u", Password: "pw_0123456789"}
				s.URL = "kafka://b1:9092/orders"
			}},
		{"back to http", []string{"--destination", "http", "--url", "https://c.example/"}, func(s *topics.Subscription) {
			s.Destination = nil
			s.URL = "https://c.example/"
		}},
		{"disabled", []string{"--disabled"}, func(s *topics.Subscription) { s.Enabled = false }},
		{"secret replaced", []string{"--secret", "whsec_" + strings.Repeat("A", 40)}, func(s *topics.Subscription) {
			s.Secret = "whsec_" + strings.Repeat("A", 40)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var printed topics.Subscription
			h.json(&printed, append([]string{"subscriptions", "update", "sub_u"}, tc.args...)...)
			after := h.stored("sub_u")
			want := *before
			tc.change(&want)
			want.UpdatedAt = after.UpdatedAt
			if !reflect.DeepEqual(*after, want) {
				t.Errorf("stored\n%+v\nwant\n%+v", *after, want)
			}
			if after.UpdatedAt.Before(before.UpdatedAt) || !after.CreatedAt.Equal(before.CreatedAt) {
				t.Errorf("created_at %v -> %v, updated_at %v -> %v", before.CreatedAt, after.CreatedAt, before.UpdatedAt, after.UpdatedAt)
			}
			if printed.Secret != "redacted" {
				t.Errorf("update printed secret %q, want redacted", printed.Secret)
			}
			for _, secret := range append(after.Auth.Secrets(), after.Destination.Secrets()...) {
				if b, _ := json.Marshal(printed); strings.Contains(string(b), secret) {
					t.Errorf("update printed an auth secret: %s", b)
				}
			}
			before = after
		})
	}

	h.fails(2, "subscriptions", "update", "sub_u", "--url", "gopher://x")
	h.fails(2, "subscriptions", "update", "sub_u", "--events", "")
	h.fails(2, "subscriptions", "update", "sub_u", "--destination", `{"type":"kafka","topic":"t"}`)
	h.fails(2, "subscriptions", "update", "sub_u", "--destination", `{"type":"kafka","nope":1}`)
	h.fails(1, "subscriptions", "update", "sub_missing", "--url", "https://b.example/")
	if got := h.stored("sub_u"); !reflect.DeepEqual(got, before) {
		t.Errorf("failed updates changed the subscription to %+v", got)
	}
}

// TestSpreadSubscription: --partitions spreads a subscription (1, the
// default, is stored as absent); webhookctl warns when the deliveries
// topics have fewer partitions, and when an ordered subscription's width
// changes (its keys move: ADR 0020).
func TestSpreadSubscription(t *testing.T) {
	h := newHarness(t, true) // topics of 2 partitions
	h.create("--id", "sub_hot", "--url", "https://a.example/", "--events", "a", "--partitions", "2")
	if got := h.stored("sub_hot").Partitions; got != 2 {
		t.Fatalf("stored partitions %d, want 2", got)
	}
	if out := h.ok("subscriptions", "get", "sub_hot"); !regexp.MustCompile(`(?m)^partitions: +2$`).MatchString(out) {
		t.Errorf("get shows\n%s\nwant partitions 2", out)
	}
	r := h.run("subscriptions", "create", "--id", "sub_wide", "--url", "https://a.example/", "--events", "a", "--partitions", "4")
	if r.code != 0 || strings.Count(r.stderr, "has 2 partitions, fewer than the 4 sub_wide spreads over") != 3 {
		t.Errorf("creating a subscription wider than the topics: exit %d, stderr %q; want a warning per deliveries topic", r.code, r.stderr)
	}
	h.create("--id", "sub_ordered", "--url", "https://a.example/", "--events", "a", "--ordering", "key")
	r = h.run("subscriptions", "update", "sub_ordered", "--partitions", "2")
	if r.code != 0 || !strings.Contains(r.stderr, "sub_ordered is ordered and now spreads over 2 partitions, not 1") {
		t.Errorf("spreading an ordered subscription: exit %d, stderr %q; want a warning about its keys", r.code, r.stderr)
	}
	h.ok("subscriptions", "update", "sub_hot", "--partitions", "1")
	if got := h.stored("sub_hot").Partitions; got != 0 {
		t.Fatalf("stored partitions %d after --partitions 1, want 0 (absent)", got)
	}
}

func TestEnableDisable(t *testing.T) {
	h := newHarness(t, true)
	h.create("--id", "sub_e", "--url", "https://a.example/", "--events", "a")
	for _, tc := range []struct {
		args    []string
		enabled bool
		reason  string
	}{
		{[]string{"disable", "sub_e", "--reason", "endpoint gone"}, false, "endpoint gone"},
		{[]string{"disable", "sub_e"}, false, "endpoint gone"},
		{[]string{"enable", "sub_e"}, true, ""},
		{[]string{"disable", "sub_e"}, false, ""},
		{[]string{"enable", "sub_e"}, true, ""},
	} {
		var s topics.Subscription
		h.json(&s, append([]string{"subscriptions"}, tc.args...)...)
		got := h.stored("sub_e")
		if s.Enabled != tc.enabled || got.Enabled != tc.enabled || got.DisabledReason != tc.reason {
			t.Errorf("%v: printed enabled %t, stored enabled %t reason %q; want %t %q",
				tc.args, s.Enabled, got.Enabled, got.DisabledReason, tc.enabled, tc.reason)
		}
	}
	h.fails(1, "subscriptions", "enable", "sub_missing")
	h.fails(1, "subscriptions", "disable", "sub_missing")
}

func TestDelete(t *testing.T) {
	h := newHarness(t, true)
	h.create("--id", "sub_d", "--url", "https://a.example/", "--events", "a")
	h.create("--id", "sub_keep", "--url", "https://a.example/", "--events", "a")
	var deleted struct {
		ID      string `json:"id"`
		Deleted bool   `json:"deleted"`
	}
	h.json(&deleted, "subscriptions", "delete", "sub_d")
	if deleted.ID != "sub_d" || !deleted.Deleted {
		t.Errorf("delete printed %+v, want sub_d deleted", deleted)
	}
	if h.stored("sub_d") != nil {
		t.Fatal("delete did not write a tombstone")
	}
	if line := h.fails(1, "subscriptions", "get", "sub_d"); !strings.Contains(line, "not found") {
		t.Errorf("get after delete: %q, want not found", line)
	}
	var list []topics.Subscription
	h.json(&list, "subscriptions", "list")
	if len(list) != 1 || list[0].ID != "sub_keep" {
		t.Errorf("list after delete: %+v, want only sub_keep", list)
	}
	h.fails(1, "subscriptions", "delete", "sub_d")
}

func TestRotateSecret(t *testing.T) {
	h := newHarness(t, true)
	old := h.create("--id", "sub_r", "--url", "https://a.example/", "--events", "a").Secret

	start := time.Now()
	var rotated topics.Subscription
	h.json(&rotated, "subscriptions", "rotate-secret", "sub_r")
	end := time.Now()
	if _, err := topics.DecodeSecret(rotated.Secret); err != nil || rotated.Secret == old {
		t.Fatalf("rotate-secret printed secret %q (%v), want a new valid secret", rotated.Secret, err)
	}
	if rotated.PreviousSecret != "redacted" {
		t.Errorf("rotate-secret printed previous secret %q, want redacted", rotated.PreviousSecret)
	}
	got := h.stored("sub_r")
	if got.Secret != rotated.Secret || got.PreviousSecret != old {
		t.Errorf("stored secret %q previous %q; want %q and %q", got.Secret, got.PreviousSecret, rotated.Secret, old)
	}
	until := got.PreviousSecretUntil
	if until.Before(start.Add(topics.RotationGrace)) || until.After(end.Add(topics.RotationGrace)) {
		t.Errorf("previous secret signs until %v, want %v after the rotation", until, topics.RotationGrace)
	}

	given := "whsec_" + strings.Repeat("B", 40)
	out := h.ok("subscriptions", "rotate-secret", "sub_r", "--secret", given)
	if strings.Count(out, given) != 1 {
		t.Errorf("rotate-secret --secret prints\n%s\nwant the new secret once", out)
	}
	if got := h.stored("sub_r"); got.Secret != given || got.PreviousSecret != rotated.Secret {
		t.Errorf("stored secret %q previous %q; want %q and %q", got.Secret, got.PreviousSecret, given, rotated.Secret)
	}

	h.fails(2, "subscriptions", "rotate-secret", "sub_r", "--secret", "whsec_short")
	h.fails(2, "subscriptions", "rotate-secret", "sub_r", "--secret", given)
	h.fails(1, "subscriptions", "rotate-secret", "sub_missing")
}
