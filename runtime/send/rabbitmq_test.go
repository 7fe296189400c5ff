package send

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/testkit/queuetest"
	"github.com/hookpipe/hookpipe/topics"
)

// rabbitDestination is the exchange e of the RabbitMQ at raw, with the
// broker's user and password.
func rabbitDestination(t testing.TB, raw string, e *queuetest.Exchange) *topics.Destination {
	u, user, password := withoutUser(t, raw)
	return &topics.Destination{Type: topics.DestinationRabbitMQ, URL: u, Exchange: e.Name, Username: user, Password: password}
}

// rabbitDirect is a Sender of maxInFlight requests at once and a
// subscription delivering to a direct exchange of the test's own, which
// queues order.created.
func rabbitDirect(t *testing.T, maxInFlight int) (*queuetest.Exchange, topics.Subscription, *Sender) {
	raw := queuetest.AMQP(t)
	e := queuetest.NewExchange(t, raw, amqp.ExchangeDirect, "order.created")
	s := New(loopback, Options{MaxInFlight: maxInFlight, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	return e, destinationSub(t, rabbitDestination(t, raw, e)), s
}

// TestRabbitMQDestination: deliveries to a RabbitMQ destination are
// published to the customer's exchange, persistent, routed by the event
// type, with the body an endpoint gets and the Standard Webhooks headers,
// which verify as a receiver would verify them; a key's messages are
// queued in order.
func TestRabbitMQDestination(t *testing.T) {
	t.Parallel()
	e, sub, s := rabbitDirect(t, 4)
	ids := []string{"evt_1", "evt_2", "evt_3", "evt_4"}
	sendKeyed(t, s, &sub, "customer-7", ids...)

	for i, m := range e.Read(t, len(ids), 20*time.Second) {
		h := amqpHeader(m.Headers)
		verify(t, h, m.Body, sub.Secret)
		if got := h.Get("webhook-id"); got != ids[i] {
			t.Errorf("message %d is %s, want %s: a key's messages in order", i, got, ids[i])
		}
		if m.MessageId != ids[i] || m.DeliveryMode != amqp.Persistent || m.ContentType != "application/json" ||
			m.RoutingKey != "order.created" || h.Get("X-Tenant") != "acme" {
			t.Errorf("message %s: id %q, mode %d, type %q, key %q, headers %v: want the webhook-id, persistent, JSON, "+
				"routed by the event type, the subscription's headers", ids[i], m.MessageId, m.DeliveryMode, m.ContentType, m.RoutingKey, h)
		}
	}
}

func amqpHeader(t amqp.Table) http.Header {
	h := http.Header{}
	for k, v := range t {
		h.Add(k, fmt.Sprint(v))
	}
	return h
}

// TestRabbitMQDestinationRefusals: what retrying cannot change is dead at
// once (an exchange that does not exist, a message no queue is bound for,
// a wrong password, a broker the SSRF guard refuses), and a broker that is
// down is retried.
func TestRabbitMQDestinationRefusals(t *testing.T) {
	t.Parallel()
	raw := queuetest.AMQP(t)
	e := queuetest.NewExchange(t, raw, amqp.ExchangeDirect, "order.created")
	down := "amqp://" + closedPort(t) + "/"
	testRefusals(t, func(t *testing.T) *topics.Destination { return rabbitDestination(t, raw, e) }, []refusal{
		{"no such exchange", func(d *topics.Destination) { d.Exchange = "missing." + e.Name }, loopback, classify.Dead, topics.FailureRefused},
		{"unroutable", func(d *topics.Destination) { d.RoutingKey = "nobody" }, loopback, classify.Dead, topics.FailureRefused},
		{"wrong password", func(d *topics.Destination) { d.Password = "wrong" }, loopback, classify.Dead, topics.FailureRefused},
		{"guarded address", func(*topics.Destination) {}, guarded, classify.Dead, topics.FailureBlockedAddr},
		{"broker down", func(d *topics.Destination) { d.URL = down }, loopback, classify.Retry, topics.FailureConnection},
	})
}

// TestRabbitMQReturnsSharedChannel: publishes in flight together on a
// destination's one channel, half of them unroutable (an event type no
// queue is bound for), are each told their own outcome: the routable
// ones acknowledged and queued, the others refused.
func TestRabbitMQReturnsSharedChannel(t *testing.T) {
	t.Parallel()
	e, sub, s := rabbitDirect(t, 64)
	ctx := testCtx(t, 30*time.Second)
	const n = 200
	actions := make([]classify.Action, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d := newDelivery(sub.ID, fmt.Sprintf("evt_%d", i))
			if i%2 == 1 {
				d.EventType = "order.unbound"
			}
			resp, err := s.Send(ctx, &sub, &d, nil)
			actions[i] = classify.For(&sub, resp.Status, err).Action
		})
	}
	wg.Wait()
	for i, a := range actions {
		if want := []classify.Action{classify.Success, classify.Dead}[i%2]; a != want {
			t.Errorf("delivery %d: %v, want %v", i, a, want)
		}
	}
	for _, m := range e.Read(t, n/2, 20*time.Second) {
		if id := m.MessageId; id[len(id)-1]%2 == 1 {
			t.Errorf("%s was queued: an unroutable message", id)
		}
	}
}

// TestRabbitMQReconnects: a connection the broker closed (it stopped) is
// dropped, the attempt retried, and once the broker is back the next
// attempt connects anew.
func TestRabbitMQReconnects(t *testing.T) {
	t.Parallel()
	srv := queuetest.Start(t, queuetest.RabbitMQ)
	e := queuetest.NewExchange(t, srv.URL(), amqp.ExchangeDirect, "order.created")
	sub := destinationSub(t, rabbitDestination(t, srv.URL(), e))
	s := New(loopback, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	sendKeyed(t, s, &sub, "k", "evt_1")

	srv.Stop()
	d := newDelivery(sub.ID, "evt_2")
	resp, err := s.Send(testCtx(t, 30*time.Second), &sub, &d, nil)
	if res := classify.For(&sub, resp.Status, err); res.Action != classify.Retry {
		t.Fatalf("with the broker stopped: %v (%v), want a retry", res, err)
	}
	srv.Restart()
	sendKeyed(t, s, &sub, "k", "evt_2", "evt_3")
	if got := e.Read(t, 3, 20*time.Second); got[2].MessageId != "evt_3" {
		t.Errorf("after the restart, message 3 is %s, want evt_3", got[2].MessageId)
	}
}

// TestRabbitMQRefusals: the broker's reply codes retrying cannot change
// are refusals, wrapped or not; the others are not.
func TestRabbitMQRefusals(t *testing.T) {
	for _, err := range []error{amqp.ErrCredentials, amqp.ErrVhost,
		fmt.Errorf("channel shutdown error: %w", &amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no exchange 'x'"})} {
		if !errors.Is(amqpError(err), classify.ErrRefused) {
			t.Errorf("%v is not a refusal", err)
		}
	}
	for _, err := range []error{amqp.ErrClosed, &amqp.Error{Code: amqp.ConnectionForced}, context.DeadlineExceeded} {
		if errors.Is(amqpError(err), classify.ErrRefused) {
			t.Errorf("%v is a refusal", err)
		}
	}
}
