package dlq

import (
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

// TestFilterMatchesDeadEvents: a dead event is found by its type and
// tenant, never by a subscription; an undecodable record by neither.
func TestFilterMatchesDeadEvents(t *testing.T) {
	event := &topics.DeadLetter{FailureCategory: topics.FailureSchema,
		RawEvent: []byte(`{"id":"e1","type":"order.created","tenant":"acme","data":{}}`)}
	garbage := &topics.DeadLetter{FailureCategory: topics.FailureInvalid, RawEvent: []byte(`not json`)}
	delivery := &topics.DeadLetter{FailureCategory: topics.FailureExhausted, Delivery: &topics.Delivery{
		SubscriptionID: "s1", EventType: "order.created", Tenant: "acme"}}
	for _, tc := range []struct {
		name string
		f    Filter
		dl   *topics.DeadLetter
		want bool
	}{
		{"event by type", Filter{Type: "order.*"}, event, true},
		{"event by other type", Filter{Type: "invoice.*"}, event, false},
		{"event by tenant", Filter{Tenant: "acme"}, event, true},
		{"event by other tenant", Filter{Tenant: "umbrella"}, event, false},
		{"event by subscription", Filter{Subscription: "s1"}, event, false},
		{"event by category", Filter{Category: topics.FailureSchema}, event, true},
		{"garbage unfiltered", Filter{}, garbage, true},
		{"garbage by tenant", Filter{Tenant: "acme"}, garbage, false},
		{"garbage by type", Filter{Type: "*"}, garbage, false},
		{"delivery by subscription", Filter{Subscription: "s1", Tenant: "acme", Type: "order.created"}, delivery, true},
		{"delivery by other tenant", Filter{Tenant: "umbrella"}, delivery, false},
	} {
		if got := tc.f.Matches(tc.dl); got != tc.want {
			t.Errorf("%s: Matches = %v, want %v", tc.name, got, tc.want)
		}
	}
	todo, _, undecodable := ToRedrive([]*Entry{{DeadLetter: *event}, {DeadLetter: *garbage}, {DeadLetter: *delivery}})
	if len(todo) != 2 || undecodable != 1 || todo[0].DeadLetter.Delivery != nil || todo[1].DeadLetter.Delivery == nil {
		t.Fatalf("ToRedrive = %d to do, %d undecodable; want the dead event and the delivery", len(todo), undecodable)
	}
}
