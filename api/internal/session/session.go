// Package session signs and verifies what a dashboard cookie or a portal
// link says (who acts, until when) with one key, the same on every replica
// (WEBHOOKS_API_SESSION_KEY), so any replica serves any session.
package session

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Session is what a dashboard cookie or a portal token says, signed by the
// API's session key: who acts, until when.
type Session struct {
	// KeyID is the admin key signed in with ("" and Boot for the bootstrap
	// key); empty for a portal session.
	KeyID string `json:"k,omitempty"`
	Boot  bool   `json:"b,omitempty"`
	// Tenant is the portal's tenant.
	Tenant string `json:"t,omitempty"`
	Portal bool   `json:"p,omitempty"`
	// Nonce makes each session's CSRF token its own.
	Nonce   string `json:"n"`
	Expires int64  `json:"e"`
}

// New is s with a fresh nonce, expiring after ttl.
func New(s Session, ttl time.Duration) Session {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	s.Nonce, s.Expires = base64.RawURLEncoding.EncodeToString(b), time.Now().Add(ttl).Unix()
	return s
}

// Signer signs and verifies sessions with one key.
type Signer struct{ key []byte }

// NewSigner signs with key (DecodeKey).
func NewSigner(key []byte) Signer { return Signer{key: key} }

// ErrBadToken is a token whose mac is wrong or that has expired.
var ErrBadToken = errors.New("invalid or expired")

func (g Signer) mac(b []byte) []byte {
	m := hmac.New(sha256.New, g.key)
	m.Write(b)
	return m.Sum(nil)
}

// Sign renders s as payload.mac, both base64url.
func (g Signer) Sign(s Session) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(b) + "." + enc.EncodeToString(g.mac(b))
}

// Verify returns the session of token when its mac is right and it has not
// expired at now.
func (g Signer) Verify(token string, now time.Time) (Session, error) {
	// Strict: a token is accepted in the one spelling Sign gives it, not
	// also with other unused bits in its last character.
	enc := base64.RawURLEncoding.Strict()
	payload, sig, ok := strings.Cut(token, ".")
	b, err1 := enc.DecodeString(payload)
	m, err2 := enc.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(m, g.mac(b)) {
		return Session{}, ErrBadToken
	}
	var s Session
	if err := json.Unmarshal(b, &s); err != nil || now.Unix() >= s.Expires {
		return Session{}, ErrBadToken
	}
	return s, nil
}

// CSRF is the token every form of s carries.
func (g Signer) CSRF(s Session) string {
	return base64.RawURLEncoding.EncodeToString(g.mac([]byte("csrf|" + s.Nonce)))
}

// DecodeKey reads a base64 session key of at least 32 bytes.
func DecodeKey(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) < 32 {
				return nil, fmt.Errorf("%d bytes; want 32 or more random bytes", len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// BootID names the bootstrap admin key in its sessions: a hash, never the
// key, so a session ends when the key changes.
func BootID(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "boot-" + hex.EncodeToString(sum[:8])
}
