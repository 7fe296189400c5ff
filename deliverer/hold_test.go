package deliverer

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
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
	// shows the deliverer applied the change. A probe handled before its
	// subscription table did goes to the old URL and into a tier: another
	// one follows every half second until one arrives.
	s.Ordering, s.URL = topics.OrderingNone, healthy.url()
	h.putSub(s)
	var probes int
	var last time.Time
	waitFor(t, 20*time.Second, "a probe at the new URL", func() bool {
		if len(healthy.all()) > 0 {
			return true
		}
		if time.Since(last) > 500*time.Millisecond {
			// Each on a key of its own: one handled under the old, ordered
			// version would hold its key.
			id := fmt.Sprintf("P-%03d", probes)
			probe := newDelivery(s.ID, id)
			probe.Key = id
			h.produce(h.deliveryRecord(probe, id))
			probes, last = probes+1, time.Now()
		}
		return false
	})

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
	if n := len(order); n < 3 || order[n-2] != "K-000" || order[n-1] != "K-001" || !strings.HasPrefix(order[0], "P-") {
		t.Errorf("requests %v, want a probe, then K-000, K-001", order)
	}
}

// TestRedeliveredHeadKeepsThroughOnDeliveries (invariants 1 and 4): a
// hold's Through counts offsets of the deliveries topic only. The head
// comes back from the redeliveries topic at an offset (here past 50) that
// means nothing on deliveries; had it moved Through, the key's next
// delivery (offset 1 on deliveries) would pass for one already handled and
// be skipped: lost.
func TestRedeliveredHeadKeepsThroughOnDeliveries(t *testing.T) {
	h := newHarness(t, nil)
	var fail atomic.Bool
	fail.Store(true)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if fail.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s := newSub(t, "sub_o", rc.url())
	s.Ordering = topics.OrderingKey
	s.RetrySchedule = []string{"1s", "1s", "1s", "1s"}
	h.putSub(s)
	// Another subscription on the same partition fills the redeliveries
	// partition first, so the head's offset there is past 50.
	part := topics.Partitioner().ForTopic(h.names.Redeliveries())
	filler := ""
	for i := 0; filler == ""; i++ {
		if i > 1000 {
			t.Fatal("no subscription id on sub_o's partition")
		}
		id := fmt.Sprintf("sub_fill%d", i)
		if part.Partition(&kgo.Record{Key: []byte(id + "/x")}, 3) == part.Partition(&kgo.Record{Key: []byte(s.ID + "/K")}, 3) {
			filler = id
		}
	}
	fill := newReceiver(t, nil)
	h.putSub(newSub(t, filler, fill.url()))
	var fills []*kgo.Record
	for _, id := range ids("evt_fill", 50) {
		r := h.deliveryRecord(newDelivery(filler, id), "")
		r.Topic = h.names.Redeliveries()
		fills = append(fills, r)
	}
	h.produce(fills...)
	h.start(nil)
	waitFor(t, 20*time.Second, "the fillers", func() bool { return fill.count() == len(fills) })

	head := newDelivery(s.ID, "K-000")
	head.Key = "K"
	h.produce(h.deliveryRecord(head, "K"))
	// K-000's retry record for an attempt, once the deliverer wrote it
	// (together with the key's hold).
	retry := func(attempt int) *kgo.Record {
		var back *kgo.Record
		waitFor(t, 20*time.Second, fmt.Sprintf("K-000's retry for attempt %d", attempt), func() bool {
			for _, r := range h.records(h.names.Retry(time.Second)) {
				if d, err := topics.DecodeDelivery(r.Value); err == nil && d.EventID == "K-000" && d.Attempt == attempt {
					back = r
					return true
				}
			}
			return false
		})
		return back
	}
	// The retrier's part: K-000 comes back and fails again, so the hold
	// is written anew from the redelivered record.
	redeliver := func(r *kgo.Record) {
		h.produce(&kgo.Record{Topic: h.names.Redeliveries(), Key: r.Key, Value: r.Value})
	}
	redeliver(retry(2))
	third := retry(3)

	behind := newDelivery(s.ID, "K-001")
	behind.Key = "K"
	h.produce(h.deliveryRecord(behind, "K"))
	waitFor(t, 20*time.Second, "K-001 parked behind K-000", func() bool {
		for _, a := range h.attemptsOf("K-001") {
			if a.Outcome == topics.OutcomeBlocked && a.FailureCategory == topics.FailureKeyHeld {
				return true
			}
		}
		return false
	})
	fail.Store(false)
	redeliver(third)
	waitFor(t, 20*time.Second, "K-000 then K-001 delivered", func() bool {
		got := rc.perID()
		return got["K-000"] == 3 && got["K-001"] == 1
	})
}
