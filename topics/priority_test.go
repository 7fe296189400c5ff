package topics

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestEventPriority: priority is optional (normal), takes high, normal and
// low, and travels to the delivery record.
func TestEventPriority(t *testing.T) {
	for _, p := range []string{"", PriorityHigh, PriorityNormal, PriorityLow} {
		in := `{"id":"e1","type":"t","data":1}`
		if p != "" {
			in = `{"id":"e1","type":"t","priority":"` + p + `","data":1}`
		}
		e, err := DecodeEvent([]byte(in), 0)
		if err != nil {
			t.Fatalf("DecodeEvent(%s): %v", in, err)
		}
		if e.Priority != p {
			t.Fatalf("priority %q decoded as %q", p, e.Priority)
		}
		sub := &Subscription{ID: "s1"}
		r := DeliveryRecord(&kgo.Record{Timestamp: time.Now()}, &e, sub, Names{Prefix: "x."})
		d, err := DecodeDelivery(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		if d.Priority != p {
			t.Fatalf("delivery of a %q event has priority %q", p, d.Priority)
		}
	}
}

// TestDeliveryTopicOfPriority: an unordered subscription's delivery goes
// to its priority's topic; an ordered subscription's always to deliveries.
func TestDeliveryTopicOfPriority(t *testing.T) {
	n := Names{Prefix: "x."}
	for _, tc := range []struct {
		priority, ordering, want string
	}{
		{"", OrderingNone, "x.deliveries"},
		{PriorityNormal, OrderingNone, "x.deliveries"},
		{PriorityHigh, OrderingNone, "x.deliveries.high"},
		{PriorityLow, OrderingNone, "x.deliveries.low"},
		{PriorityHigh, OrderingKey, "x.deliveries"},
		{PriorityLow, OrderingKey, "x.deliveries"},
	} {
		ev := &Event{ID: "e1", Type: "t", Key: "k", Priority: tc.priority, Data: []byte(`1`)}
		sub := &Subscription{ID: "s1", Ordering: tc.ordering}
		if got := DeliveryRecord(&kgo.Record{Timestamp: time.Now()}, ev, sub, n).Topic; got != tc.want {
			t.Errorf("priority %q, ordering %q: topic %s, want %s", tc.priority, tc.ordering, got, tc.want)
		}
	}
	if got := n.DeliveryTopics(); len(got) != 3 || got[0] != n.DeliveriesHigh() || got[2] != n.DeliveriesLow() {
		t.Fatalf("DeliveryTopics = %q", got)
	}
}
