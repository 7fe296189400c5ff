package e2e

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

// TestPrioritiesEndToEnd: events of every priority reach an unordered and an
// ordered subscription once each through dispatcher and deliverer, and the
// deliverer commits all three deliveries topics.
func TestPrioritiesEndToEnd(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	for _, s := range []topics.Subscription{
		{ID: "plain", EventTypes: []string{"*"}, Enabled: true},
		{ID: "ordered", EventTypes: []string{"*"}, Enabled: true, Ordering: topics.OrderingKey},
	} {
		s.URL = r.url(s.ID)
		r.trust(e.subscribe(s))
	}
	e.startDispatcher()
	e.startDeliverer()
	e.publish(
		topics.Event{ID: "e_high", Type: "t", Key: "k", Priority: topics.PriorityHigh, Data: json.RawMessage(`1`)},
		topics.Event{ID: "e_none", Type: "t", Key: "k", Data: json.RawMessage(`2`)},
		topics.Event{ID: "e_low", Type: "t", Key: "k", Priority: topics.PriorityLow, Data: json.RawMessage(`3`)},
	)
	want := []string{"plain/e_high", "plain/e_none", "plain/e_low", "ordered/e_high", "ordered/e_none", "ordered/e_low"}
	wait(t, 60*time.Second, "every delivery", func() bool { return r.count() >= len(want) })
	wait(t, 30*time.Second, "the deliverer to commit everything", e.drained)
	got := r.pairs()
	for _, k := range want {
		if got[k] != 1 {
			t.Errorf("%s delivered %d times, want once", k, got[k])
		}
	}
	var ordered []string
	for _, q := range r.got() {
		if q.Sub == "ordered" {
			ordered = append(ordered, q.ID)
		}
	}
	if len(ordered) != 3 || ordered[0] != "e_high" || ordered[1] != "e_none" || ordered[2] != "e_low" {
		t.Errorf("the ordered subscription got %q, want the publish order whatever the priority", ordered)
	}
}
