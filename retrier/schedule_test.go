package retrier

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// scheduledWait is a scheduled delivery's wait as the dispatcher or a hop
// writes it (topics.Names.Wait) when it was written a tier before due: it
// is due then.
func (h *harness) scheduledWait(sub, event string, due, deliverAt time.Time) *kgo.Record {
	h.t.Helper()
	d := topics.Delivery{SubscriptionID: sub, EventID: event, EventType: "order.created", Tenant: "acme",
		Timestamp: "2026-11-22T10:00:00Z", Data: []byte(`{"n":"` + event + `"}`), Attempt: 1,
		PublishedAt: time.Now().UTC(), DeliverAt: topics.DueAt(deliverAt, 0).UTC()}
	tier, _ := h.names.Hop(due, d.DeliverAt)
	return h.names.Wait([]byte(sub+"/"+event), &d, due.Add(-tier))
}

// tierRecords reads a tier topic (or any) from the start to its end now.
func (h *harness) tierRecords(topic string) []*kgo.Record {
	h.t.Helper()
	ends, err := h.adm.ListEndOffsets(testCtx(h.t, 10*time.Second), topic)
	if err != nil || ends.Error() != nil {
		h.t.Fatalf("list end offsets: %v, %v", err, ends.Error())
	}
	cl := h.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { want[o.Partition] = o.Offset })
	next := map[int32]int64{}
	var out []*kgo.Record
	ctx := testCtx(h.t, 10*time.Second)
	for done := false; !done; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			h.t.Fatalf("reading %s to its end %v: got to %v", topic, want, next)
		}
		fs.EachRecord(func(r *kgo.Record) { out, next[r.Partition] = append(out, r), r.Offset+1 })
		done = true
		for p, end := range want {
			done = done && next[p] >= end
		}
	}
	return out
}

// TestScheduledHopsAndIsNeverEarly: the end of a scheduled delivery's wait
// whose deliver_at is 3 days ahead is released into its next wait (the
// longest tier, due one tier later, its deliver_at unchanged), not to
// redeliveries, and the partition's watermark passes it; one whose
// deliver_at is near waits for it and then goes to redeliveries, never
// before; one whose event was cancelled (by its tenant) becomes an attempt
// record, skipped and cancelled, and goes nowhere else.
func TestScheduledHopsAndIsNeverEarly(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil, nil)
	h.tail()
	cfg := h.config()
	h.start(cfg)
	h.warmUp("sub")

	now := time.Now()
	c := topics.Cancellation{EventID: "evt_cancelled", Tenant: "acme", CancelledAt: now.UTC()}
	h.produce(&kgo.Record{Topic: h.names.Cancellations(), Key: []byte(c.Key()), Value: c.Encode()})
	// Another tenant's cancellation of an event of the same id cancels
	// nothing of acme's.
	other := topics.Cancellation{EventID: "evt_near", Tenant: "other", CancelledAt: now.UTC()}
	h.produce(&kgo.Record{Topic: h.names.Cancellations(), Key: []byte(other.Key()), Value: other.Encode()})

	far := h.scheduledWait("sub", "evt_far", now, now.Add(3*24*time.Hour))
	nearAt := now.Add(1500 * time.Millisecond)
	near := h.scheduledWait("sub", "evt_near", nearAt, nearAt)
	cancelled := h.scheduledWait("sub", "evt_cancelled", now, now.Add(3*24*time.Hour))
	h.produce(far, near, cancelled)

	got := h.waitReceived(15*time.Second, near)
	if got.at.Before(nearAt.Truncate(time.Millisecond)) || got.rec.Timestamp.Before(nearAt.Truncate(time.Millisecond)) {
		t.Fatalf("evt_near released at %v (read %v), before its deliver_at %v", got.rec.Timestamp, got.at, nearAt)
	}
	// Everything fetched with it was forwarded, and committed, by now.
	waitFor(t, 10*time.Second, "the tier's watermark past the scheduled waits", func() bool {
		return h.committed(cfg.Group)[far.Topic][far.Partition] > far.Offset &&
			h.committed(cfg.Group)[cancelled.Topic][cancelled.Partition] > cancelled.Offset
	})
	h.drain()
	for _, r := range h.all() {
		if string(r.rec.Value) == string(far.Value) || string(r.rec.Value) == string(cancelled.Value) {
			t.Fatalf("released %s to redeliveries before its deliver_at", r.rec.Value)
		}
	}

	longest := h.names.Retry(time.Minute)
	var hops []topics.Delivery
	for _, r := range h.tierRecords(longest) {
		if string(r.Value) == string(far.Value) || string(r.Value) == string(cancelled.Value) {
			continue // written by the test
		}
		d, err := topics.DecodeDelivery(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		at, ok := topics.DeliverAtOf(r)
		nb, _ := topics.NotBeforeOf(r)
		if !ok || !at.Equal(d.DeliverAt) || !nb.Equal(d.NotBefore) {
			t.Fatalf("hop of %s: headers deliver_at %v, not-before %v; value %v, %v", d.EventID, at, nb, d.DeliverAt, d.NotBefore)
		}
		hops = append(hops, d)
	}
	if len(hops) != 1 || hops[0].EventID != "evt_far" {
		t.Fatalf("%s holds %+v, want evt_far's next wait", longest, hops)
	}
	if hop := hops[0]; !hop.DeliverAt.Equal(topics.DueAt(now.Add(3*24*time.Hour), 0)) ||
		hop.NotBefore.Before(now.Add(time.Minute)) || hop.NotBefore.After(time.Now().Add(time.Minute)) {
		t.Fatalf("evt_far's next wait: not_before %v, deliver_at %v; want one minute after %v", hop.NotBefore, hop.DeliverAt, now)
	}

	var attempts []topics.Attempt
	for _, r := range h.tierRecords(h.names.Attempts()) {
		a, err := topics.DecodeAttempt(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		attempts = append(attempts, a)
	}
	if len(attempts) != 1 || attempts[0].EventID != "evt_cancelled" || attempts[0].Outcome != topics.OutcomeSkipped ||
		attempts[0].FailureCategory != topics.FailureCancelled || attempts[0].Attempt != 1 || attempts[0].SubscriptionID != "sub" {
		t.Fatalf("attempt records %+v, want evt_cancelled's, skipped and cancelled", attempts)
	}
}
