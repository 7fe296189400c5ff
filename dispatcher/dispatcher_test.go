package dispatcher

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestFanOut checks which subscriptions get a delivery, the delivery
// records' keys, partitions and fields (data byte for byte), and a clean
// shutdown.
func TestFanOut(t *testing.T) {
	const partitions = 6
	h := newHarness(t, partitions)
	for _, s := range []topics.Subscription{
		{ID: "exact", EventTypes: []string{"order.created"}, Enabled: true},
		{ID: "prefix", Tenant: "acme", EventTypes: []string{"order.*"}, Enabled: true, Ordering: topics.OrderingKey},
		{ID: "any", Tenant: "globex", EventTypes: []string{"*"}, Enabled: true},
		{ID: "overlap", EventTypes: []string{"order.created", "order.*", "*"}, Enabled: true},
		{ID: "invoices", EventTypes: []string{"invoice.paid"}, Enabled: true, Ordering: topics.OrderingKey},
		{ID: "disabled", EventTypes: []string{"*"}, Enabled: false},
		{ID: "deleted", EventTypes: []string{"*"}, Enabled: true},
	} {
		h.sub(s)
	}
	h.deleteSub("deleted")
	run := h.start(h.config("fanout"))

	const createdAt = "2026-11-22T10:00:00Z"
	events := []struct {
		ev   topics.Event
		subs map[string]string // subscription -> delivery key
	}{
		{topics.Event{ID: "e1", Type: "order.created", Tenant: "acme", Key: "order_1", CreatedAt: createdAt},
			map[string]string{"exact": "exact/e1", "prefix": "prefix/order_1", "overlap": "overlap/e1"}},
		{topics.Event{ID: "e2", Type: "order.created", Tenant: "acme", Key: "order_1"},
			map[string]string{"exact": "exact/e2", "prefix": "prefix/order_1", "overlap": "overlap/e2"}},
		{topics.Event{ID: "e3", Type: "order.shipped", Tenant: "acme", Key: "order_2"},
			map[string]string{"prefix": "prefix/order_2", "overlap": "overlap/e3"}},
		{topics.Event{ID: "e4", Type: "order.cancelled", Tenant: "acme"},
			map[string]string{"prefix": "prefix/e4", "overlap": "overlap/e4"}},
		{topics.Event{ID: "e5", Type: "order.created", Tenant: "globex", Key: "order_9"},
			map[string]string{"exact": "exact/e5", "any": "any/e5", "overlap": "overlap/e5"}},
		{topics.Event{ID: "e6", Type: "order", Tenant: "acme"},
			map[string]string{"overlap": "overlap/e6"}},
		{topics.Event{ID: "e7", Type: "invoice.paid", Tenant: "initech", Key: "inv_1"},
			map[string]string{"invoices": "invoices/inv_1", "overlap": "overlap/e7"}},
		{topics.Event{ID: "e8", Type: "invoice.paid", Tenant: "globex", CreatedAt: createdAt},
			map[string]string{"invoices": "invoices/e8", "any": "any/e8", "overlap": "overlap/e8"}},
		{topics.Event{ID: "e9", Type: "invoice.paid", Tenant: "initech", Key: "inv_2"},
			map[string]string{"invoices": "invoices/inv_2", "overlap": "overlap/e9"}},
	}
	values := make([][]byte, len(events))
	data := map[string]string{}
	for i, e := range events {
		// Odd whitespace, unicode escapes and number spellings that any
		// re-encoding would change.
		data[e.ev.ID] = fmt.Sprintf("{ \"n\" :\t%d ,\n  \"s\": \"caf\\u00e9 \\ud83d\\ude00\\/\", \"x\": [1, 2.50,  3e0], \"e\": {} }", i)
		values[i] = event(t, e.ev, data[e.ev.ID])
	}
	published := h.publish(values...)
	h.waitDispatched(published)

	got := map[string]delivered{}
	for _, d := range h.deliveries() {
		k := pairKey(d.SubscriptionID, d.EventID)
		if _, dup := got[k]; dup {
			t.Errorf("two deliveries for %s", k)
		}
		got[k] = d
	}
	want := map[string]bool{}
	partitioner := topics.Partitioner().ForTopic(h.names().Deliveries())
	for i, e := range events {
		rec := published[i]
		ts := e.ev.CreatedAt
		if ts == "" {
			ts = rec.Timestamp.Truncate(time.Millisecond).UTC().Format(time.RFC3339Nano)
		}
		for sub, key := range e.subs {
			k := pairKey(sub, e.ev.ID)
			want[k] = true
			d, ok := got[k]
			if !ok {
				t.Errorf("no delivery for %s", k)
				continue
			}
			if d.key != key {
				t.Errorf("%s: key %q, want %q", k, d.key, key)
			}
			if p := int32(partitioner.Partition(&kgo.Record{Key: []byte(sub)}, partitions)); d.partition != p {
				t.Errorf("%s: partition %d, want %d (the subscription's)", k, d.partition, p)
			}
			if string(d.Data) != data[e.ev.ID] {
				t.Errorf("%s: data\n%q\nwant byte for byte\n%q", k, d.Data, data[e.ev.ID])
			}
			wantFields := topics.Delivery{
				SubscriptionID: sub, EventID: e.ev.ID, EventType: e.ev.Type, Tenant: e.ev.Tenant,
				Key: e.ev.Key, Timestamp: ts, Attempt: 1,
			}
			gotFields := d.Delivery
			gotFields.Data, gotFields.PublishedAt = nil, time.Time{}
			if !reflect.DeepEqual(gotFields, wantFields) {
				t.Errorf("%s:\n got %+v\nwant %+v", k, gotFields, wantFields)
			}
			if !d.PublishedAt.Equal(rec.Timestamp.Truncate(time.Millisecond)) {
				t.Errorf("%s: published_at %v, want the event record's %v", k, d.PublishedAt, rec.Timestamp)
			}
		}
	}
	for k := range got {
		if !want[k] {
			t.Errorf("unexpected delivery %s", k)
		}
	}

	if err := run.Stop(t); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	groups, err := h.adm.DescribeGroups(h.ctx, h.group)
	if err != nil {
		t.Fatal(err)
	}
	if g := groups[h.group]; len(g.Members) != 0 {
		t.Errorf("group still has %d members after shutdown", len(g.Members))
	}
}

// TestInvalidEvents publishes bad events between good ones: each bad one
// is dead-lettered with its reason and exact bytes, every good one is
// dispatched, and the dispatcher keeps going.
func TestInvalidEvents(t *testing.T) {
	h := newHarness(t, 3)
	h.sub(topics.Subscription{ID: "all", EventTypes: []string{"*"}, Enabled: true})
	cfg := h.config("invalid")
	cfg.MaxEventBytes = 1024
	run := h.start(cfg)

	good := func(id string) []byte {
		return event(t, topics.Event{ID: id, Type: "thing.happened", Key: "k_" + id}, `{"ok":true}`)
	}
	bad := map[string]struct {
		value  string
		reason string
	}{
		"not json":     {`this is not json`, "invalid character"},
		"missing data": {`{"id":"b2","type":"thing.happened"}`, "data: required"},
		"null data":    {`{"id":"b3","type":"thing.happened","data":null}`, "data: required"},
		"bad type":     {`{"id":"b4","type":"thing happened!","data":{}}`, "type:"},
		"unknown":      {`{"id":"b5","type":"t","data":{},"extra":1}`, `unknown object member name "extra"`},
		"trailing":     {`{"id":"b6","type":"t","data":{}} {}`, "after top-level value"},
		"oversize":     {`{"id":"b7","type":"t","data":"` + strings.Repeat("x", 1100) + `"}`, "over the 1024 byte limit"},
		"empty":        {``, "EOF"},
		"not utf-8":    {"{\"id\":\"b8\",\"type\":\"t\",\"data\":\"caf\xe9\"}", "not valid UTF-8"},
	}
	var values [][]byte
	var goodIDs []string
	names := slices.Sorted(maps.Keys(bad))
	for i, name := range names {
		id := fmt.Sprintf("g%d", i)
		goodIDs = append(goodIDs, id)
		values = append(values, good(id), []byte(bad[name].value))
	}
	published := h.publish(values...)
	h.waitDispatched(published)

	dead := map[int64]topics.DeadLetter{}
	for _, r := range h.readAll(h.names().DLQ(), true) {
		dl, err := topics.DecodeDeadLetter(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		dead[dl.Source.Offset] = dl
	}
	for i, name := range names {
		rec := published[2*i+1]
		dl, ok := dead[rec.Offset]
		if !ok || dl.Source.Partition != rec.Partition {
			t.Errorf("%s: not dead-lettered", name)
			continue
		}
		if !strings.Contains(dl.Reason, bad[name].reason) {
			t.Errorf("%s: reason %q does not say %q", name, dl.Reason, bad[name].reason)
		}
		if string(dl.RawEvent) != bad[name].value {
			t.Errorf("%s: raw event %q, want the exact value", name, dl.RawEvent)
		}
		if dl.FailureCategory != topics.FailureInvalid || dl.Attempts != 0 || dl.Delivery != nil ||
			dl.Source.Topic != h.names().Events() || dl.DeadAt.IsZero() {
			t.Errorf("%s: dead letter %+v", name, dl)
		}
	}
	if len(dead) != len(bad) {
		t.Errorf("%d dead letters, want %d", len(dead), len(bad))
	}

	// Still running: a later event is dispatched too.
	published = h.publish(good("after"))
	h.waitDispatched(published)
	got := map[string]int{}
	for _, d := range h.deliveries() {
		got[d.EventID]++
	}
	for _, id := range append(goodIDs, "after") {
		if got[id] != 1 {
			t.Errorf("event %s: %d deliveries, want 1", id, got[id])
		}
	}
	if len(got) != len(goodIDs)+1 {
		t.Errorf("deliveries for %v, want only the good events", slices.Sorted(maps.Keys(got)))
	}
	if err := run.Stop(t); err != nil {
		t.Fatal(err)
	}
}
