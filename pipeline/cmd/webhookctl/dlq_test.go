package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// dlqSeed is a dlq topic as the pipeline leaves it: dead letters of two
// subscriptions, an undecodable event, and one dead letter already
// redriven (a marker points at it).
type dlqSeed struct {
	recs map[string]*kgo.Record // by name: a1, a2, b1, raw, b2 (redriven), marker
	dls  map[string]topics.DeadLetter
}

// longReason is over the 60 characters the text table shows.
var longReason = "retries exhausted, last failure server_error: endpoint answered 503 " + strings.Repeat("x", 40)

// secretData is event data that text output must never show.
const secretData = `{"card": "4242-secret"}`

func seedDLQ(h *harness) *dlqSeed {
	h.t.Helper()
	now := time.Now().UTC().Truncate(time.Millisecond)
	del := func(sub, event, typ string) *topics.Delivery {
		return &topics.Delivery{SubscriptionID: sub, EventID: event, EventType: typ, Tenant: "acme",
			Timestamp: now.Add(-4 * time.Hour).Format(time.RFC3339Nano), Data: []byte(secretData), Attempt: 8,
			PublishedAt: now.Add(-4 * time.Hour), FirstAttemptAt: now.Add(-4 * time.Hour), NotBefore: now.Add(-3 * time.Hour)}
	}
	s := &dlqSeed{recs: map[string]*kgo.Record{}, dls: map[string]topics.DeadLetter{
		"a1": {Delivery: del("sub_a", "evt_a1", "order.created"), Reason: longReason, FailureCategory: "server_error",
			HTTPStatus: 503, Attempts: 8, DeadAt: now.Add(-3 * time.Hour)},
		"a2": {Delivery: del("sub_a", "evt_a2", "invoice.paid"), Reason: "endpoint answered 404", FailureCategory: "permanent_4xx",
			HTTPStatus: 404, Attempts: 1, DeadAt: now.Add(-90 * time.Minute)},
		"b1": {Delivery: del("sub_b", "evt_b1", "order.created"), Reason: "retries exhausted\nafter timeout", FailureCategory: "exhausted",
			LastFailureCategory: "timeout", Attempts: 8, DeadAt: now.Add(-30 * time.Minute)},
		"raw": {RawEvent: []byte(`{"id": "evt_bad"`), Reason: "invalid event: unexpected EOF", FailureCategory: "invalid_record",
			DeadAt: now.Add(-20 * time.Minute)},
		"b2": {Delivery: del("sub_b", "evt_b2", "order.paid"), Reason: "endpoint answered 500", FailureCategory: "server_error",
			HTTPStatus: 500, Attempts: 8, DeadAt: now.Add(-10 * time.Minute)},
	}}
	keys := map[string]string{"a1": "sub_a/evt_a1", "a2": "sub_a/order_7", "b1": "sub_b/evt_b1", "raw": "order_9", "b2": "sub_b/evt_b2"}
	names := []string{"a1", "a2", "b1", "raw", "b2"}
	var recs []*kgo.Record
	for _, n := range names {
		dl := s.dls[n]
		dl.Source = topics.Source{Topic: h.names.Deliveries(), Partition: 0, Offset: int64(len(recs))}
		s.dls[n] = dl
		recs = append(recs, &kgo.Record{Topic: h.names.DLQ(), Key: []byte(keys[n]), Value: dl.Encode(), Timestamp: dl.DeadAt})
	}
	for i, r := range h.produce(recs...) {
		s.recs[names[i]] = r
	}
	b2 := s.recs["b2"]
	marker := topics.DeadLetter{Redriven: &topics.Source{Topic: h.names.DLQ(), Partition: b2.Partition, Offset: b2.Offset},
		Reason: redriveReason, DeadAt: now.Add(-5 * time.Minute)}
	s.recs["marker"] = h.produce(&kgo.Record{Topic: h.names.DLQ(), Key: b2.Key, Value: marker.Encode(), Timestamp: marker.DeadAt})[0]
	return s
}

// name maps a listed dead letter back to its seed name.
func (s *dlqSeed) name(e *deadLetter) string {
	for n, r := range s.recs {
		if r.Partition == e.Partition && r.Offset == e.Offset {
			return n
		}
	}
	return "?"
}

func (s *dlqSeed) names(es []*deadLetter) []string {
	out := []string{}
	for _, e := range es {
		out = append(out, s.name(e))
	}
	return out
}

func TestDLQList(t *testing.T) {
	h := newHarness(t, true)
	s := seedDLQ(h)

	var all []*deadLetter
	h.json(&all, "dlq", "list")
	if got, want := s.names(all), []string{"a1", "a2", "b1", "raw"}; !slices.Equal(got, want) {
		t.Fatalf("dlq list: %v, want %v (oldest first, the redriven b2 hidden)", got, want)
	}
	for _, e := range all {
		n := s.name(e)
		want := s.dls[n]
		if !reflect.DeepEqual(e.DeadLetter, want) || e.Key != string(s.recs[n].Key) || e.Redriven {
			t.Errorf("%s listed as %+v (key %q, redriven %t), want %+v", n, e.DeadLetter, e.Key, e.Redriven, want)
		}
	}

	// The JSON shape scripts rely on.
	var raw []map[string]json.RawMessage
	h.json(&raw, "dlq", "list", "--limit", "1")
	if len(raw) != 1 {
		t.Fatalf("--limit 1: %d objects", len(raw))
	}
	var keys []string
	for k := range raw[0] {
		keys = append(keys, k)
	}
	if slices.Sort(keys); !slices.Equal(keys, []string{"dead_letter", "key", "offset", "partition", "redriven"}) {
		t.Errorf("dlq list -o json object keys %v", keys)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--all"}, []string{"a1", "a2", "b1", "raw", "b2"}},
		{[]string{"--subscription", "sub_a"}, []string{"a1", "a2"}},
		{[]string{"--subscription", "sub_b", "--all"}, []string{"b1", "b2"}},
		{[]string{"--subscription", "sub_none"}, []string{}},
		{[]string{"--type", "order.created"}, []string{"a1", "b1"}},
		{[]string{"--type", "order.*", "--all"}, []string{"a1", "b1", "b2"}},
		{[]string{"--type", "*"}, []string{"a1", "a2", "b1"}},
		{[]string{"--category", "server_error"}, []string{"a1"}},
		{[]string{"--category", "invalid_record"}, []string{"raw"}},
		{[]string{"--category", "exhausted"}, []string{"b1"}},
		{[]string{"--category", "timeout"}, []string{"b1"}}, // exhausted, its last failure a timeout
		{[]string{"--since", "2h"}, []string{"a2", "b1", "raw"}},
		{[]string{"--since", "2h", "--until", "25m"}, []string{"a2", "b1"}},
		{[]string{"--until", "100m"}, []string{"a1"}},
		{[]string{"--since", s.dls["b1"].DeadAt.Format(time.RFC3339Nano), "--all"}, []string{"b1", "raw", "b2"}},
		{[]string{"--since", time.Now().Add(time.Hour).Format(time.RFC3339)}, []string{}},
		{[]string{"--limit", "2"}, []string{"b1", "raw"}},
		{[]string{"--limit", "0"}, []string{"a1", "a2", "b1", "raw"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var got []*deadLetter
			h.json(&got, append([]string{"dlq", "list"}, tc.args...)...)
			if names := s.names(got); !slices.Equal(names, tc.want) {
				t.Errorf("%v, want %v", names, tc.want)
			}
			for _, e := range got {
				if e.Redriven != (s.name(e) == "b2") {
					t.Errorf("%s: redriven %t", s.name(e), e.Redriven)
				}
			}
		})
	}

	text := h.ok("dlq", "list")
	for _, want := range []string{"DEAD AT", "PARTITION", "OFFSET", "SUBSCRIPTION", "EVENT", "TYPE", "CATEGORY", "STATUS",
		"ATTEMPTS", "REASON", "evt_a1", "sub_a", "invoice.paid", "404", "invalid event: unexpected EOF",
		"retries exhausted after timeout", oneLine(longReason, 60)} {
		if !strings.Contains(text, want) {
			t.Errorf("dlq list text does not contain %q:\n%s", want, text)
		}
	}
	for _, never := range []string{"4242", "evt_b2", "REDRIVEN", longReason} {
		if strings.Contains(text, never) {
			t.Errorf("dlq list text contains %q:\n%s", never, text)
		}
	}
	if lines := strings.Split(strings.TrimSpace(text), "\n"); len(lines) != 5 {
		t.Errorf("dlq list text has %d lines, want a header and 4 rows:\n%s", len(lines), text)
	}
	text = h.ok("dlq", "list", "--all", "--subscription", "sub_b")
	if !strings.Contains(text, "REDRIVEN") || !regexp.MustCompile(`(?m)evt_b2 .* yes `).MatchString(text) ||
		!regexp.MustCompile(`(?m)evt_b1 .* no `).MatchString(text) {
		t.Errorf("dlq list --all text:\n%s\nwant a REDRIVEN column, yes for evt_b2 and no for evt_b1", text)
	}
	text = h.ok("dlq", "list", "--limit", "3")
	if !strings.Contains(text, "showing the newest 3 of 4") || strings.Contains(text, "evt_a1") {
		t.Errorf("dlq list --limit 3 text:\n%s\nwant the newest 3 and a note", text)
	}
}

func TestDLQListEmpty(t *testing.T) {
	h := newHarness(t, true)
	if out := h.ok("dlq", "list"); out != "no dead letters\n" {
		t.Errorf("dlq list on an empty topic: %q", out)
	}
	if out := h.ok("dlq", "list", "-o", "json", "--since", "1h"); strings.TrimSpace(out) != "[]" {
		t.Errorf("dlq list -o json on an empty topic: %q", out)
	}
}

// deliveries decodes the committed deliveries by event id; an event
// delivered twice fails the test.
func (h *harness) deliveries() map[string]*kgo.Record {
	h.t.Helper()
	out := map[string]*kgo.Record{}
	for _, r := range h.committed(h.names.Deliveries()) {
		d, err := topics.DecodeDelivery(r.Value)
		if err != nil {
			h.t.Fatalf("delivery at %d/%d: %v", r.Partition, r.Offset, err)
		}
		if _, dup := out[d.EventID]; dup {
			h.t.Errorf("event %s delivered twice", d.EventID)
		}
		out[d.EventID] = r
	}
	return out
}

func TestDLQRedrive(t *testing.T) {
	h := newHarness(t, true)
	s := seedDLQ(h)
	dlqBefore := len(h.committed(h.names.DLQ()))

	// A dry run lists, and produces nothing.
	var dry redriveSummary
	h.json(&dry, "dlq", "redrive", "--subscription", "sub_a", "--dry-run")
	if got := s.names(dry.DeadLetters); !dry.DryRun || dry.ToRedrive != 2 || dry.Redriven != 0 || !slices.Equal(got, []string{"a1", "a2"}) {
		t.Errorf("dry run: %+v (%v), want a1 and a2 to redrive", dry, got)
	}
	text := h.okLong("dlq", "redrive", "--dry-run")
	if !strings.Contains(text, "would redrive 3, skipped already-redriven 1, skipped undecodable 1") ||
		!strings.Contains(text, "evt_b1") || strings.Contains(text, "4242") {
		t.Errorf("dry run text:\n%s", text)
	}
	if n := len(h.committed(h.names.Deliveries())); n != 0 {
		t.Fatalf("%d deliveries after dry runs, want 0", n)
	}
	if n := len(h.committed(h.names.DLQ())); n != dlqBefore {
		t.Fatalf("%d dlq records after dry runs, want %d", n, dlqBefore)
	}

	var sum redriveSummary
	h.json(&sum, "dlq", "redrive", "--subscription", "sub_a", "--rate", "1000")
	if sum.DryRun || sum.ToRedrive != 2 || sum.Redriven != 2 || sum.AlreadyRedriven != 0 || sum.Undecodable != 0 {
		t.Errorf("redrive --subscription sub_a: %+v", sum)
	}
	got := h.deliveries()
	if len(got) != 2 {
		t.Fatalf("%d deliveries after redriving sub_a, want 2", len(got))
	}
	for _, n := range []string{"a1", "a2"} {
		dead := s.dls[n]
		r := got[dead.Delivery.EventID]
		if r == nil {
			t.Errorf("%s was not redriven", n)
			continue
		}
		d, _ := topics.DecodeDelivery(r.Value)
		want := *dead.Delivery
		want.Attempt, want.FirstAttemptAt, want.NotBefore = 1, time.Time{}, time.Time{}
		if !reflect.DeepEqual(d, want) {
			t.Errorf("%s redriven as\n%+v\nwant\n%+v", n, d, want)
		}
		if dl := s.recs[n]; !bytes.Equal(r.Key, dl.Key) || r.Partition != dl.Partition {
			t.Errorf("%s redriven with key %q to partition %d, want key %q and partition %d (its subscription's)",
				n, r.Key, r.Partition, dl.Key, dl.Partition)
		}
	}

	// Each redriven dead letter got a marker, with its key.
	markers := map[topics.Source][]byte{}
	for _, r := range h.committed(h.names.DLQ()) {
		if dl, err := topics.DecodeDeadLetter(r.Value); err == nil && dl.Redriven != nil {
			if fresh := dl.Redriven.Offset != s.recs["b2"].Offset || dl.Redriven.Partition != s.recs["b2"].Partition; fresh &&
				(dl.Reason != redriveReason || dl.Delivery != nil || time.Since(dl.DeadAt) > time.Minute) {
				t.Errorf("marker %+v", dl)
			}
			markers[*dl.Redriven] = r.Key
		}
	}
	for _, n := range []string{"a1", "a2", "b2"} {
		r := s.recs[n]
		if key, ok := markers[topics.Source{Topic: h.names.DLQ(), Partition: r.Partition, Offset: r.Offset}]; !ok || !bytes.Equal(key, r.Key) {
			t.Errorf("marker of %s: found %t, key %q; want key %q", n, ok, key, r.Key)
		}
	}
	if len(markers) != 3 {
		t.Errorf("%d markers, want 3", len(markers))
	}

	var left []*deadLetter
	h.json(&left, "dlq", "list")
	if names := s.names(left); !slices.Equal(names, []string{"b1", "raw"}) {
		t.Errorf("dlq list after the redrive: %v, want b1 and raw", names)
	}

	// Again with the same filters: nothing new.
	sum = redriveSummary{}
	h.json(&sum, "dlq", "redrive", "--subscription", "sub_a", "--rate", "1000")
	if sum.Redriven != 0 || sum.AlreadyRedriven != 2 || len(sum.DeadLetters) != 0 {
		t.Errorf("second redrive: %+v, want nothing redriven and 2 already redriven", sum)
	}
	if n := len(h.deliveries()); n != 2 {
		t.Errorf("%d deliveries after the second redrive, want still 2", n)
	}

	// Everything else: b1 only; b2 was redriven before, raw has no delivery.
	text = h.okLong("dlq", "redrive", "--rate", "1000")
	if text != "redriven 1, skipped already-redriven 3, skipped undecodable 1\n" {
		t.Errorf("redrive text: %q", text)
	}
	got = h.deliveries()
	if len(got) != 3 || got["evt_b1"] == nil {
		t.Errorf("deliveries after redriving the rest: %d, want 3 with evt_b1", len(got))
	}
}

// A redrive that died inside a transaction leaves it open; the next redrive
// aborts it at once (same transactional id), so what it commits is readable
// by read-committed consumers without waiting out the transaction timeout.
func TestDLQRedriveAfterAbandonedTransaction(t *testing.T) {
	h := newHarness(t, true)
	s := seedDLQ(h)
	a1 := s.recs["a1"]
	dead, err := kgo.NewClient(kgo.SeedBrokers(h.brokers), kgo.RecordPartitioner(topics.Partitioner()),
		kgo.TransactionalID("webhookctl-redrive-"+h.names.DLQ()), kgo.TransactionTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dead.Close)
	if err := dead.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	d := *s.dls["a1"].Delivery
	d.Attempt = 1
	marker := topics.DeadLetter{Redriven: &topics.Source{Topic: h.names.DLQ(), Partition: a1.Partition, Offset: a1.Offset}, Reason: redriveReason}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := dead.ProduceSync(ctx,
		&kgo.Record{Topic: h.names.Deliveries(), Key: a1.Key, Value: d.Encode()},
		&kgo.Record{Topic: h.names.DLQ(), Key: a1.Key, Value: marker.Encode()},
	).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var sum redriveSummary
	h.json(&sum, "dlq", "redrive", "--subscription", "sub_a", "--rate", "1000")
	if sum.Redriven != 2 {
		t.Errorf("redrive after an abandoned transaction: %+v, want a1 and a2 redriven", sum)
	}
	var left []*deadLetter
	h.json(&left, "dlq", "list", "--subscription", "sub_a")
	if len(left) != 0 {
		t.Errorf("dlq list after the redrive: %v, want nothing left of sub_a", s.names(left))
	}
	if got := h.deliveries(); len(got) != 2 {
		t.Errorf("%d deliveries, want 2 (the abandoned transaction's one aborted)", len(got))
	}
}
