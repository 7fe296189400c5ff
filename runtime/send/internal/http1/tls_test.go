package http1

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// tlsServer is an https endpoint that offers HTTP/2 and HTTP/1.1 and
// records each request's protocol and whether its TLS session was resumed.
type tlsServer struct {
	srv     *httptest.Server
	conns   atomic.Int32
	mu      sync.Mutex
	protos  []string
	resumed []bool
}

func newTLSServer(t *testing.T) *tlsServer {
	t.Helper()
	s := &tlsServer{}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.protos = append(s.protos, r.Proto)
		s.resumed = append(s.resumed, r.TLS.DidResume)
		s.mu.Unlock()
		_, _ = io.WriteString(w, "got "+string(b))
	}))
	s.srv.EnableHTTP2 = true
	s.srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	return s
}

// transport is a TLS transport trusting roots (the server's certificate
// when nil).
func (s *tlsServer) transport(roots *x509.CertPool) *Transport {
	if roots == nil {
		roots = x509.NewCertPool()
		roots.AddCert(s.srv.Certificate())
	}
	tr := newTransport()
	tr.TLS = &tls.Config{RootCAs: roots, ClientSessionCache: tls.NewLRUClientSessionCache(8)}
	return tr
}

// TestTLS: https requests one after another share one connection, speak
// HTTP/1.1 although the endpoint offers HTTP/2, and a new connection after
// the idle ones were closed resumes the TLS session.
func TestTLS(t *testing.T) {
	s := newTLSServer(t)
	tr := s.transport(nil)
	defer tr.CloseIdle()
	for i := range 5 {
		status, body, err := post(ctx(t), tr, s.srv.URL+"/hook", "event-"+string(rune('a'+i)))
		if err != nil || status != 200 || body != "got event-"+string(rune('a'+i)) {
			t.Fatalf("request %d: %d %q %v", i, status, body, err)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("%d connections for five requests one after another, want 1", n)
	}
	tr.CloseIdle()
	if status, _, err := post(ctx(t), tr, s.srv.URL+"/hook", "again"); err != nil || status != 200 {
		t.Fatalf("after closing the idle connections: %d %v", status, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := strings.Join(s.protos, ","); got != strings.TrimSuffix(strings.Repeat("HTTP/1.1,", 6), ",") {
		t.Fatalf("protocols %s, want HTTP/1.1 each time", got)
	}
	if s.resumed[0] || !s.resumed[5] {
		t.Fatalf("resumed %v: the first connection's handshake is full, the second resumes", s.resumed)
	}
}

// TestTLSRefusesUntrusted: an endpoint whose certificate the roots do not
// hold fails with the verification error, and each transport takes only
// its own scheme.
func TestTLSRefusesUntrusted(t *testing.T) {
	s := newTLSServer(t)
	_, _, err := post(ctx(t), s.transport(x509.NewCertPool()), s.srv.URL+"/hook", "x")
	var verr *tls.CertificateVerificationError
	if !errors.As(err, &verr) {
		t.Fatalf("untrusted endpoint: %v, want a certificate verification error", err)
	}
	if _, _, err := post(ctx(t), s.transport(nil), strings.Replace(s.srv.URL, "https", "http", 1), "x"); err == nil {
		t.Fatal("a TLS transport posted to an http:// URL")
	}
	if _, _, err := post(ctx(t), newTransport(), s.srv.URL, "x"); err == nil {
		t.Fatal("a plain transport posted to an https:// URL")
	}
	if n := s.conns.Load(); n != 1 {
		t.Fatalf("%d connections, want only the refused one", n)
	}
}
