package queuetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/testkit"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

const readTimeout = 20 * time.Second

func TestRecord(t *testing.T) {
	for _, i := range []int{0, 7, 123456789} {
		r := Record(i)
		if len(r) != RecordSize {
			t.Errorf("Record(%d) is %d bytes, want %d", i, len(r), RecordSize)
		}
		var v struct{ Seq int }
		if err := json.Unmarshal(r, &v); err != nil || v.Seq != i {
			t.Errorf("Record(%d) = %.40q...: seq %d, %v", i, r, v.Seq, err)
		}
	}
}

// bodies are the bodies of msgs, through body.
func bodies[M any](msgs []M, body func(M) []byte) [][]byte {
	var out [][]byte
	for _, m := range msgs {
		out = append(out, body(m))
	}
	return out
}

// records are Record(from) to Record(to-1).
func records(from, to int) [][]byte {
	var out [][]byte
	for i := from; i < to; i++ {
		out = append(out, Record(i))
	}
	return out
}

// sameSet reports whether got and want hold the same bodies, in any order.
func sameSet(got, want [][]byte) bool {
	got, want = slices.Clone(got), slices.Clone(want)
	slices.SortFunc(got, bytes.Compare)
	slices.SortFunc(want, bytes.Compare)
	return slices.EqualFunc(got, want, bytes.Equal)
}

// connectNATS connects as a sender should: reconnecting for ever, but
// with no reconnect buffer, so that a publish while disconnected fails at
// once. With nats.go's default buffer (8 MiB) a publish that timed out
// waiting for its ack is still sent once the connection is back: the
// sender would retry a message the stream then holds twice.
func connectNATS(tb testing.TB, url string) jetstream.JetStream {
	tb.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond), nats.ReconnectBufSize(-1))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatal(err)
	}
	return js
}

func dialAMQP(tb testing.TB, url string) *amqp.Connection {
	tb.Helper()
	conn, err := amqp.Dial(url)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// TestNATS: what the bare client publishes to a stream's subject, one at a
// time and 8 in flight, is read back from the stream, in order where the
// publisher waited for each ack; a stream of another test sees none of it.
func TestNATS(t *testing.T) {
	url := NATS(t)
	s, other := NewStream(t, url), NewStream(t, url)
	js := connectNATS(t, url)
	ctx := context.Background()
	if err := PublishNATS(ctx, js, s.Subject, 10, 1, Records); err != nil {
		t.Fatal(err)
	}
	if err := PublishNATS(ctx, js, s.Subject+".more", 30, 8, func(i int) Msg { return Records(10 + i) }); err != nil {
		t.Fatal(err)
	}
	msgs := s.Read(t, 40, readTimeout)
	got := bodies(msgs, func(m *jetstream.RawStreamMsg) []byte { return m.Data })
	if !slices.EqualFunc(got[:10], records(0, 10), bytes.Equal) {
		t.Error("the sequential messages are not the records in order")
	}
	if !sameSet(got[10:], records(10, 40)) {
		t.Error("the messages published 8 in flight are not the records")
	}
	if msgs[0].Subject != s.Subject || msgs[10].Subject != s.Subject+".more" {
		t.Errorf("subjects %q, %q", msgs[0].Subject, msgs[10].Subject)
	}
	if n := s.Count(t); n != 40 {
		t.Errorf("the stream holds %d messages, want 40", n)
	}
	if n := other.Count(t); n != 0 {
		t.Errorf("another test's stream holds %d messages", n)
	}
	if _, err := js.Publish(ctx, "nobody.listens", Record(0)); err == nil {
		t.Error("a publish to a subject no stream captures was acknowledged")
	}
}

// TestAMQP: what the bare client publishes to an exchange with publisher
// confirms, one at a time and 8 in flight, is consumed from the queue
// bound to it, in order; an unroutable message is an error.
func TestAMQP(t *testing.T) {
	url := AMQP(t)
	e := NewExchange(t, url, amqp.ExchangeTopic, "#")
	other := NewExchange(t, url, amqp.ExchangeTopic, "#")
	conn := dialAMQP(t, url)
	ctx := context.Background()
	if err := PublishAMQP(ctx, conn, e.Name, "order.created", 10, 1, Records); err != nil {
		t.Fatal(err)
	}
	if err := PublishAMQP(ctx, conn, e.Name, "order.updated", 30, 8, func(i int) Msg { return Records(10 + i) }); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, readTimeout, "40 messages queued", func() bool { return e.Count(t) == 40 })
	// Read in two parts: what the first delivered past its 10th goes back
	// in its place.
	msgs := append(e.Read(t, 10, readTimeout), e.Read(t, 30, readTimeout)...)
	got := bodies(msgs, func(d amqp.Delivery) []byte { return d.Body })
	// One channel's messages to one queue keep their order.
	if !slices.EqualFunc(got, records(0, 40), bytes.Equal) {
		t.Error("the messages are not the records in order")
	}
	if msgs[0].RoutingKey != "order.created" || msgs[0].DeliveryMode != amqp.Persistent {
		t.Errorf("routing key %q, delivery mode %d", msgs[0].RoutingKey, msgs[0].DeliveryMode)
	}
	if n := e.Count(t); n != 0 {
		t.Errorf("%d messages left after reading them all", n)
	}
	if n := other.Count(t); n != 0 {
		t.Errorf("another test's queue holds %d messages", n)
	}

	direct := NewExchange(t, url, amqp.ExchangeDirect, "only-this")
	if err := PublishAMQP(ctx, conn, direct.Name, "another", 1, 1, Records); err == nil {
		t.Error("an unroutable message was confirmed without error")
	}
	if err := PublishAMQP(ctx, conn, direct.Name, "only-this", 1, 1, Records); err != nil {
		t.Fatal(err)
	}
	direct.Read(t, 1, readTimeout)
}

// TestSQS: what the bare client sends to a standard queue (one at a time
// and 8 in flight) is received from it; a FIFO queue gives one group's
// messages back in the order sent, and a repeated deduplication id once.
func TestSQS(t *testing.T) {
	endpoint := SQS(t)
	ctx := context.Background()
	t.Run("standard", func(t *testing.T) {
		q := NewQueue(t, endpoint, false)
		if err := PublishSQS(ctx, q.Client, q.URL, "", 10, 1, Records); err != nil {
			t.Fatal(err)
		}
		if err := PublishSQS(ctx, q.Client, q.URL, "", 30, 8, func(i int) Msg { return Records(10 + i) }); err != nil {
			t.Fatal(err)
		}
		if n := q.Count(t); n != 40 {
			t.Errorf("the queue holds %d messages, want 40", n)
		}
		msgs := q.Read(t, 40, readTimeout)
		if !sameSet(bodies(msgs, sqsBody), records(0, 40)) {
			t.Error("the messages are not the records")
		}
	})
	t.Run("fifo", func(t *testing.T) {
		q := NewQueue(t, endpoint, true)
		if !q.FIFO || q.URL[len(q.URL)-5:] != ".fifo" {
			t.Fatalf("queue %s", q.URL)
		}
		if err := PublishSQS(ctx, q.Client, q.URL, "key-1", 25, 1, Records); err != nil {
			t.Fatal(err)
		}
		// The same deduplication id again: taken, not queued.
		for range 2 {
			if _, err := q.Client.SendMessage(ctx, sqsSend(q.URL, "key-1", "dup", Record(25))); err != nil {
				t.Fatal(err)
			}
		}
		msgs := q.Read(t, 26, readTimeout)
		if !slices.EqualFunc(bodies(msgs, sqsBody), records(0, 26), bytes.Equal) {
			t.Error("the group's messages are not the records in order")
		}
		if g := msgs[0].Attributes[string(types.MessageSystemAttributeNameMessageGroupId)]; g != "key-1" {
			t.Errorf("message group id %q", g)
		}
		if n := q.Count(t); n != 0 {
			t.Errorf("%d messages left: the duplicate was queued", n)
		}
	})
}

func sqsBody(m types.Message) []byte { return []byte(aws.ToString(m.Body)) }

func sqsSend(queueURL, group, dedup string, body []byte) *sqs.SendMessageInput {
	return &sqs.SendMessageInput{
		QueueUrl: aws.String(queueURL), MessageBody: aws.String(string(body)),
		MessageGroupId: aws.String(group), MessageDeduplicationId: aws.String(dedup),
	}
}

// TestServerRestart: a server of the test's own, stopped (and killed)
// mid-test, refuses publishes while down and, started again, has kept
// what it had acknowledged and takes new messages.
func TestServerRestart(t *testing.T) {
	for _, k := range []Kind{NATSServer, RabbitMQ, ElasticMQ} {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			s := Start(t, k)
			// publish sends Record(i) and reports the publisher's error;
			// read reads n back.
			var publish func(i int) error
			var read func(n int) [][]byte
			switch k {
			case NATSServer:
				st := NewStream(t, s.URL())
				js := connectNATS(t, s.URL())
				publish = func(i int) error {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					return PublishNATS(ctx, js, st.Subject, 1, 1, func(int) Msg { return Records(i) })
				}
				read = func(n int) [][]byte {
					return bodies(st.Read(t, n, readTimeout), func(m *jetstream.RawStreamMsg) []byte { return m.Data })
				}
			case RabbitMQ:
				e := NewExchange(t, s.URL(), amqp.ExchangeFanout, "")
				publish = func(i int) error {
					conn, err := amqp.Dial(s.URL())
					if err != nil {
						return err
					}
					defer conn.Close()
					return PublishAMQP(context.Background(), conn, e.Name, "", 1, 1, func(int) Msg { return Records(i) })
				}
				read = func(n int) [][]byte {
					return bodies(e.Read(t, n, readTimeout), func(d amqp.Delivery) []byte { return d.Body })
				}
			case ElasticMQ:
				q := NewQueue(t, s.URL(), true)
				publish = func(i int) error {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					defer cancel()
					return PublishSQS(ctx, q.Client, q.URL, "g", 1, 1, func(int) Msg { return Records(i) })
				}
				read = func(n int) [][]byte { return bodies(q.Read(t, n, readTimeout), sqsBody) }
			}

			if err := publish(0); err != nil {
				t.Fatal(err)
			}
			for i, stop := range []func(){s.Stop, s.Kill} {
				stop()
				if err := publish(100); err == nil {
					t.Fatalf("published while the server was down (stop %d)", i)
				}
				s.Restart()
				var err error
				testkit.WaitFor(t, readTimeout, "a publish after the restart", func() bool { err = publish(i + 1); return err == nil })
			}
			if got := read(3); !slices.EqualFunc(got, records(0, 3), bytes.Equal) {
				t.Errorf("after the restarts the queue holds %d messages: %s", len(got), fmt.Sprintf("%.20q", got))
			}
		})
	}
}
