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
		"payload change": other(payload) + "." + mac,
		"mac change":     payload + "." + other(mac),
		// The same bytes spelled with other unused bits in the last
		// character (a 32-byte MAC leaves two).
		"mac respelled": payload + "." + respelled(mac),
		"no mac":        payload,
		"other key":     NewSigner([]byte(strings.Repeat("o", 32))).Sign(s),
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

// other is s with its last character changed.
func other(s string) string {
	last := "A"
	if s[len(s)-1] == 'A' {
		last = "B"
	}
	return s[:len(s)-1] + last
}

// respelled is the unpadded base64url s with the unused low bits of its
// last character flipped: the same bytes to a lenient decoder.
func respelled(s string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, s[len(s)-1])
	return s[:len(s)-1] + string(alphabet[i^1])
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
