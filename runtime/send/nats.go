package send

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// natsConnectTimeout bounds a connection's dial and handshake (the dial
// alone is bounded by the Sender's connect timeout too), the first one
// and every reconnection, which the client makes in the background.
const natsConnectTimeout = 10 * time.Second

// natsPublisher publishes to JetStream subjects on the customers' own NATS
// servers, one connection per destination (see conns).
type natsPublisher struct {
	dial  dialFunc
	conns *conns[*natsConn]
}

// natsConn is a destination's connection and its JetStream context.
type natsConn struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func newNATSPublisher(dial dialFunc) Publisher {
	return &natsPublisher{dial: dial, conns: newConns(
		func(c *natsConn) { c.nc.Close() },
		// A connection reconnects on its own while it can; once it gave
		// up it is closed for good, and the next attempt dials anew.
		func(c *natsConn) bool { return !c.nc.IsClosed() })}
}

// Publish publishes m to d's subject and waits for the stream's ack. The
// webhook-id is the message id: a stream drops a second copy within its
// duplicate window, so a retry whose first try was stored after all is
// stored once.
func (p *natsPublisher) Publish(ctx context.Context, d *topics.Destination, m *Message) error {
	c, err := p.conns.get(d, func() (*natsConn, error) { return p.connect(ctx, d) })
	if err != nil {
		return err
	}
	msg := &nats.Msg{Subject: d.Subject, Data: m.Body, Header: make(nats.Header, len(m.Header)+1)}
	for _, f := range m.Header {
		msg.Header.Add(f.Name, f.Value)
	}
	_, err = c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(m.ID))
	return natsError(err)
}

func (p *natsPublisher) Close() { p.conns.close() }

// connect opens a connection to d: dialled through the SSRF guard (every
// server the cluster announces too), TLS for a tls:// URL, with d's
// credentials.
func (p *natsPublisher) connect(ctx context.Context, d *topics.Destination) (*natsConn, error) {
	u, err := url.Parse(d.URL) // validated with the subscription
	if err != nil {
		return nil, fmt.Errorf("%w: %v", classify.ErrRefused, err)
	}
	// The client turns a refused connection into "no servers available":
	// dial once first, so that a guarded address and a server that is down
	// are told as such.
	if err := reach(ctx, p.dial, u.Host); err != nil {
		return nil, err
	}
	opts := []nats.Option{
		nats.Name("hookpipe"),
		nats.SetCustomDialer(natsDialer(p.dial)),
		// Dial the host as given: the guard (or the egress proxy) resolves
		// it and checks the address it reaches.
		nats.SkipHostLookup(),
		nats.Timeout(natsConnectTimeout),
		// While it reconnects the client would buffer a publish and send it
		// once back, long after its attempt gave up and was scheduled
		// again, past the stream's duplicate window: fail it at once.
		nats.ReconnectBufSize(-1),
		// The client's asynchronous errors would go to stderr; those that
		// matter to an attempt come back to it (a publish never acked
		// times out and is retried).
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}),
	}
	if u.Scheme == "tls" {
		opts = append(opts, nats.Secure(&tls.Config{RootCAs: caPool(d.CA), MinVersion: tls.VersionTLS12}))
	}
	switch {
	case d.Token != "":
		opts = append(opts, nats.Token(d.Token))
	case d.Username != "":
		opts = append(opts, nats.UserInfo(d.Username, d.Password))
	}
	nc, err := nats.Connect(d.URL, opts...)
	if err != nil {
		return nil, natsError(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsConn{nc: nc, js: js}, nil
}

// natsDialer is the client's dialer: the Sender's, each dial bounded by
// natsConnectTimeout as the client dials without a context.
type natsDialer dialFunc

func (dial natsDialer) Dial(network, address string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), natsConnectTimeout)
	defer cancel()
	return dial(ctx, network, address)
}

// caPool is ca's certificates (PEM), or nil for the system's roots.
func caPool(ca string) *x509.CertPool {
	if ca == "" {
		return nil
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(ca)) // validated with the subscription
	return roots
}

// natsRefusals are the answers retrying cannot change: no stream captures
// the subject (nothing answered the publish), the credentials or the
// account are refused, or the message is larger than the server takes.
var natsRefusals = []error{
	jetstream.ErrNoStreamResponse, nats.ErrNoResponders,
	nats.ErrAuthorization, nats.ErrAuthExpired, nats.ErrAuthRevoked, nats.ErrAccountAuthExpired,
	nats.ErrPermissionViolation, nats.ErrMaxPayload,
}

// natsError marks a refusal as classify.ErrRefused.
func natsError(err error) error {
	for _, r := range natsRefusals {
		if errors.Is(err, r) {
			return fmt.Errorf("%w: %w", classify.ErrRefused, err)
		}
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum {
		return fmt.Errorf("%w: %w", classify.ErrRefused, err)
	}
	return err
}
