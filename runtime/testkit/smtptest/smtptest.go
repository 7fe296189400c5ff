// Package smtptest runs a real SMTP server on 127.0.0.1 for tests of mail
// senders: it offers STARTTLS with a self-signed certificate
// (testcert), accepts AUTH PLAIN only over TLS and with the one user it
// was given, refuses mail from a client that did not authenticate, and
// records every mail it accepts.
package smtptest

import (
	"crypto/tls"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/hookpipe/hookpipe/runtime/testkit/testcert"
)

// Mail is a mail the server accepted.
type Mail struct {
	From string
	To   []string
	// Data is the message as sent: headers, blank line, body.
	Data []byte
	// User is who authenticated to send it.
	User string
}

// Server is a running SMTP server.
type Server struct {
	// Addr is its host:port.
	Addr string
	// CAPEM is the certificate its STARTTLS presents, which verifies
	// itself: give it to the client as the CA.
	CAPEM []byte

	user, password string
	mu             sync.Mutex
	mails          []Mail
	changed        chan struct{} // closed and replaced at each mail
}

// New starts a server that accepts user with password; it stops when the
// test ends.
func New(tb testing.TB, user, password string) *Server {
	tb.Helper()
	cert := testcert.New(tb, "smtptest")
	s := &Server{CAPEM: cert.CertPEM, user: user, password: password, changed: make(chan struct{})}
	srv := smtp.NewServer(s)
	srv.Domain = "127.0.0.1"
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12}
	srv.ReadTimeout, srv.WriteTimeout = 10*time.Second, 10*time.Second
	srv.ErrorLog = testLogger{tb}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	s.Addr = ln.Addr().String()
	go func() { _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close() })
	return s
}

// Mails are the mails accepted so far, oldest first.
func (s *Server) Mails() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.mails)
}

// Changed is closed at the next mail accepted: wait on it rather than
// polling Mails.
func (s *Server) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// NewSession implements smtp.Backend.
func (s *Server) NewSession(*smtp.Conn) (smtp.Session, error) { return &session{s: s}, nil }

type session struct {
	s    *Server
	user string // "" until authenticated
	mail Mail
}

// AuthMechanisms implements smtp.AuthSession; the server offers them only
// once the connection is TLS.
func (se *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (se *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, user, password string) error {
		if (identity != "" && identity != user) || user != se.s.user || password != se.s.password {
			return smtp.ErrAuthFailed
		}
		se.user = user
		return nil
	}), nil
}

func (se *session) Mail(from string, _ *smtp.MailOptions) error {
	if se.user == "" {
		return smtp.ErrAuthRequired
	}
	se.mail = Mail{From: from, User: se.user}
	return nil
}

func (se *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	se.mail.To = append(se.mail.To, to)
	return nil
}

func (se *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	se.mail.Data = b
	s := se.s
	s.mu.Lock()
	s.mails = append(s.mails, se.mail)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return nil
}

func (se *session) Reset()        { se.mail = Mail{} }
func (se *session) Logout() error { return nil }

// testLogger sends the server's errors to the test's log.
type testLogger struct{ tb testing.TB }

func (l testLogger) Printf(format string, v ...any) { l.tb.Logf("smtptest: "+format, v...) }
func (l testLogger) Println(v ...any)               { l.tb.Log(append([]any{"smtptest:"}, v...)...) }
