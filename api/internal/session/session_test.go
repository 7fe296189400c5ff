package session

import (
	"strings"
	"testing"
	"time"
)

// TestSignVerify: a signed session verifies until it expires; a token
// changed anywhere, or signed with another key, does not; two sessions of
// the same principal have different CSRF tokens.
func TestSignVerify(t *testing.T) {
	g := NewSigner([]byte(strings.Repeat("k", 32)))
	s := New(Session{Tenant: "acme", Portal: true}, time.Hour)
	token := g.Sign(s)
	got, err := g.Verify(token, time.Now())
	if err != nil || got != s {
		t.Fatalf("Verify = %+v, %v; want %+v", got, err, s)
	}
	payload, mac, _ := strings.Cut(token, ".")
	for name, bad := range map[string]string{
		"expired":        token,
		"payload change": payload[:len(payload)-1] + "A." + mac,
		"mac change":     payload + "." + mac[:len(mac)-1] + "A",
		"no mac":         payload,
		"other key":      NewSigner([]byte(strings.Repeat("o", 32))).Sign(s),
	} {
		now := time.Now()
		if name == "expired" {
			now = now.Add(time.Hour + time.Second)
		}
		if _, err := g.Verify(bad, now); err != ErrBadToken {
			t.Errorf("%s: Verify err = %v, want ErrBadToken", name, err)
		}
	}
	if g.CSRF(s) == g.CSRF(New(Session{Tenant: "acme", Portal: true}, time.Hour)) {
		t.Error("two sessions share a CSRF token")
	}
}

func TestDecodeKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=": true, // 32 bytes
		"MDEyMzQ1Njc4OWFiY2RlZg==":                     false,
		"not base64!":                                  false,
	} {
		if _, err := DecodeKey(key); (err == nil) != ok {
			t.Errorf("DecodeKey(%q) err = %v, want ok %v", key, err, ok)
		}
	}
}
