package queuetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// AMQP returns the shared test RabbitMQ's URL (WEBHOOKS_TEST_AMQP_URL). It
// skips tb when the variable is unset (fails it when services are
// required).
func AMQP(tb testing.TB) string {
	tb.Helper()
	return shared(tb, EnvAMQPURL, RabbitMQ, 15673, "a real RabbitMQ")
}

// Exchange is an exchange of one test's own bound to a queue of its own.
type Exchange struct {
	URL      string
	Name     string
	Kind     string // direct, topic, fanout, headers
	Queue    string
	Conn     *amqp.Connection // the helper's own; the code under test brings its own
	consumer string
}

// NewExchange declares a durable exchange of kind (amqp.ExchangeTopic...)
// and a durable classic queue bound to it with bindingKey ("#" on a topic
// exchange takes every routing key), on the RabbitMQ at url; both are
// deleted when the test ends.
func NewExchange(tb testing.TB, url, kind, bindingKey string) *Exchange {
	tb.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		tb.Fatalf("amqp dial: %v", err)
	}
	name := uniqueName("test.")
	e := &Exchange{URL: url, Name: name, Kind: kind, Queue: name, Conn: conn, consumer: name}
	ch, err := conn.Channel()
	if err != nil {
		conn.Close()
		tb.Fatal(err)
	}
	defer ch.Close()
	err = ch.ExchangeDeclare(e.Name, kind, true, false, false, false, nil)
	if err == nil {
		_, err = ch.QueueDeclare(e.Queue, true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeClassic})
	}
	if err == nil {
		err = ch.QueueBind(e.Queue, bindingKey, e.Name, false, nil)
	}
	if err != nil {
		conn.Close()
		tb.Fatalf("declare exchange %s and queue: %v", e.Name, err)
	}
	tb.Cleanup(func() {
		// Best effort, on a new connection: the test may have stopped
		// its server, or restarted it.
		conn.Close()
		c, err := amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second)})
		if err != nil {
			return
		}
		defer c.Close()
		if ch, err := c.Channel(); err == nil {
			_, _ = ch.QueueDelete(e.Queue, false, false, false)
			_ = ch.ExchangeDelete(e.Name, false, false)
		}
	})
	return e
}

// Count is how many messages wait in the queue (ready, not delivered).
func (e *Exchange) Count(tb testing.TB) int {
	tb.Helper()
	ch, err := e.channel()
	if err != nil {
		tb.Fatal(err)
	}
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(e.Queue, true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeClassic})
	if err != nil {
		tb.Fatalf("queue %s: %v", e.Queue, err)
	}
	return q.Messages
}

// Read consumes n messages from the queue within timeout, acknowledges
// them and returns them in the queue's order. It fails tb when fewer
// arrive. Messages after the n-th stay in the queue.
func (e *Exchange) Read(tb testing.TB, n int, timeout time.Duration) []amqp.Delivery {
	tb.Helper()
	ch, err := e.channel()
	if err != nil {
		tb.Fatal(err)
	}
	defer ch.Close()
	// Each message is acknowledged as it comes; those delivered past the
	// n-th go back to the queue, in their place, when the channel closes.
	if err := ch.Qos(min(n, 1000), 0, false); err != nil {
		tb.Fatal(err)
	}
	deliveries, err := ch.Consume(e.Queue, e.consumer, false, false, false, false, nil)
	if err != nil {
		tb.Fatalf("consume %s: %v", e.Queue, err)
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	msgs := make([]amqp.Delivery, 0, n)
	for len(msgs) < n {
		select {
		case d, ok := <-deliveries:
			if !ok {
				tb.Fatalf("queue %s: the channel closed after %d of %d messages", e.Queue, len(msgs), n)
			}
			if err := d.Ack(false); err != nil {
				tb.Fatal(err)
			}
			msgs = append(msgs, d)
		case <-deadline.C:
			tb.Fatalf("queue %s: %d of %d messages within %v", e.Queue, len(msgs), n, timeout)
		}
	}
	if err := ch.Cancel(e.consumer, false); err != nil {
		tb.Fatal(err)
	}
	return msgs
}

// channel is a channel on the helper's connection, dialled again when the
// server was restarted since.
func (e *Exchange) channel() (*amqp.Channel, error) {
	if e.Conn.IsClosed() {
		c, err := amqp.Dial(e.URL)
		if err != nil {
			return nil, fmt.Errorf("amqp dial: %w", err)
		}
		e.Conn = c
	}
	return e.Conn.Channel()
}

// PublishAMQP publishes n persistent messages (msg(i), i from 0, its
// headers and id as the message's) to exchange with routing key key, on a channel of its own in confirm mode,
// with up to inflight unconfirmed (1: each confirmed before the next is
// sent). A nack or a returned (unroutable: published mandatory) message
// is an error. It returns the first error, after which it sends no more.
func PublishAMQP(ctx context.Context, conn *amqp.Connection, exchange, key string, n, inflight int, msg func(int) Msg) error {
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	defer ch.Close()
	if err := ch.Confirm(false); err != nil {
		return err
	}
	// A return comes before the confirm of its message.
	returns := ch.NotifyReturn(make(chan amqp.Return, inflight+1))
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	wait := func(dc *amqp.DeferredConfirmation) error {
		select {
		case <-dc.Done():
		case err := <-closed:
			return fmt.Errorf("channel closed: %w", err)
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case r := <-returns:
			return fmt.Errorf("returned: %d %s", r.ReplyCode, r.ReplyText)
		default:
		}
		if !dc.Acked() {
			return errors.New("nacked by the broker")
		}
		return nil
	}
	window := make([]*amqp.DeferredConfirmation, 0, max(inflight, 1))
	for i := range n {
		if len(window) == max(inflight, 1) {
			if err := wait(window[0]); err != nil {
				return err
			}
			window = window[1:]
		}
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, amqpPublishing(msg(i)))
		if err != nil {
			return err
		}
		window = append(window, dc)
	}
	for _, dc := range window {
		if err := wait(dc); err != nil {
			return err
		}
	}
	return nil
}

// amqpPublishing is m as a persistent JSON message.
func amqpPublishing(m Msg) amqp.Publishing {
	p := amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: m.ID, Body: m.Body}
	if len(m.Header) > 0 {
		p.Headers = make(amqp.Table, len(m.Header))
		for _, h := range m.Header {
			p.Headers[h.Name] = h.Value
		}
	}
	return p
}
