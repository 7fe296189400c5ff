package send

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/runtime/testkit/queuetest"
	"github.com/hookpipe/hookpipe/topics"
)

// benchWorkers is how many deliveries are sent at once, by the Sender and
// by the bare client alike.
const benchWorkers = 64

// BenchmarkPublish: b.N deliveries of queuetest.Record's 1 KiB data sent
// to each kind of destination by a Sender from 64 goroutines, against the
// bare client publishing as many messages with 64 in flight
// (queuetest.Publish*) to the same server. Reported: the Sender's msgs/s,
// the bare client's (bare-msgs/s) and their ratio. Run with the servers'
// variables set:
//
//	go test -run '^$' -bench Publish -benchtime 5000x ./runtime/send/
func BenchmarkPublish(b *testing.B) {
	b.Run("nats", func(b *testing.B) {
		raw := queuetest.NATS(b)
		st := queuetest.NewStream(b, raw)
		js := benchJetStream(b, raw)
		benchPublish(b, natsDestination(b, raw, st.Subject), func(ctx context.Context, n int) error {
			return queuetest.PublishNATS(ctx, js, st.Subject, n, benchWorkers, queuetest.Record)
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
		benchPublish(b, rabbitDestination(b, raw, e), func(ctx context.Context, n int) error {
			return queuetest.PublishAMQP(ctx, conn, e.Name, "order.created", n, benchWorkers, queuetest.Record)
		})
	})
	b.Run("sqs", func(b *testing.B) {
		q := queuetest.NewQueue(b, queuetest.SQS(b), false)
		benchPublish(b, sqsDestination(q), func(ctx context.Context, n int) error {
			return queuetest.PublishSQS(ctx, q.Client, q.URL, "", n, benchWorkers, queuetest.Record)
		})
	})
}

// benchPublish times b.N deliveries to d by a Sender, then b.N messages
// by bare, and reports both rates and their ratio.
func benchPublish(b *testing.B, d *topics.Destination, bare func(context.Context, int) error) {
	sub := destinationSub(b, d)
	s := New(loopback, Options{MaxInFlight: benchWorkers, MaxResponseBytes: 1024})
	b.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := fmt.Sprintf("evt_%d_", time.Now().UnixNano()) // ids of this run alone: a stream drops repeated ones
	sendAll(ctx, b, s, &sub, run+"warm", 1)              // the connection is made outside the timing
	b.SetBytes(queuetest.RecordSize)
	b.ResetTimer()
	sendAll(ctx, b, s, &sub, run, b.N)
	b.StopTimer()
	sender := float64(b.N) / b.Elapsed().Seconds()
	start := time.Now()
	if err := bare(ctx, b.N); err != nil {
		b.Fatal(err)
	}
	baseline := float64(b.N) / time.Since(start).Seconds()
	b.ReportMetric(sender, "msgs/s")
	b.ReportMetric(baseline, "bare-msgs/s")
	b.ReportMetric(sender/baseline, "ratio")
}

// sendAll sends n deliveries (ids prefix0, prefix1...) from benchWorkers
// goroutines and fails b unless every one succeeded.
func sendAll(ctx context.Context, b *testing.B, s *Sender, sub *topics.Subscription, prefix string, n int) {
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(n, benchWorkers) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && failed.Load() == nil; i = int(next.Add(1) - 1) {
				d := newDelivery(sub.ID, prefix+fmt.Sprint(i))
				d.Data = queuetest.Record(i)
				resp, err := s.Send(ctx, sub, &d, nil)
				if res := classify.For(sub, resp.Status, err); res.Action != classify.Success {
					err = fmt.Errorf("send %d: %v (%w)", i, res, err)
					failed.Store(&err)
				}
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
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
