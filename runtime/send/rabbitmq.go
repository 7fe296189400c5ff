package send

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// amqpInFlight bounds the publishes in flight on a destination's
// connection, all on one channel: the broker confirms many at once. A
// channel per publish in flight cost the broker 30% more CPU per message
// than the bare client's one channel (BenchmarkPublish); one, 10%.
const amqpInFlight = 64

// rabbitPublisher publishes to exchanges on the customers' own RabbitMQ
// brokers, one connection per destination (see conns).
type rabbitPublisher struct {
	dial  dialFunc
	conns *conns[*amqpConn]
}

func newRabbitPublisher(dial dialFunc) Publisher {
	return &rabbitPublisher{dial: dial, conns: newConns(
		func(c *amqpConn) { c.conn.Close() },
		// The client does not reconnect: a connection the broker or the
		// network closed is replaced on the next attempt.
		func(c *amqpConn) bool { return !c.conn.IsClosed() })}
}

// Publish publishes m to d's exchange, persistent and mandatory, and waits
// for the broker's confirm. The routing key is d's, else the event type.
func (p *rabbitPublisher) Publish(ctx context.Context, d *topics.Destination, m *Message) error {
	c, err := p.conns.get(d, func() (*amqpConn, error) { return p.connect(ctx, d) })
	if err != nil {
		return err
	}
	select {
	case c.slots <- struct{}{}:
		defer func() { <-c.slots }()
	case <-ctx.Done():
		return ctx.Err()
	}
	ch, err := c.channel()
	if err != nil {
		return amqpError(err)
	}
	err = ch.publish(ctx, d, m)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		c.retire(ch)
	}
	return err
}

func (p *rabbitPublisher) Close() { p.conns.close() }

// connect opens a connection to d: dialled through the SSRF guard, TLS
// with d's CA for amqps, d's credentials, the vhost from the URL's path.
func (p *rabbitPublisher) connect(ctx context.Context, d *topics.Destination) (*amqpConn, error) {
	cfg := amqp.Config{
		// Called once, within DialConfig, so within this attempt.
		Dial: func(network, addr string) (net.Conn, error) {
			conn, err := p.dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			// Bounds the TLS and AMQP handshakes; the client clears it
			// once the connection is open.
			if deadline, ok := ctx.Deadline(); ok {
				_ = conn.SetDeadline(deadline)
			}
			return conn, nil
		},
		TLSClientConfig: &tls.Config{RootCAs: caPool(d.CA), MinVersion: tls.VersionTLS12},
		Properties:      amqp.Table{"connection_name": "hookpipe"},
	}
	if d.Username != "" {
		cfg.SASL = []amqp.Authentication{&amqp.PlainAuth{Username: d.Username, Password: d.Password}}
	}
	conn, err := amqp.DialConfig(d.URL, cfg)
	if err != nil {
		return nil, amqpError(err)
	}
	return &amqpConn{conn: conn, slots: make(chan struct{}, amqpInFlight)}, nil
}

// amqpConn is a destination's connection and its channel in confirm
// mode, which every publish to the destination shares.
type amqpConn struct {
	conn  *amqp.Connection
	slots chan struct{} // a token per publish in flight
	mu    sync.Mutex
	ch    *amqpChannel // nil until the first publish, or once retired
}

// channel is the channel publishes go on, opened anew when the broker
// closed it or it was retired.
func (c *amqpConn) channel() (*amqpChannel, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil && !c.ch.ch.IsClosed() {
		return c.ch, nil
	}
	ch, err := openChannel(c.conn)
	if err != nil {
		return nil, err
	}
	c.ch = ch
	return ch, nil
}

// retire stops new publishes on ch after one was not confirmed in time:
// its late return would be taken for a later publish of the same message
// (a retry). ch closes once its last publish is confirmed.
func (c *amqpConn) retire(ch *amqpChannel) {
	c.mu.Lock()
	if c.ch == ch {
		c.ch = nil
	}
	c.mu.Unlock()
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.retired = true
	if len(ch.pending) == 0 {
		ch.ch.Close()
	}
}

// amqpChannel is a channel in confirm mode with publishes in flight. A
// return (an unroutable message) carries no delivery tag, but it comes
// before the confirm of its message and names its message id: a publish
// once confirmed looks for its id among the returns.
type amqpChannel struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
	mu      sync.Mutex
	pending map[string]int // message ids in flight
	// returned are the returns of messages in flight not yet taken.
	returned map[string]int
	closeErr *amqp.Error // why the broker closed the channel, once it did
	retired  bool
}

func openChannel(conn *amqp.Connection) (*amqpChannel, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, err
	}
	// Buffered for every publish in flight and as many given up on: the
	// client hands a return (or the close) over before it goes on to the
	// confirm that follows, so it is there once the confirm is.
	return &amqpChannel{
		ch:       ch,
		returns:  ch.NotifyReturn(make(chan amqp.Return, 2*amqpInFlight)),
		closed:   ch.NotifyClose(make(chan *amqp.Error, 1)),
		pending:  map[string]int{},
		returned: map[string]int{},
	}, nil
}

// publish publishes m and waits for its confirm: an ack is a delivery,
// unless the message came back unroutable; a nack is retried; a channel
// closed instead says why (no such exchange, access refused).
func (ch *amqpChannel) publish(ctx context.Context, d *topics.Destination, m *Message) error {
	key := d.RoutingKey
	if key == "" {
		key = m.Type
	}
	headers := make(amqp.Table, len(m.Header))
	for _, f := range m.Header {
		headers[f.Name] = f.Value
	}
	ch.mu.Lock()
	ch.pending[m.ID]++
	ch.mu.Unlock()
	dc, err := ch.ch.PublishWithDeferredConfirmWithContext(ctx, d.Exchange, key, true, false, amqp.Publishing{
		Headers:      headers,
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    m.ID,
		Type:         m.Type,
		Body:         m.Body,
	})
	if err != nil {
		_, _ = ch.done(m.ID) // never sent: neither returned nor confirmed
		return amqpError(err)
	}
	acked, err := dc.WaitContext(ctx)
	returned, closeErr := ch.done(m.ID)
	switch {
	case err != nil:
		return err
	case returned:
		return fmt.Errorf("%w: unroutable: exchange %q has no queue for routing key %q",
			classify.ErrRefused, d.Exchange, key)
	case acked:
		return nil
	case closeErr != nil:
		return amqpError(closeErr)
	}
	return errors.New("rabbitmq: the broker did not take the message (nack)")
}

// done ends the publish of message id: whether the broker returned it,
// and why it closed the channel if it did. It takes in the returns and
// the close the client handed over so far, which once the publish is
// confirmed include its own.
func (ch *amqpChannel) done(id string) (returned bool, closeErr *amqp.Error) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for drained := false; !drained; {
		select {
		case r, ok := <-ch.returns:
			switch {
			case !ok: // the channel closed: nothing more comes
				ch.returns, drained = nil, true
			case ch.pending[r.MessageId] > 0: // else given up on: nobody waits for it
				ch.returned[r.MessageId]++
			}
		default:
			drained = true
		}
	}
	select {
	case e := <-ch.closed:
		if e != nil {
			ch.closeErr = e
		}
	default:
	}
	if returned = ch.returned[id] > 0; returned {
		ch.returned[id]--
	}
	if ch.pending[id]--; ch.pending[id] == 0 {
		delete(ch.pending, id)
		delete(ch.returned, id)
	}
	if ch.retired && len(ch.pending) == 0 {
		ch.ch.Close()
	}
	return returned, ch.closeErr
}

// amqpRefusals are the broker's reply codes retrying cannot change: no
// such exchange (404), access refused (403, wrong credentials included),
// a vhost the user may not use (530), a message the exchange or the
// broker does not take (406: too large, say).
var amqpRefusals = []int{amqp.NotFound, amqp.AccessRefused, amqp.NotAllowed, amqp.PreconditionFailed}

// amqpError marks a refusal as classify.ErrRefused.
func amqpError(err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		for _, code := range amqpRefusals {
			if ae.Code == code {
				return fmt.Errorf("%w: %w", classify.ErrRefused, err)
			}
		}
	}
	return err
}
