package deliverer

import (
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestHeldKeyOutlivesOrderingChange: a key held while its subscription was
// ordered keeps its order after the subscription switches to no ordering:
// once the failed head succeeds, the parked delivery behind it is sent.
func TestHeldKeyOutlivesOrderingChange(t *testing.T) {
	h := newHarness(t, nil)
	failing := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	healthy := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.WriteHeader(http.StatusNoContent)
	})
	s := newSub(t, "sub_o", failing.url())
	s.Ordering = topics.OrderingKey
	s.RetrySchedule = []string{"1s", "1s", "1s"}
	h.putSub(s)
	h.start(nil)
	head, behind := newDelivery(s.ID, "K-000"), newDelivery(s.ID, "K-001")
	head.Key, behind.Key = "K", "K"
	h.produce(h.deliveryRecord(head, "K"), h.deliveryRecord(behind, "K"))
	waitFor(t, 20*time.Second, "K-001 parked behind K-000", func() bool {
		for _, a := range h.attemptsOf("K-001") {
			if a.Outcome == topics.OutcomeBlocked && a.FailureCategory == topics.FailureKeyHeld {
				return true
			}
		}
		return false
	})

	// No ordering any more, and a healthy endpoint; a probe on another key
	// shows the deliverer applied the change.
	s.Ordering, s.URL = topics.OrderingNone, healthy.url()
	h.putSub(s)
	probe := newDelivery(s.ID, "P-000")
	probe.Key = "P"
	h.produce(h.deliveryRecord(probe, "P"))
	waitFor(t, 20*time.Second, "the probe at the new URL", func() bool { return healthy.perID()["P-000"] == 1 })

	// The retrier's part: K-000 comes back from its tier.
	tier := h.waitRecord(h.names.Retry(time.Second), "K-000")
	h.produce(&kgo.Record{Topic: h.names.Redeliveries(), Key: tier.Key, Value: tier.Value})
	waitFor(t, 20*time.Second, "K-000 then K-001 delivered", func() bool {
		got := healthy.perID()
		return got["K-000"] == 1 && got["K-001"] == 1
	})
	var order []string
	for _, r := range healthy.all() {
		order = append(order, r.id())
	}
	if len(order) != 3 || order[1] != "K-000" || order[2] != "K-001" {
		t.Errorf("requests %v, want P-000, K-000, K-001", order)
	}
}
