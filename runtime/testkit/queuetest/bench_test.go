package queuetest

import (
	"context"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The bare clients' rates: b.N records of RecordSize bytes published with
// the client alone, one at a time (each acknowledged or confirmed before
// the next) and 64 in flight, to a stream, exchange or queue of each run's
// own on the shared test servers; each run checks that all b.N arrived.
// Reported as msgs/s. Run:
//
//	go test -run '^$' -bench . -benchtime 5000x ./runtime/testkit/queuetest/
//
// with the servers' variables set (make test sets them; see docs/testing.md).
var inflights = []struct {
	name     string
	inflight int
}{{"sequential", 1}, {"inflight64", 64}}

func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkNATSPublish(b *testing.B) {
	url := NATS(b)
	for _, c := range inflights {
		b.Run(c.name, func(b *testing.B) {
			s := NewStream(b, url)
			js := connectNATS(b, url)
			b.SetBytes(RecordSize)
			b.ResetTimer()
			if err := PublishNATS(context.Background(), js, s.Subject, b.N, c.inflight, Records); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			reportRate(b)
			if n := s.Count(b); n != uint64(b.N) {
				b.Fatalf("the stream holds %d of %d", n, b.N)
			}
		})
	}
}

func BenchmarkAMQPPublish(b *testing.B) {
	url := AMQP(b)
	for _, c := range inflights {
		b.Run(c.name, func(b *testing.B) {
			e := NewExchange(b, url, amqp.ExchangeTopic, "#")
			conn := dialAMQP(b, url)
			b.SetBytes(RecordSize)
			b.ResetTimer()
			if err := PublishAMQP(context.Background(), conn, e.Name, "order.created", b.N, c.inflight, Records); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			reportRate(b)
			if n := e.Count(b); n != b.N {
				b.Fatalf("the queue holds %d of %d", n, b.N)
			}
		})
	}
}

func BenchmarkSQSPublish(b *testing.B) {
	endpoint := SQS(b)
	cases := []struct {
		name     string
		fifo     bool
		inflight int
	}{
		{"standard/sequential", false, 1},
		{"standard/inflight64", false, 64},
		// One message group: its order holds only one at a time.
		{"fifo/sequential", true, 1},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			q := NewQueue(b, endpoint, c.fifo)
			group := ""
			if c.fifo {
				group = "key-1"
			}
			b.SetBytes(RecordSize)
			b.ResetTimer()
			if err := PublishSQS(context.Background(), q.Client, q.URL, group, b.N, c.inflight, Records); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			reportRate(b)
			// More is possible: the SDK retries a request that timed out,
			// and a standard queue takes the message twice.
			if n := q.Count(b); n < b.N {
				b.Fatalf("the queue holds %d of %d", n, b.N)
			} else if n > b.N {
				b.Logf("the queue holds %d of %d: sent again after a timeout", n, b.N)
			}
		})
	}
}
