package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/topics"
)

func TestPublish(t *testing.T) {
	h := newHarness(t, true)
	deliverAt := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name string
		args []string
		want topics.Event // CreatedAt checked apart when empty; ID when empty
		key  []byte
	}{
		{
			name: "all fields",
			args: []string{"--type", "order.created", "--data", `{"total": 42, "note": "<b>&</b>"}`, "--id", "evt_1",
				"--tenant", "acme", "--key", "order_42", "--idempotency-key", "idem-1", "--created-at", "2026-11-22T10:00:00Z", "--priority", "high",
				"--deliver-at", deliverAt},
			want: topics.Event{ID: "evt_1", Type: "order.created", Tenant: "acme", Key: "order_42", IdempotencyKey: "idem-1",
				CreatedAt: "2026-11-22T10:00:00Z", Priority: "high", DeliverAt: deliverAt, Data: []byte(`{"total":42,"note":"<b>&</b>"}`)},
			key: []byte("order_42"),
		},
		{
			name: "defaults",
			args: []string{"--type", "invoice.paid", "--data", `[1, 2]`},
			want: topics.Event{Type: "invoice.paid", Data: []byte(`[1,2]`)},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now().Add(-time.Second)
			var out struct {
				ID        string `json:"id"`
				Partition int32  `json:"partition"`
				Offset    int64  `json:"offset"`
			}
			h.json(&out, append([]string{"publish"}, tc.args...)...)
			var rec []byte
			var key []byte
			found := false
			for _, r := range h.records(h.names.Events()) {
				if r.Partition == out.Partition && r.Offset == out.Offset {
					rec, key, found = r.Value, r.Key, true
				}
			}
			if !found {
				t.Fatalf("no record at partition %d offset %d", out.Partition, out.Offset)
			}
			e, err := topics.DecodeEvent(rec, 0)
			if err != nil {
				t.Fatalf("DecodeEvent(%s): %v", rec, err)
			}
			if e.ID != out.ID {
				t.Errorf("printed id %q, record has %q", out.ID, e.ID)
			}
			if !bytes.Equal(key, tc.key) {
				t.Errorf("record key %q, want %q", key, tc.key)
			}
			want := tc.want
			if want.ID == "" {
				if !idRE.MatchString(e.ID) || !strings.HasPrefix(e.ID, "evt_") {
					t.Errorf("generated id %q, want evt_ + 20 lowercase letters and digits", e.ID)
				}
				want.ID = e.ID
			}
			if want.CreatedAt == "" {
				at, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
				if err != nil || at.Before(start) || at.After(time.Now()) {
					t.Errorf("created_at %q is not the publish time", e.CreatedAt)
				}
				want.CreatedAt = e.CreatedAt
			}
			if e.ID != want.ID || e.Type != want.Type || e.Tenant != want.Tenant || e.Key != want.Key ||
				e.IdempotencyKey != want.IdempotencyKey || e.CreatedAt != want.CreatedAt || e.Priority != want.Priority || !bytes.Equal(e.Data, want.Data) {
				t.Errorf("published %+v (data %s), want %+v (data %s)", e, e.Data, want, want.Data)
			}
		})
	}
}

func TestPublishRejects(t *testing.T) {
	h := newHarness(t, true)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"missing type", []string{"--data", "{}"}},
		{"missing data", []string{"--type", "a"}},
		{"invalid json", []string{"--type", "a", "--data", "{"}},
		{"null data", []string{"--type", "a", "--data", "null"}},
		{"bad type", []string{"--type", "order created", "--data", "{}"}},
		{"bad id", []string{"--type", "a", "--data", "{}", "--id", "evt/1"}},
		{"bad created-at", []string{"--type", "a", "--data", "{}", "--created-at", "yesterday"}},
		{"bad priority", []string{"--type", "a", "--data", "{}", "--priority", "urgent"}},
		{"bad deliver-at", []string{"--type", "a", "--data", "{}", "--deliver-at", "tomorrow"}},
		{"deliver-at in the past", []string{"--type", "a", "--data", "{}", "--deliver-at", time.Now().Add(-time.Hour).Format(time.RFC3339)}},
		{"deliver-at over 7 days", []string{"--type", "a", "--data", "{}", "--deliver-at", time.Now().Add(8 * 24 * time.Hour).Format(time.RFC3339)}},
		{"too big", []string{"--type", "a", "--data", `"` + strings.Repeat("x", topics.DefaultMaxEventBytes) + `"`}},
	} {
		t.Run(tc.name, func(*testing.T) {
			h.fails(2, append([]string{"publish"}, tc.args...)...)
		})
	}
	if n := len(h.records(h.names.Events())); n != 0 {
		t.Errorf("%d records on the events topic after rejected publishes, want 0", n)
	}
}

// TestCancelEvent: events cancel writes the record the API's cancel
// writes (the retrier reads it, TestScheduledDelivery), as an
// administrator's or scoped to a tenant, and refuses a bad id writing
// nothing.
func TestCancelEvent(t *testing.T) {
	h := newHarness(t, true)
	start := time.Now().Add(-time.Second)
	var out topics.Cancellation
	h.json(&out, "events", "cancel", "evt_1")
	h.ok("events", "cancel", "evt_2", "--tenant", "acme")
	h.fails(2, "events", "cancel", "evt/3")
	h.fails(2, "events", "cancel", "evt_4", "--tenant", "a/b")
	if out.EventID != "evt_1" || out.Tenant != "" {
		t.Errorf("printed %+v, want evt_1 without a tenant", out)
	}
	recs := h.records(h.names.Cancellations())
	if len(recs) != 2 {
		t.Fatalf("%d records on the cancellations topic, want 2", len(recs))
	}
	got := map[string]topics.Cancellation{} // by event id: the records' partitions may differ
	for _, r := range recs {
		c, err := topics.DecodeCancellation(string(r.Key), r.Value)
		if err != nil {
			t.Fatalf("record %s: %v", r.Key, err)
		}
		got[c.EventID] = c
	}
	for _, want := range []topics.Cancellation{{EventID: "evt_1"}, {EventID: "evt_2", Tenant: "acme"}} {
		c, ok := got[want.EventID]
		if !ok || c.Tenant != want.Tenant || c.CancelledAt.Before(start) || c.CancelledAt.After(time.Now()) {
			t.Errorf("cancellation of %s is %+v, want one of tenant %q cancelled now", want.EventID, c, want.Tenant)
		}
	}
}
