package send

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/queuetest"
	"github.com/hookpipe/hookpipe/runtime/testkit/testcert"
	"github.com/hookpipe/hookpipe/topics"
)

// natsDestination is the subject s captures on the shared test server at
// raw, with the server's user and password.
func natsDestination(t testing.TB, raw, subject string) *topics.Destination {
	u, user, password := withoutUser(t, raw)
	return &topics.Destination{Type: topics.DestinationNATS, URL: u, Subject: subject, Username: user, Password: password}
}

// TestNATSDestination: deliveries to a NATS destination are published to
// the customer's stream with the body an endpoint gets and the Standard
// Webhooks headers, which verify as a receiver would verify them; a key's
// messages are stored in order, and a second attempt of a delivery the
// stream already has is stored once (the webhook-id is the message id).
func TestNATSDestination(t *testing.T) {
	t.Parallel()
	raw := queuetest.NATS(t)
	st := queuetest.NewStream(t, raw)
	sub := destinationSub(t, natsDestination(t, raw, st.Subject))
	s := New(loopback, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	ids := []string{"evt_1", "evt_2", "evt_3", "evt_4"}
	sendKeyed(t, s, &sub, "customer-7", ids...)
	sendKeyed(t, s, &sub, "customer-7", "evt_1") // a retry of one the stream has

	msgs := st.Read(t, len(ids), 20*time.Second)
	for i, m := range msgs {
		h := natsHeader(m.Header)
		verify(t, h, m.Data, sub.Secret)
		if got := h.Get("webhook-id"); got != ids[i] {
			t.Errorf("message %d is %s, want %s: a key's messages in order", i, got, ids[i])
		}
		if h.Get("Nats-Msg-Id") != ids[i] || h.Get("X-Tenant") != "acme" || h.Get("Content-Type") != "application/json" {
			t.Errorf("message headers %v: want the webhook-id as message id, the subscription's and the content type", h)
		}
	}
	if n := st.Count(t); n != uint64(len(ids)) {
		t.Errorf("the stream holds %d messages, want %d: a retry is stored once", n, len(ids))
	}
}

func natsHeader(nh nats.Header) http.Header {
	h := http.Header{}
	for k, vs := range nh {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return h
}

// TestNATSDestinationRefusals: what retrying cannot change is dead at once
// (a subject no stream captures, a wrong password, a server the SSRF
// guard refuses), and a server that is down is retried.
func TestNATSDestinationRefusals(t *testing.T) {
	t.Parallel()
	raw := queuetest.NATS(t)
	st := queuetest.NewStream(t, raw)
	down := "nats://" + closedPort(t)
	testRefusals(t, func(t *testing.T) *topics.Destination { return natsDestination(t, raw, st.Subject) }, []refusal{
		{"no stream", func(d *topics.Destination) { d.Subject = "nostream." + st.Name }, loopback, classify.Dead, topics.FailureRefused},
		{"wrong password", func(d *topics.Destination) { d.Password = "wrong" }, loopback, classify.Dead, topics.FailureRefused},
		{"guarded address", func(*topics.Destination) {}, guarded, classify.Dead, topics.FailureBlockedAddr},
		{"server down", func(d *topics.Destination) { d.URL = down }, loopback, classify.Retry, topics.FailureConnection},
	})
}

// TestNATSRefusals: the answers retrying cannot change are refusals,
// wrapped or not; the others are not.
func TestNATSRefusals(t *testing.T) {
	for _, err := range []error{jetstream.ErrNoStreamResponse, fmt.Errorf("connect: %w", nats.ErrAuthorization),
		&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamMessageExceedsMaximum}} {
		if !errors.Is(natsError(err), classify.ErrRefused) {
			t.Errorf("%v is not a refusal", err)
		}
	}
	for _, err := range []error{nats.ErrTimeout, nats.ErrConnectionClosed, context.DeadlineExceeded,
		&jetstream.APIError{Code: 503, ErrorCode: jetstream.JSErrCodeJetStreamNotEnabled}} {
		if errors.Is(natsError(err), classify.ErrRefused) {
			t.Errorf("%v is a refusal", err)
		}
	}
}

// TestNATSDestinationTLS: a tls:// destination is reached over TLS,
// verified against the destination's CA (without it, the server's
// certificate is not trusted: a TLS failure, retried), and logs in with
// its token.
func TestNATSDestinationTLS(t *testing.T) {
	t.Parallel()
	addr, cert := tlsNATSServer(t, "s3cret-token")
	nc, err := nats.Connect("tls://"+addr, nats.Token("s3cret-token"),
		nats.Secure(&tls.Config{RootCAs: pool(cert), MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 30*time.Second)
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "hooks", Subjects: []string{"hooks"}, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	s := New(loopback, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	noCA := destinationSub(t, &topics.Destination{Type: topics.DestinationNATS, URL: "tls://" + addr, Subject: "hooks", Token: "s3cret-token"})
	d := newDelivery(noCA.ID, "evt_1")
	resp, err := s.Send(ctx, &noCA, &d, nil)
	if res := classify.For(&noCA, resp.Status, err); res.Action != classify.Retry || res.Category != topics.FailureTLS {
		t.Errorf("without the CA: %v (%v), want a TLS failure, retried", res, err)
	}
	sub := destinationSub(t, &topics.Destination{Type: topics.DestinationNATS, URL: "tls://" + addr, Subject: "hooks",
		Token: "s3cret-token", CA: string(cert.CertPEM)})
	sendKeyed(t, s, &sub, "k", "evt_1")
	m, err := st.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	verify(t, natsHeader(m.Header), m.Data, sub.Secret)
}

// tlsNATSServer runs a nats-server of t's own with JetStream, TLS (a
// certificate of its own, returned) and token authentication, and returns
// its address once it listens.
func tlsNATSServer(t *testing.T, token string) (string, testcert.Cert) {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		testkit.NeedService(t, "nats-server is not installed: run `bash pipeline/scripts/services.sh install`")
	}
	dir, cert, addr := t.TempDir(), testcert.New(t, "customer-nats"), closedPort(t)
	host, port, _ := net.SplitHostPort(addr)
	for name, b := range map[string][]byte{"cert.pem": cert.CertPEM, "key.pem": cert.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf("host: %q\nport: %s\njetstream { store_dir: %q }\nauthorization { token: %q }\n"+
		"tls { cert_file: %q, key_file: %q }\n", host, port, filepath.Join(dir, "js"), token,
		filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem"))
	if err := os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	var out testkit.Buffer
	cmd := exec.Command(bin, "-c", filepath.Join(dir, "nats.conf"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("nats-server:\n%s", out.String())
		}
	})
	testkit.WaitFor(t, 20*time.Second, "nats-server listening", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return addr, cert
}

// TestNATSReconnects: a publish while the server is down fails, to be
// retried, and is not sent later when the client has reconnected (it
// would be stored besides its retry); once the server is back, the
// connection serves again.
func TestNATSReconnects(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t, queuetest.NATSServer)
	st := queuetest.NewStream(t, srv.URL())
	sub := destinationSub(t, natsDestination(t, srv.URL(), st.Subject))
	sub.TimeoutMS = 2000
	s := New(loopback, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	sendKeyed(t, s, &sub, "k", "evt_1")

	srv.Stop()
	d := newDelivery(sub.ID, "evt_2")
	resp, err := s.Send(testCtx(t, 30*time.Second), &sub, &d, nil)
	if res := classify.For(&sub, resp.Status, err); res.Action != classify.Retry {
		t.Fatalf("with the server stopped: %v (%v), want a retry", res, err)
	}
	srv.Restart()
	testkit.WaitFor(t, 20*time.Second, "a delivery once the server is back", func() bool {
		d := newDelivery(sub.ID, "evt_3")
		_, err := s.Send(testCtx(t, 10*time.Second), &sub, &d, nil)
		return err == nil
	})
	if n := st.Count(t); n != 2 {
		t.Fatalf("the stream holds %d messages, want evt_1 and evt_3 alone", n)
	}
	if m := st.Read(t, 2, 10*time.Second)[1]; m.Header.Get("webhook-id") != "evt_3" {
		t.Errorf("message 2 is %s, want evt_3", m.Header.Get("webhook-id"))
	}
}
