package deliverer

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/queuetest"
	"github.com/hookpipe/hookpipe/runtime/tracing"
	"github.com/hookpipe/hookpipe/topics"
)

// TestKafkaDestinationDelivery: a subscription with a Kafka destination
// gets its deliveries produced to the customer's topic, a key's in order,
// each attempt recorded as a success; a
// topic that does not exist dead-letters the delivery at once with
// category refused.
func TestKafkaDestinationDelivery(t *testing.T) {
	t.Parallel()
	customer, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "acme-hooks"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(customer.Close)
	h := newHarness(t, nil)
	sub := newSub(t, "sub_kd", "")
	sub.Ordering = topics.OrderingKey
	sub.Target(&topics.Destination{Type: topics.DestinationKafka, Brokers: customer.ListenAddrs(), Topic: "acme-hooks"}, "")
	missing := newSub(t, "sub_km", "")
	missing.Target(&topics.Destination{Type: topics.DestinationKafka, Brokers: customer.ListenAddrs(), Topic: "no-such-topic"}, "")
	h.putSub(sub)
	h.putSub(missing)
	h.start(nil)
	var ds []topics.Delivery
	for _, id := range []string{"evt_k1", "evt_k2", "evt_k3"} {
		d := newDelivery(sub.ID, id)
		d.Key = "order-9"
		ds = append(ds, d)
	}
	for _, d := range ds {
		h.produce(h.deliveryRecord(d, d.Key))
	}
	h.deliver(newDelivery(missing.ID, "evt_gone"))

	for _, d := range ds {
		if a := h.waitAttempt(d.EventID); a.Outcome != topics.OutcomeSuccess {
			t.Fatalf("attempt of %s: %+v", d.EventID, a)
		}
	}
	reader, err := kgo.NewClient(kgo.SeedBrokers(customer.ListenAddrs()...), kgo.ConsumeTopics("acme-hooks"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	ctx := testCtx(t, 20*time.Second)
	var got []string
	for len(got) < len(ds) {
		fs := reader.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("reading the customer's topic: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Key) != "order-9" {
				t.Errorf("record key %q, want the ordering key", r.Key)
			}
			for _, hd := range r.Headers {
				if hd.Key == "webhook-id" {
					got = append(got, string(hd.Value))
				}
			}
		})
	}
	if got[0] != "evt_k1" || got[1] != "evt_k2" || got[2] != "evt_k3" {
		t.Errorf("the key's messages arrived as %v, want in order", got)
	}

	dl, err := topics.DecodeDeadLetter(h.waitRecord(h.names.DLQ(), "evt_gone").Value)
	if err != nil || dl.FailureCategory != topics.FailureRefused {
		t.Fatalf("dead letter of a missing topic: %+v, %v; want category refused", dl, err)
	}
}

// benchDestination is a destination of one kind for BenchmarkDestinations
// and how many deliveries a round sends to it: fewer to the slower
// servers, so that a round of each takes seconds.
type benchDestination struct {
	kind   string
	events int
	// open makes a destination of the test's own and the bare client
	// publishing to it, or skips b when its server is not set.
	open func(b *testing.B) (*topics.Destination, func(ctx context.Context, n int, msg func(int) queuetest.Msg) error)
}

var benchDestinations = []benchDestination{
	{topics.DestinationKafka, 20_000, func(b *testing.B) (*topics.Destination, func(context.Context, int, func(int) queuetest.Msg) error) {
		brokers, topic := queuetest.CustomerKafka(b)
		cl := queuetest.KafkaProducer(b, brokers)
		return &topics.Destination{Type: topics.DestinationKafka, Brokers: brokers, Topic: topic},
			func(ctx context.Context, n int, msg func(int) queuetest.Msg) error {
				return queuetest.PublishKafka(ctx, cl, topic, n, benchInFlight, msg)
			}
	}},
	{topics.DestinationNATS, 10_000, func(b *testing.B) (*topics.Destination, func(context.Context, int, func(int) queuetest.Msg) error) {
		raw := queuetest.NATS(b)
		st := queuetest.NewStream(b, raw)
		u, user, password := splitUser(b, raw)
		return &topics.Destination{Type: topics.DestinationNATS, URL: u, Subject: st.Subject, Username: user, Password: password},
			func(ctx context.Context, n int, msg func(int) queuetest.Msg) error {
				return queuetest.PublishNATS(ctx, st.JS, st.Subject, n, benchInFlight, msg)
			}
	}},
	{topics.DestinationRabbitMQ, 5_000, func(b *testing.B) (*topics.Destination, func(context.Context, int, func(int) queuetest.Msg) error) {
		raw := queuetest.AMQP(b)
		e := queuetest.NewExchange(b, raw, amqp.ExchangeTopic, "#")
		u, user, password := splitUser(b, raw)
		return &topics.Destination{Type: topics.DestinationRabbitMQ, URL: u, Exchange: e.Name, Username: user, Password: password},
			func(ctx context.Context, n int, msg func(int) queuetest.Msg) error {
				return queuetest.PublishAMQP(ctx, e.Conn, e.Name, "order.created", n, benchInFlight, msg)
			}
	}},
	{topics.DestinationSQS, 2_000, func(b *testing.B) (*topics.Destination, func(context.Context, int, func(int) queuetest.Msg) error) {
		q := queuetest.NewQueue(b, queuetest.SQS(b), false)
		return &topics.Destination{Type: topics.DestinationSQS, URL: q.URL, Region: queuetest.SQSRegion,
				AccessKeyID: "hookpipe", SecretAccessKey: "hookpipe-secret"},
			func(ctx context.Context, n int, msg func(int) queuetest.Msg) error {
				return queuetest.PublishSQS(ctx, q.Client, q.URL, "", n, benchInFlight, msg)
			}
	}},
}

// benchInFlight is the bare client's in-flight bound: the deliverer's
// default cap of a subscription's requests at once.
const benchInFlight = 64

// splitUser is a test server's URL without its credentials, and them.
func splitUser(b *testing.B, raw string) (u, user, password string) {
	p, err := url.Parse(raw)
	if err != nil {
		b.Fatal(err)
	}
	user = p.User.Username()
	password, _ = p.User.Password()
	p.User = nil
	return p.String(), user, password
}

// BenchmarkDestinations: deliveries of one subscription to each kind of
// destination, from the deliveries topic (kfake in the process) through
// the deliverer, against the bare client publishing as many of the same
// messages (queuetest.Webhooks: the same body, eight headers and message
// id) with 64 in flight, the deliverer's default cap of a subscription's
// requests at once. The deliverer is up and has delivered once before
// the first round; then the two take turns for five rounds, the first
// to go alternating, a round of the deliverer timed from its first
// delivery produced to the attempt record of its last. Reported, as
// BenchmarkPublish (runtime/send) does: the medians of deliveries/s, of
// the bare client's msgs/s and of the rounds' ratios, the lowest and
// highest ratio, and the CPU time of the process per message (the
// deliverer's includes the pipeline's kfake and the test's consumer of
// attempt records). kafka is a customer's cluster: kfake on a 127.0.0.1
// port, or the Apache Kafka at WEBHOOKS_TEST_KAFKA_BROKERS; the others
// are skipped without their servers' variables.
func BenchmarkDestinations(b *testing.B) {
	for _, bd := range benchDestinations {
		b.Run(bd.kind, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				d, bare := bd.open(b)
				// Tiers of a minute: a subscription spills past four
				// of them of work held, and a round holds seconds.
				h := newHarness(b, map[string]string{kafka.EnvRetryTiers: "1m,10m"})
				sub := newSub(b, "sub_bench", "")
				sub.Headers = map[string]string{"X-Tenant": "acme", "X-Team": "payments"}
				sub.Target(d, "")
				h.putSub(sub)
				h.start(nil)
				run := strconv.FormatInt(time.Now().UnixNano(), 36)
				ours := func(prefix string, n int) error { h.deliverAll(sub.ID, prefix, n); return nil }
				theirs := func(prefix string, n int) error {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					defer cancel()
					return bare(ctx, n, queuetest.Webhooks(prefix))
				}
				h.deliverAll(sub.ID, "evt_"+run+"_warm_", 1)
				if err := theirs("evt_"+run+"_warm_", 1); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				r := queuetest.Interleave(b, run, 5, bd.events, ours, theirs)
				b.StopTimer()
				for _, a := range h.attempts() {
					if a.Outcome != topics.OutcomeSuccess {
						b.Fatalf("attempt %+v, want every one a success", a)
					}
				}
				r.Report(b, "deliveries/s")
			}
		})
	}
}

// deliverAll produces n deliveries to sub (ids prefix0, prefix1..., data
// queuetest.Record, the trace context of queuetest.Webhooks) and waits
// until the deliverer has recorded an attempt of each.
func (h *harness) deliverAll(sub, prefix string, n int) {
	base := h.seenCount(h.names.Attempts())
	trace := []kgo.RecordHeader{
		{Key: tracing.HeaderTraceparent, Value: []byte(queuetest.Traceparent)},
		{Key: tracing.HeaderTracestate, Value: []byte(queuetest.Tracestate)},
	}
	recs := make([]*kgo.Record, 0, 1000)
	for i := range n {
		d := newDelivery(sub, prefix+strconv.Itoa(i))
		d.Data = queuetest.Record(i)
		r := h.deliveryRecord(d, "")
		r.Headers = trace
		if recs = append(recs, r); len(recs) == cap(recs) || i == n-1 {
			h.produce(recs...)
			recs = recs[:0]
		}
	}
	// Polled often: the poll's period is part of the round's time.
	testkit.WaitEvery(h.t, time.Millisecond, 5*time.Minute, "an attempt of every delivery", func() bool {
		return h.seenCount(h.names.Attempts()) >= base+n
	})
}

// seenCount is how many records the tail saw on topic so far, without
// copying them.
func (h *harness) seenCount(topic string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seen[topic])
}
