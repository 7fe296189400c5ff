package send

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/testkit/queuetest"
	"github.com/hookpipe/hookpipe/topics"
)

const (
	// benchWorkers is how many deliveries are sent at once, by the Sender
	// and by the bare client alike.
	benchWorkers = 64
	// benchRounds is how many times the Sender and the bare client each
	// send b.N messages, taking turns.
	benchRounds = 5
	// benchWarm is how many messages each sends before the first round.
	benchWarm = 4 * benchWorkers
)

// BenchmarkPublish: b.N deliveries of queuetest.Record's 1 KiB data sent
// to each kind of destination by a Sender from 64 goroutines, against the
// bare client publishing as many of the same messages (the same body,
// the same eight headers and message id: queuetest.Webhooks) with 64 in
// flight (queuetest.Publish*) to the same server. Both are warmed alike,
// then take turns for benchRounds rounds, the first to go alternating.
// Reported: the medians of the Sender's msgs/s, the bare client's
// (bare-msgs/s) and of each round's ratio of the two, with the lowest and
// highest ratio (ratio-min, ratio-max), and the process's CPU time per
// message of each (cpu-µs/msg, bare-cpu-µs/msg: the broker's too when it
// is kfake, in the process). kafka is a customer's cluster:
// kfake on a 127.0.0.1 port, or the Apache Kafka at
// WEBHOOKS_TEST_KAFKA_BROKERS; the others need the servers' variables:
//
//	go test -run '^$' -bench Publish -benchtime 5000x ./runtime/send/
func BenchmarkPublish(b *testing.B) {
	b.Run("kafka", func(b *testing.B) {
		brokers, topic := queuetest.CustomerKafka(b)
		cl := queuetest.KafkaProducer(b, brokers)
		d := &topics.Destination{Type: topics.DestinationKafka, Brokers: brokers, Topic: topic}
		benchPublish(b, d, func(ctx context.Context, n int, msg func(int) queuetest.Msg) error {
			return queuetest.PublishKafka(ctx, cl, topic, n, benchWorkers, msg)
		})
	})
	b.Run("nats", func(b *testing.B) {
		raw := queuetest.NATS(b)
		st := queuetest.NewStream(b, raw)
		js := benchJetStream(b, raw)
		benchPublish(b, natsDestination(b, raw, st.Subject), func(ctx context.Context, n int, msg func(int) queuetest.Msg) error {
			return queuetest.PublishNATS(ctx, js, st.Subject, n, benchWorkers, msg)
		})
	})
	b.Run("rabbitmq", func(b *testing.B) {
		raw := queuetest.AMQP(b)
		e := queuetest.NewExchange(b, raw, amqp.ExchangeTopic, "#")
		conn, err := amqp.Dial(raw)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { conn.Close() })
		benchPublish(b, rabbitDestination(b, raw, e), func(ctx context.Context, n int, msg func(int) queuetest.Msg) error {
			return queuetest.PublishAMQP(ctx, conn, e.Name, "order.created", n, benchWorkers, msg)
		})
	})
	b.Run("sqs", func(b *testing.B) {
		q := queuetest.NewQueue(b, queuetest.SQS(b), false)
		benchPublish(b, sqsDestination(q), func(ctx context.Context, n int, msg func(int) queuetest.Msg) error {
			return queuetest.PublishSQS(ctx, q.Client, q.URL, "", n, benchWorkers, msg)
		})
	})
}

// barePublish publishes n messages msg(0)... with the bare client.
type barePublish func(ctx context.Context, n int, msg func(int) queuetest.Msg) error

// benchPublish warms a Sender and bare alike, times benchRounds rounds of
// b.N messages each to d, and reports the medians.
func benchPublish(b *testing.B, d *topics.Destination, bare barePublish) {
	sub := benchSub(b, d)
	s := New(loopback, Options{MaxInFlight: benchWorkers, MaxResponseBytes: 1024})
	b.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Ids of this run alone: a stream or a FIFO queue drops repeated ones.
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	ours := func(prefix string, n int) error { return sendAll(ctx, s, &sub, prefix, n) }
	theirs := func(prefix string, n int) error { return bare(ctx, n, queuetest.Webhooks(prefix)) }
	for _, warm := range []func(string, int) error{ours, theirs} {
		if err := warm("evt_"+run+"_warm_", benchWarm); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	r := queuetest.Interleave(b, run, benchRounds, b.N, ours, theirs)
	b.StopTimer()
	r.Report(b, "msgs/s")
}

// benchSub is a subscription delivering to d with two headers of its own:
// with the trace context, the eight headers of queuetest.Webhooks.
func benchSub(b *testing.B, d *topics.Destination) topics.Subscription {
	sub := destinationSub(b, d)
	sub.Headers["X-Team"] = "payments"
	return sub
}

// benchTrace is the trace context of the benchmarks' deliveries.
var benchTrace = []kgo.RecordHeader{
	{Key: "traceparent", Value: []byte(queuetest.Traceparent)},
	{Key: "tracestate", Value: []byte(queuetest.Tracestate)},
}

// sendAll sends n deliveries (ids prefix0, prefix1..., data
// queuetest.Record) from benchWorkers goroutines; it returns the first
// failure, after which it sends no more.
func sendAll(ctx context.Context, s *Sender, sub *topics.Subscription, prefix string, n int) error {
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(n, benchWorkers) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && failed.Load() == nil; i = int(next.Add(1) - 1) {
				d := benchDelivery(sub.ID, prefix, i)
				resp, err := s.Send(ctx, sub, &d, benchTrace)
				if res := classify.For(sub, resp.Status, err); res.Action != classify.Success {
					err = fmt.Errorf("send %d: %v (%w)", i, res, err)
					failed.Store(&err)
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// benchDelivery is delivery i of a benchmark: the event queuetest.Webhooks
// makes message i of.
func benchDelivery(sub, prefix string, i int) topics.Delivery {
	d := newDelivery(sub, prefix+strconv.Itoa(i))
	d.Data = queuetest.Record(i)
	return d
}

// benchJetStream is a JetStream context of the bare client's own.
func benchJetStream(b *testing.B, raw string) jetstream.JetStream {
	nc, err := nats.Connect(raw)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	return js
}

// TestBenchMessages: the bare client's messages in BenchmarkPublish are
// the Sender's: the same headers in the same order, values as long, the
// same id and key, a body as long.
func TestBenchMessages(t *testing.T) {
	sub := destinationSub(t, &topics.Destination{Type: topics.DestinationNATS, URL: "nats://127.0.0.1:4222", Subject: "hooks"})
	sub.Headers["X-Team"] = "payments"
	s := New(loopback, Options{MaxInFlight: 1, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	d := benchDelivery(sub.ID, "evt_x_", 7)
	req, err := s.prepare(testCtx(t, 10*time.Second), &sub, &d)
	if err != nil {
		t.Fatal(err)
	}
	ours := s.message(req, &d, benchTrace, time.Now())
	theirs := queuetest.Webhooks("evt_x_")(7)
	if ours.ID != theirs.ID || ours.Key != theirs.Key || len(ours.Body) != len(theirs.Body) {
		t.Errorf("id %q key %q body of %d bytes, bare %q %q %d", ours.ID, ours.Key, len(ours.Body), theirs.ID, theirs.Key, len(theirs.Body))
	}
	// The subscription's headers come in no set order.
	slices.SortFunc(ours.Header, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(theirs.Header, func(a, b queuetest.Header) int { return strings.Compare(a.Name, b.Name) })
	if !slices.EqualFunc(ours.Header, theirs.Header, func(f Field, h queuetest.Header) bool {
		return f.Name == h.Name && len(f.Value) == len(h.Value)
	}) {
		t.Errorf("headers %v, bare %v", ours.Header, theirs.Header)
	}
}
