package deliverer

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/send"
	"github.com/hookpipe/hookpipe/topics"
)

// batchIDs are the event ids a batch request carries, as its body lists
// them; it fails the test unless the body is an array of events and the
// webhook-batch header lists the same ids.
func batchIDs(tb testing.TB, r received) []string {
	tb.Helper()
	var events []struct {
		ID   string          `json:"id"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.body, &events); err != nil {
		tb.Fatalf("batch body %s: not an array of events: %v", r.body, err)
	}
	var out []string
	for _, e := range events {
		out = append(out, e.ID)
	}
	if got := r.header.Get(send.HeaderBatch); got != strings.Join(out, " ") {
		tb.Fatalf("%s %q, want the body's ids %q", send.HeaderBatch, got, out)
	}
	return out
}

// sorted returns a sorted copy.
func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// batchSub is a subscription that batches up to n events, waiting wait.
func batchSub(tb testing.TB, id, url string, n int, wait time.Duration) topics.Subscription {
	s := newSub(tb, id, url)
	s.Batch = &topics.Batch{MaxEvents: n, MaxWaitMS: int(wait.Milliseconds())}
	return s
}

// TestBatchIsOneSignedRequest: a batch of N events arrives as one request
// whose body is the array of their bodies, signed as a whole by the
// Standard Webhooks rule, its webhook-id the batch id; every event gets an
// attempt record naming the batch, and every record is committed.
func TestBatchIsOneSignedRequest(t *testing.T) {
	h := newHarness(t, nil)
	rc := newReceiver(t, nil)
	sub := batchSub(t, "sub_batch", rc.url(), 5, time.Minute)
	h.putSub(sub)
	events := ids("evt_b", 5)
	var ds []topics.Delivery
	for _, id := range events {
		ds = append(ds, newDelivery(sub.ID, id))
	}
	h.deliver(ds...)
	h.start(nil)
	waitFor(t, 20*time.Second, "the batch's attempt records", func() bool { return len(h.attempts()) == 5 })
	reqs := rc.all()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want the batch's one", len(reqs))
	}
	got := batchIDs(t, reqs[0])
	if !slices.Equal(sorted(got), events) {
		t.Fatalf("batch carries %v, want %v", got, events)
	}
	verify(t, reqs[0].header, reqs[0].body, sub.Secret)
	if id := reqs[0].id(); id != topics.BatchID(events) {
		t.Fatalf("webhook-id %q, want the batch id %q", id, topics.BatchID(events))
	}
	for _, a := range h.attempts() {
		if a.Outcome != topics.OutcomeSuccess || a.BatchID != reqs[0].id() || a.HTTPStatus != 200 || a.Attempt != 1 {
			t.Errorf("attempt record %+v, want a success naming the batch", a)
		}
	}
	ends := h.ends(h.names.Deliveries())
	waitFor(t, 20*time.Second, "the batch's records committed", func() bool { return reached(h.committed(), ends) })
}

// TestBatchWaitSendsAPartialBatch: fewer events than a batch takes are
// sent once the first has waited max_wait_ms.
func TestBatchWaitSendsAPartialBatch(t *testing.T) {
	h := newHarness(t, nil)
	rc := newReceiver(t, nil)
	sub := batchSub(t, "sub_partial", rc.url(), 100, 50*time.Millisecond)
	h.putSub(sub)
	h.deliver(newDelivery(sub.ID, "evt_p1"), newDelivery(sub.ID, "evt_p2"))
	h.start(nil)
	waitFor(t, 20*time.Second, "a request", func() bool { return rc.count() > 0 })
	var got []string
	for _, r := range rc.all() {
		got = append(got, batchIDs(t, r)...)
	}
	waitFor(t, 20*time.Second, "both events sent", func() bool {
		got = nil
		for _, r := range rc.all() {
			got = append(got, batchIDs(t, r)...)
		}
		return len(got) == 2
	})
	if !slices.Equal(sorted(got), []string{"evt_p1", "evt_p2"}) {
		t.Fatalf("sent %v", got)
	}
}

// TestBatchRetriedAsABatch: a 500 sends every event of the batch to the
// same retry tier, due at the same time, marked as the batch's; released,
// they come back together, ahead of an unmarked redelivery that waits for
// a batch of its own, and are sent again as the same batch, with the same
// webhook-id.
func TestBatchRetriedAsABatch(t *testing.T) {
	h := newHarness(t, nil)
	var calls atomic.Int32
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	sub := batchSub(t, "sub_retry", rc.url(), 3, time.Minute)
	sub.RetrySchedule = []string{"1s", "1s"}
	h.putSub(sub)
	events := ids("evt_r", 4)
	var ds []topics.Delivery
	for _, id := range events[:3] {
		ds = append(ds, newDelivery(sub.ID, id))
	}
	h.deliver(ds...)
	h.start(nil)
	var retries []*kgo.Record
	waitFor(t, 20*time.Second, "the batch's retries", func() bool {
		retries = h.records(h.names.Retry(time.Second))
		return len(retries) == 3
	})
	first := rc.all()[0].id()
	for _, r := range retries {
		id, n, ok := topics.BatchOf(r.Headers)
		due, _ := topics.NotBeforeOf(r)
		first, _ := topics.NotBeforeOf(retries[0])
		if !ok || id != rc.all()[0].id() || n != 3 || !due.Equal(first) {
			t.Fatalf("retry %s: batch %q of %d, due %v; want the batch's mark and one due time %v", r.Value, id, n, due, first)
		}
	}
	// The retrier releases them, keeping the mark, and an unmarked due
	// retry of the subscription lands among them.
	release := func(r *kgo.Record) *kgo.Record {
		id, n, _ := topics.BatchOf(r.Headers)
		return &kgo.Record{Topic: h.names.Redeliveries(), Key: r.Key, Value: r.Value,
			Headers: []kgo.RecordHeader{topics.BatchHeader(id, n)}}
	}
	unmarked := newDelivery(sub.ID, events[3])
	h.produce(release(retries[0]),
		&kgo.Record{Topic: h.names.Redeliveries(), Key: []byte(sub.ID + "/" + unmarked.EventID), Value: unmarked.Encode()},
		release(retries[1]), release(retries[2]))
	waitFor(t, 20*time.Second, "the batch sent again", func() bool { return rc.count() == 2 })
	again := rc.all()[1]
	if again.id() != first || !slices.Equal(sorted(batchIDs(t, again)), events[:3]) {
		t.Fatalf("sent again as %s with %v, want %s with %v", again.id(), batchIDs(t, again), first, events[:3])
	}
	verify(t, again.header, again.body, sub.Secret)
	waitFor(t, 20*time.Second, "the second attempt records", func() bool { return len(h.attempts()) == 6 })
	for _, id := range events[:3] {
		var got []string
		for _, a := range h.attemptsOf(id) {
			if a.BatchID != first {
				t.Errorf("attempt record %+v does not name the batch %s", a, first)
			}
			got = append(got, a.Outcome)
		}
		if !slices.Equal(got, []string{topics.OutcomeRetry, topics.OutcomeSuccess}) {
			t.Errorf("%s: outcomes %v, want retry then success", id, got)
		}
	}
}

// TestBatchGoneDeadLettersAll: a 410 dead-letters every event of the
// batch, each with an attempt record naming it, and disables the
// subscription.
func TestBatchGoneDeadLettersAll(t *testing.T) {
	h := newHarness(t, nil)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusGone) })
	sub := batchSub(t, "sub_gone", rc.url(), 3, time.Minute)
	h.putSub(sub)
	events := ids("evt_g", 3)
	h.deliver(newDelivery(sub.ID, events[0]), newDelivery(sub.ID, events[1]), newDelivery(sub.ID, events[2]))
	h.start(nil)
	for _, id := range events {
		h.waitRecord(h.names.DLQ(), id)
	}
	if rc.count() != 1 {
		t.Fatalf("%d requests, want the batch's one", rc.count())
	}
	batch := rc.all()[0].id()
	for _, r := range h.records(h.names.DLQ()) {
		dl, err := topics.DecodeDeadLetter(r.Value)
		if err != nil || dl.FailureCategory != topics.FailureGone || dl.HTTPStatus != 410 {
			t.Errorf("dead letter %s: %+v, %v", r.Value, dl, err)
		}
	}
	for _, id := range events {
		a := h.waitAttempt(id)
		if a.Outcome != topics.OutcomeDead || a.BatchID != batch {
			t.Errorf("attempt record %+v, want dead naming %s", a, batch)
		}
	}
	waitFor(t, 20*time.Second, "the subscription disabled", func() bool {
		for _, r := range slices.Backward(h.readAll(h.names.Subscriptions())) {
			if string(r.Key) == sub.ID {
				s, err := topics.DecodeSubscriptionWith(r.Value, testKeys(t))
				return err == nil && !s.Enabled
			}
		}
		return false
	})
}

// BenchmarkBatches delivers 10,000 events, produced once the deliverer is
// up, to one endpoint that takes 20 ms per request: one request per event
// against batches of 100 (waiting at most 50 ms), with the default
// in-flight cap per subscription (64), and batches of 100 of an ordered
// subscription, the events on 1,000 keys (ten each). It reports events
// delivered per second, from the first produced to the last received, and
// per request.
func BenchmarkBatches(b *testing.B) {
	const events, slow = 10_000, 20 * time.Millisecond
	for _, bc := range []struct {
		name    string
		batch   *topics.Batch
		ordered bool
	}{
		{"single", nil, false},
		{"batches-of-100", &topics.Batch{MaxEvents: 100, MaxWaitMS: 50}, false},
		{"ordered-batches-of-100", &topics.Batch{MaxEvents: 100, MaxWaitMS: 50}, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				// Tiers of 5s: a subscription spills past four of them of work held.
				h := newHarness(b, map[string]string{kafka.EnvRetryTiers: "5s,1m"})
				var delivered, requests atomic.Int64
				rc := newReceiver(b, func(_ http.ResponseWriter, r *http.Request, _ []byte) {
					n := int64(1)
					if ids := r.Header.Get(send.HeaderBatch); ids != "" {
						n = int64(strings.Count(ids, " ") + 1)
					}
					<-time.After(slow)
					requests.Add(1)
					delivered.Add(n)
				})
				sub := newSub(b, "sub_bench", rc.url())
				sub.Batch = bc.batch
				if bc.ordered {
					sub.Ordering = topics.OrderingKey
				}
				h.putSub(sub)
				h.start(nil)
				h.deliver(newDelivery(sub.ID, "evt_warm"))
				waitFor(b, time.Minute, "the deliverer up", func() bool { return delivered.Load() == 1 })
				delivered.Store(0)
				requests.Store(0)
				b.StartTimer()
				start := time.Now()
				var recs []*kgo.Record
				for i := range events {
					d := newDelivery(sub.ID, "evt_"+strconv.Itoa(i))
					if bc.ordered {
						d.Key = "k" + strconv.Itoa(i%1000)
					}
					recs = append(recs, h.deliveryRecord(d, d.Key))
					if len(recs) == 1000 {
						h.produce(recs...)
						recs = recs[:0]
					}
				}
				waitFor(b, 5*time.Minute, "every event delivered", func() bool { return delivered.Load() >= events })
				elapsed := time.Since(start)
				b.StopTimer()
				b.ReportMetric(float64(events)/elapsed.Seconds(), "deliveries/s")
				b.ReportMetric(float64(events)/float64(requests.Load()), "events/request")
			}
		})
	}
}
