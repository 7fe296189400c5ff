package deliverer

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestHighPriorityOvertakesLowBacklog: with two thousand low-priority
// deliveries queued for one subscription whose endpoint holds every request
// (the workers busy), a high-priority delivery for the same subscription,
// published afterwards, is among the next few requests once the endpoint
// answers, ahead of the low-priority records already held. (In one queue
// per subscription, it would wait behind every low record held; on one
// topic, behind the whole backlog.)
func TestHighPriorityOvertakesLowBacklog(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := newGate(t)
	rc := newReceiver(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) {
		if strings.HasPrefix(r.Header.Get("webhook-id"), "evt_low") {
			g.wait(r)
		}
	})
	sub := newSub(t, "sub_a", rc.url())
	sub.TimeoutMS = 300_000 // no request ends before the gate opens
	h.putSub(sub)
	// A second subscription on sub_a's partition of deliveries.high: its
	// delivery, produced after sub_a's high one, is delivered only once
	// sub_a's was fetched.
	marker := markerOn(t, h.names.DeliveriesHigh(), "sub_a")
	h.putSub(newSub(t, marker, rc.url()))

	const backlog = 2000
	var low []*kgo.Record
	for _, id := range ids("evt_low", backlog) {
		d := newDelivery("sub_a", id)
		d.Priority = topics.PriorityLow
		r := h.deliveryRecord(d, "")
		r.Topic = h.names.DeliveriesLow()
		low = append(low, r)
	}
	h.produce(low...)
	h.start(map[string]string{
		"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT":               "3",
		"WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION":        "2",
		"WEBHOOKS_DELIVERER_MAX_BUFFERED":                "200",
		"WEBHOOKS_DELIVERER_MAX_QUEUED_PER_SUBSCRIPTION": "1000",
	})
	waitFor(t, 20*time.Second, "two low-priority requests held", func() bool { now, _ := rc.concurrency(); return now == 2 })

	high := func(sub, id string) *kgo.Record {
		d := newDelivery(sub, id)
		d.Priority = topics.PriorityHigh
		r := h.deliveryRecord(d, "")
		r.Topic = h.names.DeliveriesHigh()
		return r
	}
	h.produce(high("sub_a", "evt_high"))
	h.produce(high(marker, "evt_marker"))
	rc.waitRequest(t, "evt_marker")
	g.open()
	rc.waitRequest(t, "evt_high")

	lowBefore := 0
	for _, r := range rc.all() {
		if r.id() == "evt_high" {
			break
		}
		if strings.HasPrefix(r.id(), "evt_low") {
			lowBefore++
		}
	}
	// The two held, and at most the ten records of one round of turns.
	if lowBefore > 12 {
		t.Fatalf("%d low-priority requests before the high-priority one, want at most 12", lowBefore)
	}
	waitFor(t, 60*time.Second, "the low-priority backlog", func() bool { return rc.count() >= backlog+2 })
	for id, n := range rc.perID() {
		if n != 1 {
			t.Fatalf("%s delivered %d times", id, n)
		}
	}
}

// markerOn returns a subscription id whose deliveries share a partition of
// topic (three partitions, as in the harness) with sub's.
func markerOn(tb testing.TB, topic, sub string) string {
	tb.Helper()
	p := topics.Partitioner().ForTopic(topic)
	want := p.Partition(&kgo.Record{Key: []byte(sub + "/x")}, 3)
	for i := range 100 {
		id := fmt.Sprintf("sub_marker%d", i)
		if p.Partition(&kgo.Record{Key: []byte(id + "/x")}, 3) == want {
			return id
		}
	}
	tb.Fatalf("no subscription id shares %s's partition", sub)
	return ""
}
