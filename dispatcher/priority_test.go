package dispatcher

import (
	"slices"
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

// TestPriorityTopics: the dispatcher writes an unordered subscription's
// deliveries to their priority's topic, and an ordered subscription's to
// deliveries whatever the priority (order beats priority).
func TestPriorityTopics(t *testing.T) {
	h := newHarness(t, 3)
	h.sub(topics.Subscription{ID: "plain", EventTypes: []string{"*"}, Enabled: true})
	h.sub(topics.Subscription{ID: "ordered", EventTypes: []string{"*"}, Enabled: true, Ordering: topics.OrderingKey})
	run := h.start(h.config("priority"))
	var values [][]byte
	for _, e := range []topics.Event{
		{ID: "e_high", Type: "t", Key: "k", Priority: topics.PriorityHigh},
		{ID: "e_normal", Type: "t", Key: "k", Priority: topics.PriorityNormal},
		{ID: "e_none", Type: "t", Key: "k"},
		{ID: "e_low", Type: "t", Key: "k", Priority: topics.PriorityLow},
	} {
		values = append(values, event(t, e, `{}`))
	}
	h.waitDispatched(h.publish(values...))
	n := h.names()
	for topic, want := range map[string][]string{
		n.DeliveriesHigh(): {"plain/e_high"},
		n.Deliveries():     {"ordered/e_high", "ordered/e_low", "ordered/e_none", "ordered/e_normal", "plain/e_none", "plain/e_normal"},
		n.DeliveriesLow():  {"plain/e_low"},
	} {
		var got []string
		for _, d := range h.deliveriesIn(topic) {
			got = append(got, pairKey(d.SubscriptionID, d.EventID))
			if want := map[string]string{"e_high": "high", "e_low": "low", "e_normal": "normal"}[d.EventID]; d.Priority != want {
				t.Errorf("%s on %s: priority %q, want %q", d.EventID, topic, d.Priority, want)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s holds %q, want %q", topic, got, want)
		}
	}
	if err := run.Stop(t); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}
