package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/runtime/config"
	"github.com/hookpipe/hookpipe/topics"
)

// testSecretsKey is the harness's WEBHOOKS_SECRETS_KEY: bytes 0..31, key id
// 630dcd29 (the first 8 hex digits of its SHA-256).
const testSecretsKey = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="

// otherSecretsKey is bytes 32..63.
const otherSecretsKey = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="

func testKeyring(t testing.TB) *topics.Keyring {
	t.Helper()
	k, err := topics.ParseKeyring(testSecretsKey)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// rawSubscription is the last value of subscription id as stored, secrets
// still sealed.
func (h *harness) rawSubscription(id string) map[string]any {
	h.t.Helper()
	var v []byte
	for _, r := range h.records(h.names.Subscriptions()) {
		if string(r.Key) == id {
			v = r.Value
		}
	}
	var m map[string]any
	if err := json.Unmarshal(v, &m); err != nil {
		h.t.Fatalf("stored %s: %v", id, err)
	}
	return m
}

// TestURLRejected: create and update refuse a malformed URL, one over 2048
// characters or one with credentials, with one line naming the problem and
// never echoing the URL, and write nothing.
func TestURLRejected(t *testing.T) {
	h := newHarness(t, true)
	h.create("--id", "sub_u", "--url", "https://a.example/", "--events", "a")
	before := len(h.records(h.names.Subscriptions()))
	long := "https://a.example/" + strings.Repeat("p", topics.MaxURLLength)
	for _, tc := range []struct {
		name, url, want string
	}{
		{"malformed host", "https://exa mple.com/", "not a valid URL"},
		{"malformed port", "https://a.example:port/", "not a valid URL"},
		{"unclosed ipv6", "https://[::1/", "not a valid URL"},
		{"control character", "https://a.example/\x7f", "not a valid URL"},
		{"relative", "/hooks", "scheme must be http or https"},
		{"no scheme", "a.example/hooks", "scheme must be http or https"},
		{"other scheme", "ftp://a.example/", "scheme must be http or https"},
		{"no host", "https:///hooks", "has no host"},
		{"too long", long, "longer than 2048 characters"},
		{"user and password", "https://user:hunter2@a.example/", "must not carry credentials"},
		{"user only", "https://hunter2@a.example/", "must not carry credentials"},
		{"fragment", "https://a.example/#x", "must not have a fragment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"subscriptions", "create", "--url", tc.url, "--events", "a"},
				{"subscriptions", "update", "sub_u", "--url", tc.url},
			} {
				r := h.run(args...)
				checkFailure(t, r, 2)
				prefix := "webhookctl: subscriptions " + args[1] + ": --url: "
				if !strings.HasPrefix(r.stderr, prefix) || !strings.Contains(r.stderr, tc.want) {
					t.Errorf("%s: stderr %q, want %q + ...%s...", args[1], r.stderr, prefix, tc.want)
				}
				if strings.Contains(r.stderr, "hunter2") || (len(tc.url) > 20 && strings.Contains(r.stderr, tc.url)) {
					t.Errorf("%s: stderr %q echoes the URL", args[1], r.stderr)
				}
			}
		})
	}
	if n := len(h.records(h.names.Subscriptions())); n != before {
		t.Errorf("%d records written for rejected URLs", n-before)
	}
}

// TestPlainHTTPWarns: an http URL is accepted with one warning line on
// stderr, given to create or update; https, or an update not touching the
// URL, warns nothing.
func TestPlainHTTPWarns(t *testing.T) {
	h := newHarness(t, true)
	warned := func(r result) bool {
		return strings.HasPrefix(r.stderr, "webhookctl: warning: --url is plain http") && strings.Count(r.stderr, "\n") == 1
	}
	r := h.run("-o", "json", "subscriptions", "create", "--id", "sub_h", "--url", "http://a.example/", "--events", "a")
	var s topics.Subscription
	if r.code != 0 || !warned(r) || json.Unmarshal([]byte(r.stdout), &s) != nil || s.URL != "http://a.example/" {
		t.Fatalf("create http: exit %d, stderr %q, stdout %q; want success, one warning, the subscription", r.code, r.stderr, r.stdout)
	}
	if got := h.stored("sub_h"); got.URL != "http://a.example/" {
		t.Errorf("stored url %q", got.URL)
	}
	if r := h.run("subscriptions", "update", "sub_h", "--url", "HTTP://b.example/"); r.code != 0 || !warned(r) {
		t.Errorf("update to http: exit %d, stderr %q; want success and one warning", r.code, r.stderr)
	}
	if r := h.run("subscriptions", "update", "sub_h", "--events", "b"); r.code != 0 || r.stderr != "" {
		t.Errorf("update without --url: exit %d, stderr %q; want no warning", r.code, r.stderr)
	}
	if r := h.run("subscriptions", "update", "sub_h", "--url", "https://b.example/"); r.code != 0 || r.stderr != "" {
		t.Errorf("update to https: exit %d, stderr %q; want no warning", r.code, r.stderr)
	}
}

// TestSecretsSealedAtRest: what webhookctl writes holds no plaintext
// secret, and what it prints after create or rotate-secret (get, list)
// shows neither the secret nor the previous one.
func TestSecretsSealedAtRest(t *testing.T) {
	h := newHarness(t, true)
	old := h.create("--id", "sub_s", "--url", "https://a.example/", "--events", "a").Secret
	var rotated topics.Subscription
	h.json(&rotated, "subscriptions", "rotate-secret", "sub_s")
	for _, r := range h.records(h.names.Subscriptions()) {
		for _, secret := range []string{old, rotated.Secret, strings.TrimPrefix(old, topics.SecretPrefix), strings.TrimPrefix(rotated.Secret, topics.SecretPrefix)} {
			if strings.Contains(string(r.Value), secret) {
				t.Errorf("subscriptions topic holds a plaintext secret: %s", r.Value)
			}
		}
	}
	raw := h.rawSubscription("sub_s")
	for _, f := range []string{"secret", "previous_secret"} {
		if v, _ := raw[f].(string); !strings.HasPrefix(v, "enc:v1:630dcd29:") {
			t.Errorf("stored %s = %q, want enc:v1:630dcd29:...", f, v)
		}
	}
	if got := h.stored("sub_s"); got.Secret != rotated.Secret || got.PreviousSecret != old {
		t.Errorf("stored secrets do not open to the printed ones")
	}
	for _, args := range [][]string{
		{"subscriptions", "get", "sub_s"}, {"subscriptions", "list"},
		{"-o", "json", "subscriptions", "get", "sub_s"}, {"-o", "json", "subscriptions", "list"},
		{"subscriptions", "disable", "sub_s"}, {"-o", "json", "subscriptions", "enable", "sub_s"},
	} {
		out := h.ok(args...)
		for _, secret := range []string{old, rotated.Secret} {
			if strings.Contains(out, strings.TrimPrefix(secret, topics.SecretPrefix)[:20]) {
				t.Errorf("webhookctl %s prints a secret:\n%s", strings.Join(args, " "), out)
			}
		}
	}
}

// TestSecretsKeyRequired: without WEBHOOKS_SECRETS_KEY the commands that
// read or write subscriptions fail with one line naming it, the others
// work; WEBHOOKS_DEV=1 writes plaintext.
func TestSecretsKeyRequired(t *testing.T) {
	h := newHarness(t, true)
	delete(h.env, config.EnvSecretsKey)
	for _, args := range [][]string{
		{"subscriptions", "create", "--url", "https://a.example/", "--events", "a"},
		{"subscriptions", "list"},
		{"subscriptions", "get", "sub_x"},
		{"subscriptions", "rotate-secret", "sub_x"},
	} {
		r := h.run(args...)
		checkFailure(t, r, 1)
		if !strings.Contains(r.stderr, "WEBHOOKS_SECRETS_KEY is not set") || !strings.Contains(r.stderr, "WEBHOOKS_DEV=1") {
			t.Errorf("%s: stderr %q, want it to name WEBHOOKS_SECRETS_KEY and WEBHOOKS_DEV", strings.Join(args, " "), r.stderr)
		}
	}
	h.ok("publish", "--type", "a", "--data", "{}")
	h.ok("topics", "ensure")

	h.env[config.EnvSecretsKey] = "c2hvcnQ="
	r := h.run("subscriptions", "list")
	checkFailure(t, r, 1)
	if !strings.Contains(r.stderr, "WEBHOOKS_SECRETS_KEY: key: decodes to 5 bytes, want 32") {
		t.Errorf("short key: stderr %q", r.stderr)
	}

	delete(h.env, config.EnvSecretsKey)
	h.env[config.EnvDev] = "1"
	s := h.create("--id", "sub_dev", "--url", "https://a.example/", "--events", "a")
	if raw := h.rawSubscription("sub_dev"); raw["secret"] != s.Secret {
		t.Errorf("dev mode stored secret %v, want the plaintext %s", raw["secret"], s.Secret)
	}
}

// TestSecretsKeyRotation: with the new key first and the old one second,
// records sealed with the old key still read, and any change reseals them
// with the new key (an alert channel's, an update giving nothing), after
// which the old key can go.
func TestSecretsKeyRotation(t *testing.T) {
	h := newHarness(t, true)
	s := h.create("--id", "sub_k", "--url", "https://a.example/", "--events", "a")
	const hook = "https://hooks.example.com/services/T0/B0/s3cret"
	h.ok("alert-channels", "add", "--id", "ach_k", "--kind", "slack", "--url", hook)

	h.env[config.EnvSecretsKey] = otherSecretsKey
	h.fails(1, "subscriptions", "get", "sub_k") // sealed with a key it does not hold: ignored

	h.env[config.EnvSecretsKey] = "new:" + otherSecretsKey + "," + testSecretsKey
	h.ok("subscriptions", "get", "sub_k")
	h.ok("subscriptions", "update", "sub_k", "--events", "b")
	if v, _ := h.rawSubscription("sub_k")["secret"].(string); !strings.HasPrefix(v, "enc:v1:new:") {
		t.Errorf("after update, stored secret %q, want sealed with key new", v)
	}

	h.ok("alert-channels", "update", "ach_k")

	h.env[config.EnvSecretsKey] = "new:" + otherSecretsKey
	var got topics.Subscription
	h.json(&got, "subscriptions", "rotate-secret", "sub_k")
	k, err := topics.ParseKeyring(h.env[config.EnvSecretsKey])
	if err != nil {
		t.Fatal(err)
	}
	var last []byte
	for _, r := range h.records(h.names.Subscriptions()) {
		last = r.Value
	}
	stored, err := topics.DecodeSubscriptionWith(last, k)
	if err != nil || stored.PreviousSecret != s.Secret || stored.Secret != got.Secret {
		t.Errorf("after rotation under the new key only: %v; secrets do not match", err)
	}
	for _, r := range h.records(h.names.AlertChannels()) {
		last = r.Value
	}
	if ch, err := topics.DecodeAlertChannelWith(last, k); err != nil || ch.URL != hook {
		t.Errorf("the alert channel rewritten by an update giving nothing, under the new key only: %v, URL kept: %v", err, ch.URL == hook)
	}
}
