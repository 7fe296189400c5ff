// Package endpointtest runs what sits between the deliverer and an
// endpoint, for tests: an HTTP CONNECT egress proxy and an OAuth2 token
// endpoint, both real servers on 127.0.0.1; and checks what an endpoint
// receives (Verify).
package endpointtest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// ConnectProxy is an HTTP CONNECT proxy that records the tunnels it was
// asked for.
type ConnectProxy struct {
	Srv     *httptest.Server
	auth    string // the Proxy-Authorization it wants
	mu      sync.Mutex
	targets []string
}

// NewConnectProxy starts a proxy that wants user and password.
func NewConnectProxy(tb testing.TB, user, password string) *ConnectProxy {
	p := &ConnectProxy{auth: "Basic " + BasicAuth(user, password)}
	p.Srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		if r.Header.Get("Proxy-Authorization") != p.auth {
			w.WriteHeader(http.StatusProxyAuthRequired)
			return
		}
		p.mu.Lock()
		p.targets = append(p.targets, r.Host)
		p.mu.Unlock()
		dst, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			dst.Close()
			return
		}
		_, _ = io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() { _, _ = io.Copy(dst, conn); dst.Close() }()
		go func() { _, _ = io.Copy(conn, dst); conn.Close() }()
	}))
	tb.Cleanup(p.Srv.Close)
	return p
}

// Tunnels are the addresses the proxy was asked to connect to.
func (p *ConnectProxy) Tunnels() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.targets...)
}

// BasicAuth is the credentials of a Basic Authorization header.
func BasicAuth(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// TokenServer is an OAuth2 token endpoint (client credentials) that hands
// out tok-1, tok-2, ... valid for an hour.
type TokenServer struct {
	Srv     *httptest.Server
	mu      sync.Mutex
	issued  int
	refuse  bool
	lastReq url.Values
}

// NewTokenServer starts a token endpoint for one client.
func NewTokenServer(tb testing.TB, clientID, clientSecret string) *TokenServer {
	ts := &TokenServer{}
	ts.Srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		_ = r.ParseForm()
		ts.lastReq = r.PostForm
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		w.Header().Set("Content-Type", "application/json")
		if ts.refuse || id != clientID || secret != clientSecret || r.PostForm.Get("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusUnauthorized)
			// A careless token endpoint echoing the request.
			_, _ = fmt.Fprintf(w, `{"error":"invalid_client","error_description":"bad secret %s"}`, secret)
			return
		}
		ts.issued++
		_, _ = fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":3600}`, ts.issued)
	}))
	tb.Cleanup(ts.Srv.Close)
	return ts
}

// Fetches is how many tokens were handed out.
func (ts *TokenServer) Fetches() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.issued
}

// Refuse makes every later request answer invalid_client.
func (ts *TokenServer) Refuse() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.refuse = true
}

// LastRequest is the form of the last token request.
func (ts *TokenServer) LastRequest() url.Values {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.lastReq
}

// Verify checks a request's (or message's) Standard Webhooks signatures,
// one per secret, in order, as a receiver computes them.
func Verify(tb testing.TB, header http.Header, body []byte, secrets ...string) {
	tb.Helper()
	id, ts := header.Get("webhook-id"), header.Get("webhook-timestamp")
	sigs := strings.Split(header.Get("webhook-signature"), " ")
	if len(sigs) != len(secrets) {
		tb.Fatalf("webhook-signature %q has %d signatures, want %d", header.Get("webhook-signature"), len(sigs), len(secrets))
	}
	for i, secret := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			tb.Fatal(err)
		}
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + ts + "." + string(body)))
		if want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil)); sigs[i] != want {
			tb.Fatalf("signature %d = %q, want %q (secret %d)", i, sigs[i], want, i)
		}
	}
}
