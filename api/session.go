package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"
)

// session is what a dashboard cookie or a portal token says, signed by the
// API's session key: who acts, until when.
type session struct {
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

// signer signs and verifies sessions with one key, the same on every
// replica (WEBHOOKS_API_SESSION_KEY).
type signer struct{ key []byte }

var errBadToken = errors.New("invalid or expired")

func (g signer) mac(b []byte) []byte {
	m := hmac.New(sha256.New, g.key)
	m.Write(b)
	return m.Sum(nil)
}

// sign renders s as payload.mac, both base64url.
func (g signer) sign(s session) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString(b) + "." + enc.EncodeToString(g.mac(b))
}

// verify returns the session of token when its mac is right and it has not
// expired.
func (g signer) verify(token string, now time.Time) (session, error) {
	enc := base64.RawURLEncoding
	payload, sig, ok := strings.Cut(token, ".")
	b, err1 := enc.DecodeString(payload)
	m, err2 := enc.DecodeString(sig)
	if !ok || err1 != nil || err2 != nil || !hmac.Equal(m, g.mac(b)) {
		return session{}, errBadToken
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil || now.Unix() >= s.Expires {
		return session{}, errBadToken
	}
	return s, nil
}

// csrf is the token every form of s carries.
func (g signer) csrf(s session) string {
	return base64.RawURLEncoding.EncodeToString(g.mac([]byte("csrf|" + s.Nonce)))
}

func newSession(s session, ttl time.Duration) session {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	s.Nonce, s.Expires = base64.RawURLEncoding.EncodeToString(b), time.Now().Add(ttl).Unix()
	return s
}

// call makes an API request in-process as p, the way the dashboard and the
// portal use the API: the same routes, validation and tenant scoping as
// from outside. It decodes a 2xx answer into out and returns the status;
// an error answer comes back as an *apiError.
func (s *Server) call(ctx context.Context, p principal, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(context.WithValue(ctx, internalKey{}, p), method, path, rd)
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	s.mux.ServeHTTP(w, req)
	if w.Code >= 300 {
		var e apiError
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		e.Status = w.Code
		return w.Code, &e
	}
	if out != nil && w.Code != http.StatusNoContent {
		if err := json.Unmarshal(w.Body.Bytes(), out); err != nil {
			return w.Code, fmt.Errorf("%s %s: %w", method, path, err)
		}
	}
	return w.Code, nil
}

// apiError is an API problem document.
type apiError struct {
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Errors []struct {
		Location string `json:"location"`
		Message  string `json:"message"`
	} `json:"errors"`
}

func (e *apiError) Error() string {
	msg := e.Detail
	for _, d := range e.Errors {
		msg += "; " + strings.TrimPrefix(d.Location, "body.") + ": " + d.Message
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return msg
}
