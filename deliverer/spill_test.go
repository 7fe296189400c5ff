package deliverer

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/ops"
	"github.com/hookpipe/hookpipe/topics"
)

// TestSpillComesBackWhenWorkedOff: a spilled delivery comes back when its
// subscription should have worked off what it held, at least the shortest
// retry delay and at most maxSpillDelay later, in the tier for that delay,
// with its attempt number unchanged. Sent back after the shortest delay
// every time, a hanging endpoint's backlog circles through the retry path
// every few seconds, at the expense of healthy subscriptions.
func TestSpillComesBackWhenWorkedOff(t *testing.T) {
	names, err := topics.NewNames("", "5s,5m,30m,2h")
	if err != nil {
		t.Fatal(err)
	}
	d := &deliverer{names: names, m: newMetrics(ops.NewRegistry(), names)}
	for _, tc := range []struct {
		wait, delay, tier time.Duration
	}{
		{0, 5 * time.Second, 5 * time.Second},
		{2 * time.Second, 5 * time.Second, 5 * time.Second},
		{40 * time.Second, 40 * time.Second, 5 * time.Second},
		{7 * time.Minute, 7 * time.Minute, 5 * time.Minute},
		{5 * time.Hour, maxSpillDelay, 30 * time.Minute},
	} {
		del := newDelivery("sub_a", "evt_1")
		del.Attempt = 2
		before := time.Now()
		recs := d.spill(context.Background(), &kgo.Record{Key: []byte("sub_a/k")}, &del, tc.wait)
		after := time.Now()
		if len(recs) != 2 {
			t.Fatalf("wait %v: %d records, want an attempt and a retry", tc.wait, len(recs))
		}
		att, err := topics.DecodeAttempt(recs[0].Value)
		if err != nil || att.Outcome != topics.OutcomeBlocked || att.FailureCategory != topics.FailureBusy {
			t.Fatalf("wait %v: attempt %+v (%v), want blocked, subscription_busy", tc.wait, att, err)
		}
		retry := recs[1]
		if want := names.Retry(tc.tier); retry.Topic != want {
			t.Errorf("wait %v: spilled to %s, want %s", tc.wait, retry.Topic, want)
		}
		next, err := topics.DecodeDelivery(retry.Value)
		if err != nil {
			t.Fatal(err)
		}
		if next.Attempt != 2 {
			t.Errorf("wait %v: attempt %d after the spill, want 2 (a spill uses up nothing)", tc.wait, next.Attempt)
		}
		lo, hi := before.Add(tc.delay).Truncate(time.Millisecond), after.Add(tc.delay).Add(time.Millisecond)
		if next.NotBefore.Before(lo) || next.NotBefore.After(hi) {
			t.Errorf("wait %v: not before %v, want within [%v, %v]", tc.wait, next.NotBefore, lo, hi)
		}
		if nb, ok := topics.NotBeforeOf(retry); !ok || !nb.Equal(next.NotBefore.Truncate(time.Millisecond)) {
			t.Errorf("wait %v: header not before %v (%v), want %v", tc.wait, nb, ok, next.NotBefore)
		}
	}
}

// TestBurstDoesNotSpill: a burst to one fast endpoint, many times what the
// subscription may hold, is delivered in full with nothing spilled (a burst
// is not slowness): the subscription's partition is paused while it holds
// half the buffer, and a subscription on another partition is served
// meanwhile.
func TestBurstDoesNotSpill(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	rc := newReceiver(t, nil)
	// Two subscriptions on different partitions of the three.
	burst, other := "sub_burst", ""
	part := func(id string) int {
		return topics.Partitioner().ForTopic("").Partition(&kgo.Record{Key: []byte(id + "/k")}, 3)
	}
	for i := range 100 {
		if id := fmt.Sprintf("sub_other%d", i); part(id) != part(burst) {
			other = id
			break
		}
	}
	h.putSub(newSub(t, burst, rc.url()))
	h.putSub(newSub(t, other, rc.url()))
	var ds []topics.Delivery
	for _, id := range ids("evt_burst", 400) {
		ds = append(ds, newDelivery(burst, id))
	}
	h.deliver(ds...)
	h.start(map[string]string{
		"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT":               "4",
		"WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION":        "4",
		"WEBHOOKS_DELIVERER_MAX_BUFFERED":                "40",
		"WEBHOOKS_DELIVERER_MAX_QUEUED_PER_SUBSCRIPTION": "8",
	})
	waitFor(t, 30*time.Second, "the burst under way", func() bool { return rc.count() > 0 })
	h.deliver(newDelivery(other, "evt_other"))
	waitFor(t, 60*time.Second, "every delivery", func() bool { return len(rc.perID()) == len(ds)+1 })
	for id, n := range rc.perID() {
		if n != 1 {
			t.Fatalf("%s delivered %d times", id, n)
		}
	}
	for _, a := range h.attempts() {
		if a.Outcome != topics.OutcomeSuccess {
			t.Fatalf("%s: %s / %s, want every delivery attempted once and delivered", a.EventID, a.Outcome, a.FailureCategory)
		}
	}
}
