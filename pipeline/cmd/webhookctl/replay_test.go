package main

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap/zaptest"

	"github.com/hookpipe/hookpipe/dispatcher"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// publishAt writes event values to the events topic with the given
// publish times, as producers do (default partitioner, keyed by the
// event's key), and returns the records.
func (h *harness) publishAt(events []string, keys []string, at []time.Time) []*kgo.Record {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, len(events))
	for i, v := range events {
		recs[i] = &kgo.Record{Topic: h.names.Events(), Value: []byte(v), Timestamp: at[i]}
		if keys[i] != "" {
			recs[i].Key = []byte(keys[i])
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		h.t.Fatal(err)
	}
	return recs
}

func TestReplay(t *testing.T) {
	h := newHarness(t, true)
	h.create("--id", "sub_r", "--url", "https://r.example/", "--events", "order.*", "--tenant", "acme", "--ordering", "key")
	h.create("--id", "sub_x", "--url", "https://x.example/", "--events", "*")
	h.create("--id", "sub_off", "--url", "https://off.example/", "--events", "*", "--disabled")

	now := time.Now().UTC().Truncate(time.Millisecond)
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	type event struct {
		value, key string
		at         time.Time
	}
	events := []event{
		{`{"id":"evt_0","type":"order.created","tenant":"acme","key":"k1","data":{}}`, "k1", ago(3 * time.Hour)}, // before --since
		{`{"id":"evt_1","type":"order.created","tenant":"acme","key":"k1","created_at":"2026-01-02T03:04:05Z","data":{"n": 1,  "s":"<x>"}}`, "k1", ago(2 * time.Hour)},
		{`{"id":"evt_2","type":"order.paid","tenant":"acme","data":[1, 2]}`, "", ago(100 * time.Minute)},
		{`{"id":"evt_3","type":"invoice.paid","tenant":"acme","data":{}}`, "", ago(90 * time.Minute)},    // type not wanted
		{`{"id":"evt_4","type":"order.created","tenant":"globex","data":{}}`, "", ago(80 * time.Minute)}, // other tenant
		{`{"id":"evt_bad","type":"order.created"`, "", ago(70 * time.Minute)},                            // undecodable
		{`{"id":"evt_5","type":"order.created","tenant":"acme","key":"k2","data":"five"}`, "k2", ago(60 * time.Minute)},
		{`{"id":"evt_6","type":"order.created","tenant":"acme","data":{}}`, "", ago(10 * time.Minute)}, // after --until
	}
	var values, keys []string
	var at []time.Time
	for _, e := range events {
		values, keys, at = append(values, e.value), append(keys, e.key), append(at, e.at)
	}
	recs := h.publishAt(values, keys, at)

	var sum replaySummary
	h.json(&sum, "replay", "--subscription", "sub_r", "--since", "150m", "--until", "30m", "--rate", "1000")
	if want := (replaySummary{Subscription: "sub_r", Scanned: 6, Replayed: 3, NotMatching: 2, Undecodable: 1}); sum != want {
		t.Errorf("replay: %+v, want %+v", sum, want)
	}
	got := h.deliveries()
	if len(got) != 3 {
		t.Fatalf("%d deliveries, want evt_1, evt_2 and evt_5", len(got))
	}
	partitions := h.partitions(h.names.Deliveries())
	for _, tc := range []struct {
		i    int // index in events
		key  string
		want topics.Delivery
	}{
		{1, "sub_r/k1", topics.Delivery{EventType: "order.created", Key: "k1", Timestamp: "2026-01-02T03:04:05Z", Data: []byte(`{"n": 1,  "s":"<x>"}`)}},
		{2, "sub_r/evt_2", topics.Delivery{EventType: "order.paid", Timestamp: at[2].Format(time.RFC3339Nano), Data: []byte(`[1, 2]`)}},
		{6, "sub_r/k2", topics.Delivery{EventType: "order.created", Key: "k2", Timestamp: at[6].Format(time.RFC3339Nano), Data: []byte(`"five"`)}},
	} {
		ev, _ := topics.DecodeEvent(recs[tc.i].Value, 0)
		r := got[ev.ID]
		if r == nil {
			t.Errorf("%s was not replayed", ev.ID)
			continue
		}
		d, _ := topics.DecodeDelivery(r.Value)
		want := tc.want
		want.SubscriptionID, want.EventID, want.Tenant, want.Attempt, want.PublishedAt = "sub_r", ev.ID, "acme", 1, at[tc.i]
		if !reflect.DeepEqual(d, want) {
			t.Errorf("%s replayed as\n%+v\nwant\n%+v", ev.ID, d, want)
		}
		if string(r.Key) != tc.key {
			t.Errorf("%s replayed with key %q, want %q", ev.ID, r.Key, tc.key)
		}
		wantPart := int32(topics.Partitioner().ForTopic(r.Topic).Partition(&kgo.Record{Key: r.Key}, partitions))
		if r.Partition != wantPart {
			t.Errorf("%s replayed to partition %d, want %d (the subscription's)", ev.ID, r.Partition, wantPart)
		}
	}

	// --types narrows within the subscription's patterns.
	sum = replaySummary{}
	h.json(&sum, "replay", "--subscription", "sub_r", "--since", "150m", "--until", "30m", "--types", "order.paid,invoice.*", "--rate", "1000")
	if sum.Replayed != 1 || sum.NotMatching != 4 || sum.Undecodable != 1 {
		t.Errorf("replay --types order.paid,invoice.*: %+v, want only evt_2", sum)
	}
	all := h.committed(h.names.Deliveries())
	if len(all) != 4 {
		t.Fatalf("%d deliveries after the second replay, want 4", len(all))
	}
	if d, _ := topics.DecodeDelivery(all[len(all)-1].Value); d.EventID != "evt_2" {
		t.Errorf("--types order.paid,invoice.* replayed %s, want evt_2", d.EventID)
	}

	// Without --until: up to the end, evt_6 included.
	out := h.okLong("replay", "--subscription", "sub_r", "--since", "30m", "--rate", "1000")
	if out != "replayed 1 to sub_r, scanned 1, skipped 0 (not matching 0, undecodable 0, expunged 0)\n" {
		t.Errorf("replay --since 30m text: %q", out)
	}

	// Only the one subscription ever gets deliveries.
	for _, r := range h.committed(h.names.Deliveries()) {
		if d, _ := topics.DecodeDelivery(r.Value); d.SubscriptionID != "sub_r" || !bytes.HasPrefix(r.Key, []byte("sub_r/")) {
			t.Errorf("delivery for %s (key %q): only sub_r was replayed to", d.SubscriptionID, r.Key)
		}
	}

	if line := h.fails(1, "replay", "--subscription", "sub_nope", "--since", "1h"); !strings.Contains(line, "subscription sub_nope not found") {
		t.Errorf("replay to a missing subscription: %q", line)
	}
	if line := h.fails(1, "replay", "--subscription", "sub_off", "--since", "1h"); !strings.Contains(line, "sub_off is disabled") {
		t.Errorf("replay to a disabled subscription: %q", line)
	}
	if n := len(h.committed(h.names.Deliveries())); n != 5 {
		t.Errorf("%d deliveries after the refused replays, want still 5", n)
	}
}

// partitions is the partition count of topic.
func (h *harness) partitions(topic string) int {
	h.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers))
	if err != nil {
		h.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	details, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		h.t.Fatal(err)
	}
	return len(details[topic].Partitions)
}

// TestReplayedIsDispatched: a replayed delivery is the record the
// dispatcher made of the same event for the same subscription: key, value,
// headers and partition; an event the subscription's filter refuses is
// neither dispatched nor replayed.
func TestReplayedIsDispatched(t *testing.T) {
	h := newHarness(t, true)
	h.create("--id", "sub_same", "--url", "https://same.example/", "--events", "order.*", "--ordering", "key", "--filter", "data.n > 0")
	at := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	h.publishAt([]string{`{"id":"evt_same","type":"order.created","tenant":"acme","key":"k7","data":{"n":1}}`,
		`{"id":"evt_filtered","type":"order.created","tenant":"acme","key":"k7","data":{"n":0}}`},
		[]string{"k7", "k7"}, []time.Time{at, at})

	cfg, err := dispatcher.LoadConfig(func(k string) string { return h.env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dispatcher.Run(ctx, cfg, zaptest.NewLogger(t)) }()
	testkit.WaitFor(t, 20*time.Second, "the dispatcher's delivery", func() bool {
		return len(h.committed(h.names.Deliveries())) > 0
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("dispatcher: %v", err)
	}

	var sum replaySummary
	h.json(&sum, "replay", "--subscription", "sub_same", "--since", "1h", "--rate", "1000")
	if sum.Replayed != 1 || sum.NotMatching != 1 {
		t.Fatalf("replay: %+v, want one, and the one the filter refuses not", sum)
	}
	got := h.committed(h.names.Deliveries())
	if len(got) != 2 {
		t.Fatalf("%d deliveries, want the dispatched one and the replayed one", len(got))
	}
	d, r := got[0], got[1]
	if !bytes.Equal(d.Key, r.Key) || !bytes.Equal(d.Value, r.Value) || !reflect.DeepEqual(d.Headers, r.Headers) ||
		d.Partition != r.Partition {
		t.Fatalf("dispatched  %q %s %v on %d\nreplayed as %q %s %v on %d",
			d.Key, d.Value, d.Headers, d.Partition, r.Key, r.Value, r.Headers, r.Partition)
	}
}
