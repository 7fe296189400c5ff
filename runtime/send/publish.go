package send

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/send/internal/http1"
	"github.com/hookpipe/hookpipe/runtime/send/internal/sign"
	"github.com/hookpipe/hookpipe/topics"
)

// A Publisher delivers messages to destinations of one kind (a Kafka
// topic, a NATS subject, a RabbitMQ exchange, an SQS queue). It keeps a
// connection per destination it has seen, dialled through the SSRF guard
// and the egress proxy like an HTTP endpoint.
type Publisher interface {
	// Publish sends m to d and returns once d has acknowledged it. An
	// error wrapping classify.ErrRefused is a refusal retrying cannot
	// change (no such topic or queue, access denied); any other error is
	// retried on the subscription's schedule.
	Publish(ctx context.Context, d *topics.Destination, m *Message) error
	// Close drops every connection.
	Close()
}

// Field is a header of a message: its name and value.
type Field = http1.Field

// Message is one delivery as a destination other than an HTTP endpoint
// gets it: the body an endpoint would get and the headers that sign it.
type Message struct {
	// ID is the webhook-id: the event's id.
	ID string
	// Key orders the messages of one key: the event's ordering key, or
	// its id when it has none (Kafka's record key, an SQS FIFO queue's
	// message group id).
	Key string
	// Type is the event's type (RabbitMQ's routing key by default).
	Type string
	// Body is the JSON body, as an HTTP endpoint gets it.
	Body []byte
	// Header is the subscription's headers and the trace context, then
	// Content-Type, webhook-id, webhook-timestamp and webhook-signature.
	Header []Field
}

// dialFunc dials a destination's address through the SSRF guard (and the
// egress proxy, when one is set).
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// publisher is the Publisher of a destination kind, made when a
// subscription of that kind first sends.
func (s *Sender) publisher(kind string) (Publisher, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.publishers[kind]; p != nil {
		return p, nil
	}
	newPublisher := publisherKinds[kind]
	if newPublisher == nil {
		return nil, fmt.Errorf("%w: destination type %q is not supported", classify.ErrRefused, kind)
	}
	p := newPublisher(s.dial)
	s.publishers[kind] = p
	return p, nil
}

// publisherKinds make the Publisher of each destination kind but http.
var publisherKinds = map[string]func(dial dialFunc) Publisher{
	topics.DestinationKafka:    newKafkaPublisher,
	topics.DestinationNATS:     newNATSPublisher,
	topics.DestinationRabbitMQ: newRabbitPublisher,
	topics.DestinationSQS:      newSQSPublisher,
}

// publish sends a delivery to a destination other than an HTTP endpoint.
func (s *Sender) publish(ctx context.Context, req request, d *topics.Delivery,
	traced []kgo.RecordHeader) (Response, error) {
	p, err := s.publisher(req.sub.Destination.Type)
	if err != nil {
		return Response{}, err
	}
	now := time.Now()
	m := s.message(req, d, traced, now)
	err = p.Publish(ctx, req.sub.Destination, m)
	return Response{Duration: time.Since(now)}, err
}

// message signs req's body for d at now.
func (s *Sender) message(req request, d *topics.Delivery, traced []kgo.RecordHeader, now time.Time) *Message {
	sub, b := req.sub, req.body
	keys := s.keys.of(sub, now)
	h := append(subscriptionHeader(sub, traced, 4),
		Field{Name: "Content-Type", Value: "application/json"},
		Field{Name: "webhook-id", Value: d.EventID},
		Field{Name: "webhook-timestamp", Value: strconv.FormatInt(now.Unix(), 10)},
		Field{Name: "webhook-signature", Value: sign.Signature(keys, d.EventID, now.Unix(), b)})
	key := d.Key
	if key == "" {
		key = d.EventID
	}
	return &Message{ID: d.EventID, Key: key, Type: d.EventType, Body: b, Header: h}
}

// reach dials addr once, before a client is made for a destination: an
// address the SSRF guard refuses fails at once as a blocked address, and a
// server that is down as a connection failure, rather than as a client
// retrying until the attempt's timeout.
func reach(ctx context.Context, dial dialFunc, addr string) error {
	conn, err := dial(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}
