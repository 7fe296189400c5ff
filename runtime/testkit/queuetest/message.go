package queuetest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Msg is one message a bare client publishes: its body and, so that the
// yardstick carries what a sender's message carries, an id, an ordering
// key and headers (none when empty).
type Msg struct {
	// ID is the message id (JetStream's Nats-Msg-Id, AMQP's message-id,
	// a FIFO queue's deduplication id).
	ID string
	// Key is Kafka's record key (a FIFO queue's group is PublishSQS's).
	Key    string
	Body   []byte
	Header []Header
}

// Header is a header of a Msg: its name and value.
type Header struct{ Name, Value string }

// Records is Record's messages as bare as they come: no id, no key, no
// headers.
func Records(i int) Msg { return Msg{Body: Record(i)} }

// The headers a hookpipe Sender gives a delivery of a subscription with
// two headers of its own and a trace context: WebhookHeaders names them
// in its order, with values of the lengths it sends.
var (
	WebhookHeaders = []string{
		"X-Tenant", "X-Team", "Traceparent", "Tracestate",
		"Content-Type", "webhook-id", "webhook-timestamp", "webhook-signature",
	}
	// Traceparent and Tracestate are the trace context of the deliveries.
	Traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	Tracestate  = "rojo=00f067aa0ba902b7"
	// signature is as long as a webhook-signature with one key.
	signature = "v1," + strings.Repeat("A", 43) + "="
)

// Webhooks is Record's messages as a hookpipe Sender publishes them, of
// events of type order.created at 2026-11-22T10:00:00Z: the message id
// and the key prefix+i, the body an endpoint gets (Record the event's
// data) and WebhookHeaders (the subscription's X-Tenant: acme and X-Team:
// payments). The bare client does not sign: the signature is a constant
// of a signature's length.
func Webhooks(prefix string) func(int) Msg {
	return func(i int) Msg {
		id := prefix + strconv.Itoa(i)
		body := fmt.Appendf(make([]byte, 0, RecordSize+128),
			`{"id":%q,"type":"order.created","timestamp":"2026-11-22T10:00:00Z","data":`, id)
		body = append(append(body, Record(i)...), '}')
		return Msg{ID: id, Key: id, Body: body, Header: []Header{
			{"X-Tenant", "acme"}, {"X-Team", "payments"},
			{"Traceparent", Traceparent}, {"Tracestate", Tracestate},
			{"Content-Type", "application/json"}, {"webhook-id", id},
			{"webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10)},
			{"webhook-signature", signature},
		}}
	}
}
