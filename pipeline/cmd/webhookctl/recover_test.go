package main

import (
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

// TestRecoverStartsAnOperation: subscriptions recover writes a pending
// recover operation for the API's runner, its window closed at now; a
// missing --since, an unknown or disabled subscription are refused.
func TestRecoverStartsAnOperation(t *testing.T) {
	h := newHarness(t, true)
	s := h.create("--url", "https://example.com/hooks", "--events", "*")
	var o topics.Operation
	h.json(&o, "subscriptions", "recover", s.ID, "--since", "2h", "--rate", "20")
	if o.Kind != topics.OperationRecover || o.Subscription != s.ID || o.State != topics.OperationPending || o.Rate != 20 ||
		o.Since.IsZero() || !o.Since.Before(o.Until) {
		t.Fatalf("recover wrote %+v", o)
	}
	recs := h.records(h.names.Operations())
	if len(recs) != 1 {
		t.Fatalf("%d operation records, want 1", len(recs))
	}
	if got, err := topics.DecodeOperation(recs[0].Value); err != nil || got.ID != o.ID {
		t.Fatalf("operation record %s: %v", recs[0].Value, err)
	}
	h.fails(2, "subscriptions", "recover", s.ID)
	h.fails(1, "subscriptions", "recover", "sub_missing", "--since", "1h")
	h.ok("subscriptions", "disable", s.ID)
	h.fails(1, "subscriptions", "recover", s.ID, "--since", "1h")
}
