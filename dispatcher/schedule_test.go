package dispatcher

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// TestScheduledDispatch: an event whose deliver_at is ahead has its
// deliveries written to the retry tier of the time left, carrying
// deliver_at, each with an attempt record of outcome scheduled; one whose
// deliver_at passed while it waited in a backlog is delivered at once;
// deliver_at is judged against the record's timestamp, and one more than 7
// days after it, or before it beyond the skew, or not RFC 3339, sends the
// event to the dlq as invalid, naming deliver_at.
func TestScheduledDispatch(t *testing.T) {
	h := newHarness(t, 3)
	h.sub(topics.Subscription{ID: "plain", EventTypes: []string{"*"}, Enabled: true})
	run := h.start(h.config("scheduled"))
	n := h.names()
	now := time.Now().UTC()
	published := now.Add(-time.Hour) // the record's timestamp: a backlog of an hour
	later := now.Add(3 * 24 * time.Hour)
	rec := func(id, deliverAt string, ts time.Time) *kgo.Record {
		return &kgo.Record{Topic: n.Events(), Timestamp: ts,
			Value: event(t, topics.Event{ID: id, Type: "t", DeliverAt: deliverAt}, `{}`)}
	}
	events := []*kgo.Record{
		rec("e_later", later.Format(time.RFC3339Nano), now),
		rec("e_passed", now.Add(-30*time.Minute).Format(time.RFC3339), published),
		rec("e_too_far", published.Add(7*24*time.Hour+time.Second).Format(time.RFC3339), published),
		rec("e_past", published.Add(-topics.DispatchSkew-time.Second).Format(time.RFC3339), published),
		rec("e_bad", "in an hour", now),
	}
	h.produce(events...)
	h.waitDispatched(events)

	tier := n.Retry(10 * time.Hour)
	waits := h.deliveriesIn(tier)
	if len(waits) != 1 || waits[0].EventID != "e_later" {
		t.Fatalf("%s holds %+v, want e_later's delivery", tier, waits)
	}
	want := topics.DueAt(later, 0)
	if d := waits[0].Delivery; !d.DeliverAt.Equal(want) || d.Attempt != 1 || d.NotBefore.After(now.Add(10*time.Hour+time.Minute)) {
		t.Fatalf("scheduled delivery: deliver_at %v (want %v), not_before %v, attempt %d", d.DeliverAt, want, d.NotBefore, d.Attempt)
	}
	for _, r := range h.readAll(tier, true) {
		if at, ok := topics.DeliverAtOf(r); !ok || !at.Equal(want) {
			t.Fatalf("deliver_at header %v %v, want %v", at, ok, want)
		}
	}
	if got := h.deliveries(); len(got) != 1 || got[0].EventID != "e_passed" {
		t.Fatalf("deliveries holds %+v, want e_passed's delivery only", got)
	}

	var scheduled []topics.Attempt
	for _, r := range h.readAll(n.Attempts(), true) {
		a, err := topics.DecodeAttempt(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		scheduled = append(scheduled, a)
	}
	if len(scheduled) != 1 || scheduled[0].EventID != "e_later" || scheduled[0].Outcome != topics.OutcomeScheduled ||
		!scheduled[0].NextAttemptAt.Equal(want) || scheduled[0].SubscriptionID != "plain" || scheduled[0].Attempt != 1 {
		t.Fatalf("attempt records %+v, want e_later's scheduled one", scheduled)
	}

	var dead []string
	for _, r := range h.readAll(n.DLQ(), true) {
		dl, err := topics.DecodeDeadLetter(r.Value)
		if err != nil {
			t.Fatal(err)
		}
		ev, _ := topics.DecodeEvent(dl.RawEvent, 0)
		if dl.FailureCategory != topics.FailureInvalid || !strings.Contains(dl.Reason, "deliver_at") {
			t.Errorf("dead letter %s: %s %q", ev.ID, dl.FailureCategory, dl.Reason)
		}
		dead = append(dead, ev.ID+": "+dl.Reason)
	}
	slices.Sort(dead)
	if len(dead) != 3 || !strings.HasPrefix(dead[0], "e_bad") || !strings.Contains(dead[1], "in the past") || !strings.Contains(dead[2], "more than 7 days") {
		t.Fatalf("dead letters %q, want e_bad, e_past and e_too_far", dead)
	}
	if err := run.Stop(t); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}
