package deliverer

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

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
