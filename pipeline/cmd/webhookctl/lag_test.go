package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestLag: per group and topic, the records after the committed offsets;
// on retry tiers the same number as held records, with the earliest due
// time of the first unreleased records.
func TestLag(t *testing.T) {
	h := newHarness(t, true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(h.brokers), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(r *kgo.Record) {
		t.Helper()
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// Four events, the dispatcher committed past one of them.
	for i := range 4 {
		produce(&kgo.Record{Topic: h.names.Events(), Partition: int32(i % 2), Value: []byte(`{}`)})
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: h.names.Events(), Partition: 0, At: 1, LeaderEpoch: -1})
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, topics.GroupDispatcher, offs); err != nil {
		t.Fatal(err)
	}
	// Three records in the shortest tier: the retrier released (committed)
	// the first of partition 0; the heads left are due at due0 and due1.
	tier := h.names.RetryTopics()[0]
	due0 := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	due1 := due0.Add(-time.Minute)
	for _, r := range []struct {
		p   int32
		due time.Time
	}{{0, due0.Add(-time.Hour)}, {0, due0}, {1, due1}} {
		produce(&kgo.Record{Topic: tier, Partition: r.p, Value: []byte(`{}`), Headers: []kgo.RecordHeader{topics.NotBeforeHeader(r.due)}})
	}
	offs = kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: tier, Partition: 0, At: 1, LeaderEpoch: -1})
	if err := kadm.NewClient(cl).CommitAllOffsets(ctx, topics.GroupRetrier, offs); err != nil {
		t.Fatal(err)
	}

	// Two ordered keys held, one since an hour.
	hn := h.names
	since := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	for key, hold := range map[string]*topics.Hold{
		"sub_o/old": {Head: "evt_old", HeadAttempt: 2, ParkedFrom: -1, Through: -1, Since: since},
		"sub_o/new": {Head: "evt_new", HeadAttempt: 2, ParkedFrom: -1, Through: -1, Since: time.Now()},
	} {
		produce(&kgo.Record{Topic: hn.Holds(), Key: []byte(key), Value: hold.Encode()})
	}

	var rows []lagRow
	h.json(&rows, "lag")
	byTopic := map[string]lagRow{}
	for _, r := range rows {
		byTopic[r.Group+" "+r.Topic] = r
	}
	if want := 6 + len(h.names.Tiers); len(rows) != want {
		t.Fatalf("%d rows, want %d: %+v", len(rows), want, rows)
	}
	if r := byTopic[topics.GroupDispatcher+" "+h.names.Events()]; r.Lag != 3 || r.Partitions != 2 || r.Held != nil {
		t.Errorf("dispatcher on events: %+v, want lag 3 over 2 partitions, no held", r)
	}
	for _, topic := range append(h.names.DeliveryTopics(), h.names.Redeliveries()) {
		if r, ok := byTopic[topics.GroupDeliverer+" "+topic]; !ok || r.Lag != 0 || r.Members != 0 {
			t.Errorf("deliverer on %s: %+v, want lag 0, no members", topic, r)
		}
	}
	if r := byTopic[topics.GroupDeliverer+" "+h.names.Deliveries()]; r.Holds == nil || r.Holds.Keys != 2 ||
		r.Holds.Longest != "sub_o/old" || r.Holds.Head != "evt_old" || r.Holds.Since == nil || !r.Holds.Since.Equal(since) {
		t.Errorf("deliverer on deliveries: holds %+v, want 2 keys, sub_o/old behind evt_old the longest", r.Holds)
	}
	if text := h.ok("lag", "--group", topics.GroupDeliverer); !strings.Contains(text, "Ordered keys held: 2; longest sub_o/old, behind event evt_old") {
		t.Errorf("lag --group %s does not show the held keys:\n%s", topics.GroupDeliverer, text)
	}
	r := byTopic[topics.GroupRetrier+" "+tier]
	if r.Lag != 2 || r.Held == nil || *r.Held != 2 {
		t.Errorf("retrier on %s: %+v, want lag and held 2", tier, r)
	}
	if r.OldestDue == nil || !r.OldestDue.Equal(due1) {
		t.Errorf("retrier on %s: oldest due %v, want %v", tier, r.OldestDue, due1)
	}
	if r := byTopic[topics.GroupRetrier+" "+h.names.RetryTopics()[1]]; r.Held == nil || *r.Held != 0 || r.OldestDue != nil {
		t.Errorf("an empty tier: %+v, want held 0 and no due time", r)
	}

	text := h.ok("lag", "--group", topics.GroupRetrier)
	if !strings.HasPrefix(text, "GROUP") || strings.Contains(text, h.names.Events()) ||
		!strings.Contains(text, formatTime(due1)+" (in ") {
		t.Errorf("lag --group %s printed:\n%s", topics.GroupRetrier, text)
	}
	if !strings.Contains(text, "no members is not consuming") {
		t.Errorf("lag without members gives no hint:\n%s", text)
	}
	if msg := h.fails(2, "lag", "--group", "nope"); !strings.Contains(msg, topics.GroupDeliverer) {
		t.Errorf("unknown group: %q does not list the groups", msg)
	}
}

func TestLagMissingTopics(t *testing.T) {
	h := newHarness(t, false)
	if msg := h.fails(1, "lag"); !strings.Contains(msg, "topics ensure") {
		t.Errorf("lag without topics: %q, want a hint to run topics ensure", msg)
	}
}

// TestLagGroupsFollowTheEnvironment: the groups lag reports are the ones
// the components use, renamed by the same variables.
func TestLagGroupsFollowTheEnvironment(t *testing.T) {
	n, err := topics.NewNames(topics.DefaultPrefix, topics.DefaultRetryTiers)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"WEBHOOKS_DELIVERER_GROUP": "d2", "WEBHOOKS_RETRIER_GROUP": "r2", "WEBHOOKS_RECORDER_GROUP": "c2"}
	var got []string
	for _, g := range groupTopics(n, func(k string) string { return env[k] }) {
		got = append(got, g.group)
	}
	if want := []string{topics.GroupDispatcher, "d2", "r2", "c2"}; !slices.Equal(got, want) {
		t.Errorf("groups %v, want %v", got, want)
	}
}
