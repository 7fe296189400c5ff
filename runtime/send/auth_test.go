package send

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit/endpointtest"
	"github.com/hookpipe/hookpipe/runtime/testkit/testcert"
	"github.com/hookpipe/hookpipe/topics"
)

func mustSecret(t *testing.T) string {
	t.Helper()
	s, err := topics.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestEndpointAuth: basic and bearer auth reach the endpoint in the
// Authorization header; an endpoint that echoes its request leaves neither
// the password, the token nor the header value in the response sample.
func TestEndpointAuth(t *testing.T) {
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pw, ok := r.BasicAuth()
		switch {
		case ok && user == "hooks" && pw == "correct-horse-battery":
		case r.Header.Get("Authorization") == "Bearer tok_0123456789abcdef":
		default:
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "you sent: "+r.Header.Get("Authorization")+" "+pw)
	}))
	t.Cleanup(endpoint.Close)
	p := NewProber(HTTP{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ConnectTimeout: 5 * time.Second})
	secret, err := topics.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	del := &topics.Delivery{SubscriptionID: "sub_1", EventID: "evt_1", EventType: "a", Timestamp: time.Now().Format(time.RFC3339), Data: []byte(`{}`), Attempt: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, a := range []*topics.EndpointAuth{
		{Type: topics.AuthBasic, Username: "hooks", Password: "correct-horse-battery"},
		{Type: topics.AuthBearer, Token: "tok_0123456789abcdef"},
		nil,
	} {
		sub := &topics.Subscription{ID: "sub_1", URL: endpoint.URL + "/hooks", EventTypes: []string{"*"}, Enabled: true, Secret: secret, Auth: a}
		res := p.Probe(ctx, sub, del)
		if a == nil {
			if res.Status != http.StatusUnauthorized {
				t.Fatalf("without auth: %+v", res)
			}
			continue
		}
		if !res.Delivered || !strings.Contains(res.Body, "[redacted]") {
			t.Fatalf("%s: %+v", a.Type, res)
		}
		for _, s := range append(a.Secrets(), strings.TrimPrefix(strings.TrimPrefix(authorization(a), "Basic "), "Bearer ")) {
			if strings.Contains(res.Body, s) {
				t.Fatalf("%s: the response sample shows %q: %q", a.Type, s, res.Body)
			}
		}
	}
}

// TestOAuth2: the deliverer fetches a client-credentials token once, sends
// it as a bearer token, keeps it until shortly before it expires, fetches a
// new one when the endpoint refuses it (and sends again, once), and a token
// endpoint that refuses is an "auth" failure whose text holds neither the
// client secret nor what the token endpoint answered.
func TestOAuth2(t *testing.T) {
	const clientSecret = "cs_correct-horse-battery"
	ts := endpointtest.NewTokenServer(t, "hookpipe", clientSecret)
	var mu sync.Mutex
	accept := "tok-1" // the one token the endpoint takes
	requests := 0
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		requests++
		if r.Header.Get("Authorization") != "Bearer "+accept {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, "refused "+r.Header.Get("Authorization"))
			return
		}
		_, _ = io.WriteString(w, "took "+r.Header.Get("Authorization"))
	}))
	t.Cleanup(endpoint.Close)
	set := func(token string) int {
		mu.Lock()
		defer mu.Unlock()
		accept = token
		n := requests
		requests = 0
		return n
	}
	p := NewProber(HTTP{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ConnectTimeout: 5 * time.Second})
	now := time.Now()
	p.s.auth.now = func() time.Time { return now }
	sub := &topics.Subscription{ID: "sub_1", URL: endpoint.URL + "/hooks", EventTypes: []string{"*"}, Enabled: true, Secret: mustSecret(t),
		Auth: &topics.EndpointAuth{Type: topics.AuthOAuth2, TokenURL: ts.Srv.URL + "/token", ClientID: "hookpipe", ClientSecret: clientSecret, Scopes: []string{"hooks:write", "hooks:read"}}}
	del := &topics.Delivery{SubscriptionID: "sub_1", EventID: "evt_1", EventType: "a", Timestamp: now.Format(time.RFC3339), Data: []byte(`{}`), Attempt: 1}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	probe := func(step string, wantFetches, wantRequests int) ProbeResult {
		t.Helper()
		res := p.Probe(ctx, sub, del)
		if got := ts.Fetches(); got != wantFetches {
			t.Fatalf("%s: %d tokens fetched, want %d", step, got, wantFetches)
		}
		if got := set(accept); got != wantRequests {
			t.Fatalf("%s: the endpoint got %d requests, want %d", step, got, wantRequests)
		}
		if strings.Contains(res.Body, "tok-") || strings.Contains(res.Error, clientSecret) {
			t.Fatalf("%s: the result shows a token or the secret: %+v", step, res)
		}
		return res
	}

	if res := probe("first", 1, 1); !res.Delivered {
		t.Fatalf("first: %+v", res)
	}
	if got := ts.LastRequest().Get("scope"); got != "hooks:write hooks:read" {
		t.Errorf("scope %q", got)
	}
	if res := probe("cached", 1, 1); !res.Delivered {
		t.Fatalf("cached: %+v", res)
	}
	set("tok-2") // the endpoint no longer takes tok-1
	if res := probe("refused", 2, 2); !res.Delivered {
		t.Fatalf("refused, fetched again: %+v", res)
	}
	set("tok-3")
	now = now.Add(time.Hour - 20*time.Second) // within 30 s of its expiry
	if res := probe("expiring", 3, 1); !res.Delivered {
		t.Fatalf("expiring: %+v", res)
	}
	set("nothing")
	if res := probe("always refused", 4, 2); res.Delivered || res.Status != http.StatusUnauthorized || res.Category != topics.FailurePermanent4xx {
		t.Fatalf("an endpoint refusing every token: %+v", res)
	}
	ts.Refuse()
	// The cached token is refused, and no new one comes.
	res := probe("token refused", 4, 1)
	if res.Delivered || res.Category != topics.FailureAuth || !strings.Contains(res.Error, "invalid_client") || strings.Contains(res.Error, "bad secret") {
		t.Fatalf("a token endpoint refusing the client: %+v", res)
	}

	guarded := NewProber(HTTP{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}, ConnectTimeout: 5 * time.Second})
	if res := guarded.Probe(ctx, sub, del); res.Category != topics.FailureBlockedAddr {
		t.Fatalf("a token endpoint on a refused address: %+v", res)
	}
}

// TestMTLS: an endpoint requiring a client certificate takes the
// subscription's, verified against the CA the subscription gives for the
// endpoint; without it, or with a certificate the endpoint does not trust,
// the attempt fails; a new certificate on the subscription is used at once.
func TestMTLS(t *testing.T) {
	server := testcert.New(t, "endpoint")
	client := testcert.New(t, "client")
	stranger := testcert.New(t, "stranger")
	trusted := x509.NewCertPool()
	trusted.AddCert(client.X509)
	endpoint := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "hello "+r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	endpoint.TLS = &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: trusted}
	endpoint.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are expected
	endpoint.StartTLS()
	t.Cleanup(endpoint.Close)

	p := NewProber(HTTP{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, ConnectTimeout: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	del := &topics.Delivery{SubscriptionID: "sub_1", EventID: "evt_1", EventType: "a", Timestamp: time.Now().Format(time.RFC3339), Data: []byte(`{}`), Attempt: 1}
	sub := &topics.Subscription{ID: "sub_1", URL: endpoint.URL + "/hooks", EventTypes: []string{"*"}, Enabled: true, Secret: mustSecret(t),
		Auth: &topics.EndpointAuth{Type: topics.AuthMTLS, Certificate: string(client.CertPEM), Key: string(client.KeyPEM), CA: string(server.CertPEM)}}
	if err := sub.Validate(); err != nil {
		t.Fatal(err)
	}
	if res := p.Probe(ctx, sub, del); !res.Delivered || res.Body != "hello client" {
		t.Fatalf("with the client certificate: %+v", res)
	}
	plain := *sub
	plain.Auth = nil
	if res := p.Probe(ctx, &plain, del); res.Delivered || res.Category != topics.FailureTLS {
		t.Fatalf("without auth (the endpoint's CA unknown): %+v", res)
	}
	noCA := *sub
	noCA.Auth = &topics.EndpointAuth{Type: topics.AuthMTLS, Certificate: string(client.CertPEM), Key: string(client.KeyPEM)}
	if res := p.Probe(ctx, &noCA, del); res.Delivered || res.Category != topics.FailureTLS {
		t.Fatalf("without the endpoint's CA: %+v", res)
	}
	sub.Auth = &topics.EndpointAuth{Type: topics.AuthMTLS, Certificate: string(stranger.CertPEM), Key: string(stranger.KeyPEM), CA: string(server.CertPEM)}
	if res := p.Probe(ctx, sub, del); res.Delivered {
		t.Fatalf("with a certificate the endpoint does not trust: %+v", res)
	}
	sub.Auth.Certificate, sub.Auth.Key = string(client.CertPEM), string(client.KeyPEM)
	if res := p.Probe(ctx, sub, del); !res.Delivered {
		t.Fatalf("with the client certificate again: %+v", res)
	}
}
