package dispatcher

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookpipe/hookpipe/topics"
)

// TestSubscriptionCreatedJustBefore publishes an event right after creating
// the subscription it matches, with no wait in between: the delivery must
// exist.
//
// To make the race deterministic, the broker refuses every fetch of the
// subscriptions topic until someone asks for that topic's end offset, which
// is how the dispatcher waits for its table to catch up before a batch. A
// dispatcher that matched without catching up would match the event against
// an empty table and commit it without a delivery.
func TestSubscriptionCreatedJustBefore(t *testing.T) {
	h := newFaultHarness(t, 3)
	subsTopic := h.names().Subscriptions()

	var asked atomic.Bool
	refused := h.cluster.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.Fetch},
		Topic: subsTopic,
		Err:   kerr.NotLeaderForPartition, // retriable: the table retries
		Count: -1,
		When:  func(kmsg.Request) bool { return !asked.Load() },
	})
	h.cluster.ControlKey(int16(kmsg.ListOffsets), func(req kmsg.Request) (kmsg.Response, error, bool) {
		h.cluster.KeepControl()
		for _, rt := range req.(*kmsg.ListOffsetsRequest).Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == subsTopic && rp.Timestamp == -1 {
					asked.Store(true)
				}
			}
		}
		return nil, nil, false
	})

	h.start(h.config("catch-up"))
	wait(t, 10*time.Second, func() bool { return refused.Hits() > 0 }) // the table is running, and behind

	h.sub(topics.Subscription{ID: "fresh", EventTypes: []string{"user.signed_up"}, Enabled: true})
	published := h.publish(event(t, topics.Event{ID: "u1", Type: "user.signed_up"}, `{"user":"u_1"}`))
	h.waitDispatched(published)

	ds := h.deliveries()
	if len(ds) != 1 || ds[0].SubscriptionID != "fresh" || ds[0].EventID != "u1" {
		t.Fatalf("deliveries %+v, want one for fresh/u1", ds)
	}
}
