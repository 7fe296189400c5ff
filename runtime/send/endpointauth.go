package send

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// endpointAuth keeps what a subscription's auth needs beyond its record, in
// this process: OAuth2 tokens and client-certificate transports, each made
// once per subscription and kept until its auth changes.
type endpointAuth struct {
	base         *http.Transport // cloned, with a client certificate, for mtls
	tokenClient  *http.Client    // the token endpoint's: guarded like the endpoints
	requireHTTPS bool
	now          func() time.Time

	mu         sync.Mutex
	tokens     map[string]*tokenSlot     // by subscription id
	transports map[string]*certTransport // by subscription id
}

// tokenSlot is one subscription's OAuth2 token.
type tokenSlot struct {
	mu    sync.Mutex // one fetch at a time per subscription
	of    [32]byte   // the fingerprint of the auth the token was fetched with
	token string
	renew time.Time // fetch again from then on; zero: until refused
}

// certTransport is one subscription's transport with its client certificate.
type certTransport struct {
	of [32]byte
	tr *http.Transport
}

func newEndpointAuth(base *http.Transport, requireHTTPS bool) *endpointAuth {
	return &endpointAuth{
		base: base,
		tokenClient: &http.Client{Transport: base,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		requireHTTPS: requireHTTPS,
		now:          time.Now,
		tokens:       map[string]*tokenSlot{},
		transports:   map[string]*certTransport{},
	}
}

// renewMargin is how long before its expiry a token is fetched again: a
// tenth of its lifetime, at most 30 seconds.
func renewMargin(lifetime time.Duration) time.Duration {
	return min(30*time.Second, lifetime/10)
}

// token is the bearer token for sub's oauth2 auth: the cached one, or a new
// one when there is none, it is due for renewal, or it is refused (the
// endpoint answered 401 to it).
func (e *endpointAuth) token(ctx context.Context, sub *topics.Subscription, refused string) (string, error) {
	a := sub.Auth
	of := fingerprint(a.TokenURL, a.ClientID, a.ClientSecret, strings.Join(a.Scopes, " "))
	e.mu.Lock()
	slot := e.tokens[sub.ID]
	if slot == nil {
		slot = &tokenSlot{}
		e.tokens[sub.ID] = slot
	}
	e.mu.Unlock()
	slot.mu.Lock()
	defer slot.mu.Unlock()
	now := e.now()
	if slot.of == of && slot.token != "" && slot.token != refused && (slot.renew.IsZero() || now.Before(slot.renew)) {
		return slot.token, nil
	}
	slot.token = ""
	if u, err := url.Parse(a.TokenURL); err != nil || e.requireHTTPS && u.Scheme != "https" {
		return "", fmt.Errorf("%w: the token endpoint is not https and WEBHOOKS_REQUIRE_HTTPS is set", classify.ErrBlockedAddress)
	}
	cc := clientcredentials.Config{ClientID: a.ClientID, ClientSecret: a.ClientSecret, TokenURL: a.TokenURL, Scopes: a.Scopes}
	tok, err := cc.Token(context.WithValue(ctx, oauth2.HTTPClient, e.tokenClient))
	if err != nil {
		return "", tokenError(err)
	}
	slot.of, slot.token, slot.renew = of, tok.AccessToken, time.Time{}
	if !tok.Expiry.IsZero() {
		slot.renew = tok.Expiry.Add(-renewMargin(tok.Expiry.Sub(now)))
	}
	return slot.token, nil
}

// tokenError describes a failed token request without what the token
// endpoint answered in its body (which may echo the request): its status
// and error code, or the transport error. It wraps classify.ErrAuth, and
// the transport error so a refused address stays one.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		if re.ErrorCode != "" {
			return fmt.Errorf("%w: the token endpoint answered %d (%s)", classify.ErrAuth, status, re.ErrorCode)
		}
		return fmt.Errorf("%w: the token endpoint answered %d", classify.ErrAuth, status)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%w: token endpoint: %w", classify.ErrAuth, ue.Err)
	}
	return fmt.Errorf("%w: token endpoint: %w", classify.ErrAuth, err)
}

// client is the HTTP client of sub's requests: c itself, or for mtls auth
// one whose transport presents sub's client certificate.
func (e *endpointAuth) client(c *http.Client, sub *topics.Subscription) (*http.Client, error) {
	a := sub.Auth
	if a == nil || a.Type != topics.AuthMTLS {
		return c, nil
	}
	of := fingerprint(a.Certificate, a.Key, a.CA)
	e.mu.Lock()
	defer e.mu.Unlock()
	ct := e.transports[sub.ID]
	if ct == nil || ct.of != of {
		tr, err := e.certTransport(a)
		if err != nil {
			return nil, err
		}
		if ct != nil {
			ct.tr.CloseIdleConnections()
		}
		ct = &certTransport{of: of, tr: tr}
		e.transports[sub.ID] = ct
	}
	return &http.Client{Transport: ct.tr, CheckRedirect: c.CheckRedirect}, nil
}

// certTransport is the base transport presenting a's client certificate,
// trusting a's CA when it has one.
func (e *endpointAuth) certTransport(a *topics.EndpointAuth) (*http.Transport, error) {
	cert, err := a.ClientCertificate()
	if err != nil { // validated when written: only a record from elsewhere
		return nil, fmt.Errorf("%w: the client certificate: %w", classify.ErrAuth, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if a.CA != "" {
		cfg.RootCAs = x509.NewCertPool()
		cfg.RootCAs.AppendCertsFromPEM([]byte(a.CA))
	}
	tr := e.base.Clone()
	tr.TLSClientConfig = cfg
	return tr, nil
}

// fingerprint tells one auth's values from another's without keeping them.
func fingerprint(values ...string) [32]byte {
	h := sha256.New()
	for _, v := range values {
		h.Write([]byte(v))
		h.Write([]byte{0})
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}
