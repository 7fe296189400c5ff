package dispatcher

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/filter"
	"github.com/hookpipe/hookpipe/topics"
)

// filterSubs are subscriptions with filters, and which of filterEvents
// each takes; strict fails on events without a customer, vip on events
// without tags.
var filterSubs = []topics.Subscription{
	{ID: "big", EventTypes: []string{"order.*"}, Enabled: true, Filter: `data.total > 100`},
	{ID: "vip", EventTypes: []string{"order.*"}, Enabled: true, Filter: `"vip" in data.tags`},
	{ID: "strict", EventTypes: []string{"order.*"}, Enabled: true, Filter: `data.customer.tier == "gold"`},
	{ID: "acme-orders", Tenant: "acme", EventTypes: []string{"order.*"}, Enabled: true, Filter: `key.startsWith("order_")`},
	{ID: "plain", EventTypes: []string{"order.*"}, Enabled: true},
}

var filterEvents = []struct {
	ev   topics.Event
	data string
	subs []string
}{
	{topics.Event{ID: "e1", Type: "order.created", Tenant: "acme", Key: "order_1"}, `{"total": 142, "tags": ["vip"]}`, []string{"acme-orders", "big", "plain", "vip"}},
	{topics.Event{ID: "e2", Type: "order.created", Tenant: "acme", Key: "cart_2"}, `{"total": 50, "customer": {"tier": "gold"}}`, []string{"plain", "strict"}},
	{topics.Event{ID: "e3", Type: "order.created", Tenant: "globex", Key: "order_3"}, `{"total": 200.5, "tags": []}`, []string{"big", "plain"}},
}

// TestFilters: a subscription's filter decides, besides its types and
// tenant, which events it takes; one that fails on an event (a field the
// event lacks) does not take that event and the others flow.
func TestFilters(t *testing.T) {
	h := newHarness(t, 3)
	for _, s := range filterSubs {
		h.sub(s)
	}
	h.start(h.config("filters"))
	var values [][]byte
	for _, e := range filterEvents {
		values = append(values, event(t, e.ev, e.data))
	}
	h.waitDispatched(h.publish(values...))
	got := map[string][]string{}
	for _, d := range h.deliveries() {
		got[d.EventID] = append(got[d.EventID], d.SubscriptionID)
	}
	for _, e := range filterEvents {
		sort.Strings(got[e.ev.ID])
		if g, w := got[e.ev.ID], e.subs; !slices.Equal(g, w) {
			t.Errorf("%s went to %v, want %v", e.ev.ID, g, w)
		}
	}
}

// fixedMatcher matches by types and tenant over a fixed list.
type fixedMatcher []topics.Subscription

func (m fixedMatcher) Match(e *topics.Event) []*topics.Subscription {
	var out []*topics.Subscription
	for i := range m {
		if m[i].Matches(e) {
			out = append(out, &m[i])
		}
	}
	return out
}

// TestFanOutReportsFilterErrors: every filter that fails on an event is
// reported (and counted by the dispatcher), and does not take the event.
func TestFanOutReportsFilterErrors(t *testing.T) {
	names := topics.Names{Prefix: "webhooks."}
	failed := map[string]int{}
	for _, e := range filterEvents {
		ev := e.ev
		ev.Data = json.RawMessage(e.data)
		b, _ := json.Marshal(ev)
		p := judge(&kgo.Record{Value: b, Timestamp: time.Now()}, nil, 0)
		out, err := fanOut(context.Background(), &p, fixedMatcher(filterSubs), filter.NewCache(), names, time.Now(),
			func(sub *topics.Subscription, _ error) { failed[sub.ID+"/"+e.ev.ID]++ })
		if err != nil || len(out) != len(e.subs) {
			t.Fatalf("%s: %d deliveries (%v), want %d", e.ev.ID, len(out), err, len(e.subs))
		}
	}
	want := map[string]int{"strict/e1": 1, "strict/e3": 1, "vip/e2": 1}
	if len(failed) != len(want) {
		t.Fatalf("filter errors %v, want %v", failed, want)
	}
	for k := range want {
		if failed[k] != 1 {
			t.Fatalf("filter errors %v, want %v", failed, want)
		}
	}
}
