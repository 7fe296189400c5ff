package send

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// amqpChannels bounds the channels of a destination's connection, and so
// its publishes in flight: each channel has one at a time.
const amqpChannels = 64

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
	ch, err := c.acquire(ctx)
	if err != nil {
		return amqpError(err)
	}
	err = ch.publish(ctx, d, m)
	c.release(ch, err)
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
	return &amqpConn{conn: conn, free: make(chan *amqpChannel, amqpChannels), slots: make(chan struct{}, amqpChannels)}, nil
}

// amqpConn is a destination's connection and its channels in confirm
// mode. A channel has one publish in flight at a time, so that a
// returned (unroutable) message is told to the publish it belongs to: a
// return carries no delivery tag, and comes just before its confirm.
type amqpConn struct {
	conn  *amqp.Connection
	free  chan *amqpChannel // channels not in use
	slots chan struct{}     // a token per channel open
}

// acquire is a channel not in use, opened when none is free and fewer
// than amqpChannels are open.
func (c *amqpConn) acquire(ctx context.Context) (*amqpChannel, error) {
	select {
	case ch := <-c.free:
		return ch, nil
	default:
	}
	select {
	case ch := <-c.free:
		return ch, nil
	case c.slots <- struct{}{}:
		ch, err := openChannel(c.conn)
		if err != nil {
			<-c.slots
		}
		return ch, err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// release gives ch back after a publish that ended with err. A channel
// the broker closed is dropped, and so is one whose publish was not
// confirmed in time: its late return would be taken for the next one's.
func (c *amqpConn) release(ch *amqpChannel, err error) {
	if err != nil && (ch.ch.IsClosed() || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)) {
		ch.ch.Close()
		<-c.slots
		return
	}
	c.free <- ch
}

// amqpChannel is a channel in confirm mode, with what the broker returns
// or closes it with.
type amqpChannel struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
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
	// Buffered: the client hands a return (or the close) over before it
	// goes on to the confirm that follows, so it is there once the
	// confirm is.
	return &amqpChannel{
		ch:      ch,
		returns: ch.NotifyReturn(make(chan amqp.Return, 1)),
		closed:  ch.NotifyClose(make(chan *amqp.Error, 1)),
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
	dc, err := ch.ch.PublishWithDeferredConfirmWithContext(ctx, d.Exchange, key, true, false, amqp.Publishing{
		Headers:      headers,
		ContentType:  "application/json",
		DeliveryMode: amqp.Persistent,
		MessageId:    m.ID,
		Type:         m.Type,
		Body:         m.Body,
	})
	if err != nil {
		return amqpError(err)
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		return err
	}
	select {
	case r := <-ch.returns:
		return fmt.Errorf("%w: unroutable: exchange %q has no queue for routing key %q (%d %s)",
			classify.ErrRefused, d.Exchange, key, r.ReplyCode, r.ReplyText)
	default:
	}
	if acked {
		return nil
	}
	select {
	case e := <-ch.closed:
		if e != nil {
			return amqpError(e)
		}
	default:
	}
	return errors.New("rabbitmq: the broker did not take the message (nack)")
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
