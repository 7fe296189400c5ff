package deliverer

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// keyed is the delivery of the seq-th event of an ordering key: its id
// "<key>-<seq>", its data {"key", "seq"}.
func keyed(sub, key string, seq int) topics.Delivery {
	d := newDelivery(sub, fmt.Sprintf("%s-%d", key, seq))
	d.Key, d.Data = key, fmt.Appendf(nil, `{"key":%q,"seq":%d}`, key, seq)
	return d
}

// keySeq is one event of a request: its key and place in the key's order.
type keySeq struct {
	Key string `json:"key"`
	Seq int    `json:"seq"`
}

// keySeqs are the events a batch request carries, in its body's order.
func keySeqs(tb testing.TB, r received) []keySeq {
	tb.Helper()
	batchIDs(tb, r) // an array of events, listed in webhook-batch
	var events []struct {
		Data keySeq `json:"data"`
	}
	if err := json.Unmarshal(r.body, &events); err != nil {
		tb.Fatalf("batch body %s: %v", r.body, err)
	}
	out := make([]keySeq, len(events))
	for i, e := range events {
		out[i] = e.Data
	}
	return out
}

// checkKeyOrder fails the test unless, over the requests in the order the
// endpoint saw them, each key's events come in publish order with a failed
// one only ever followed by itself again (nothing overtakes it), and each
// of the keys' perKey events succeeded once, in order. ok tells whether
// the endpoint took a request.
func checkKeyOrder(tb testing.TB, reqs []received, ok func(i int) bool, keys []string, perKey int) {
	tb.Helper()
	sent, delivered := map[string][]int{}, map[string][]int{}
	for i, r := range reqs {
		for _, e := range keySeqs(tb, r) {
			sent[e.Key] = append(sent[e.Key], e.Seq)
			if ok(i) {
				delivered[e.Key] = append(delivered[e.Key], e.Seq)
			}
		}
	}
	want := make([]int, perKey)
	for i := range want {
		want[i] = i
	}
	for _, k := range keys {
		if !slices.IsSorted(sent[k]) {
			tb.Errorf("key %s sent in the order %v: a later event overtook a failed one", k, sent[k])
		}
		if !slices.Equal(delivered[k], want) {
			tb.Errorf("key %s delivered %v, want %v once each", k, delivered[k], want)
		}
	}
}

// parkedCount is how many attempt records say a delivery was parked
// behind its held key.
func parkedCount(as []topics.Attempt) int {
	n := 0
	for _, a := range as {
		if a.Outcome == topics.OutcomeBlocked && a.FailureCategory == topics.FailureKeyHeld {
			n++
		}
	}
	return n
}

// orderedBatchRun publishes perKey events of each of keys to an ordered
// subscription that batches up to len(keys) events, against an endpoint
// that fails its first fails requests with a 500 and takes the others,
// and returns the harness and the endpoint once the first request failed
// and the keys' later events were parked behind it, with the batch's
// retries waiting in the 1s tier.
func orderedBatchRun(t *testing.T, keys []string, perKey, fails int, schedule []string) (*harness, *receiver, topics.Subscription, []*kgo.Record) {
	t.Helper()
	h := newHarness(t, nil)
	var calls atomic.Int32
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if calls.Add(1) <= int32(fails) {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	sub := batchSub(t, "sub_ordered_batch", rc.url(), len(keys), 50*time.Millisecond)
	sub.Ordering, sub.RetrySchedule = topics.OrderingKey, schedule
	h.putSub(sub)
	var recs []*kgo.Record
	for seq := range perKey {
		for _, k := range keys {
			recs = append(recs, h.deliveryRecord(keyed(sub.ID, k, seq), k))
		}
	}
	h.produce(recs...) // one subscription, one partition: fetched together
	h.start(nil)
	waitFor(t, 20*time.Second, "the first batch", func() bool { return rc.count() > 0 })
	first := keySeqs(t, rc.all()[0])
	if len(first) != len(keys) {
		t.Fatalf("the first batch carries %v, want the head of each of the %d keys", first, len(keys))
	}
	var retries []*kgo.Record
	waitFor(t, 20*time.Second, "the batch's retries", func() bool {
		retries = h.records(h.names.Retry(time.Second))
		return len(retries) == len(keys)
	})
	waitFor(t, 20*time.Second, "the keys' later events parked", func() bool {
		return parkedCount(h.attempts()) == len(keys)*(perKey-1)
	})
	if n := rc.count(); n != 1 {
		t.Fatalf("%d requests while every key was held, want the failed batch's one", n)
	}
	return h, rc, sub, retries
}

// releaseMarked is the retrier's release of a tier record: to the
// redeliveries topic, keeping the batch's mark.
func (h *harness) releaseMarked(rs []*kgo.Record) {
	h.t.Helper()
	var out []*kgo.Record
	for _, r := range rs {
		id, n, ok := topics.BatchOf(r.Headers)
		if !ok {
			h.t.Fatalf("tier record %s without the batch's mark", r.Value)
		}
		out = append(out, &kgo.Record{Topic: h.names.Redeliveries(), Key: r.Key, Value: r.Value,
			Headers: []kgo.RecordHeader{topics.BatchHeader(id, n)}})
	}
	h.produce(out...)
}

// TestOrderedBatchRetriedKeepsKeyOrder (invariant 4): a batch of an
// ordered subscription that fails holds every key it carries: the keys'
// later events are parked, not sent; retried as the same batch (the same
// webhook-id) it succeeds, and each key's parked events follow, in order,
// none overtaking the failed one.
func TestOrderedBatchRetriedKeepsKeyOrder(t *testing.T) {
	keys := []string{"A", "B", "C", "D"}
	const perKey = 3
	h, rc, _, retries := orderedBatchRun(t, keys, perKey, 1, []string{"1s", "1s"})
	for _, r := range retries {
		d, _ := topics.DecodeDelivery(r.Value)
		if id, _, _ := topics.BatchOf(r.Headers); id != rc.all()[0].id() || d.Attempt != 2 {
			t.Fatalf("retry %s: batch %q, attempt %d; want the failed batch's mark and attempt 2", r.Value, id, d.Attempt)
		}
	}
	h.releaseMarked(retries)
	waitFor(t, 20*time.Second, "every event delivered", func() bool {
		n := 0
		for _, a := range h.attempts() {
			if a.Outcome == topics.OutcomeSuccess {
				n++
			}
		}
		return n == len(keys)*perKey
	})
	reqs := rc.all()
	if reqs[1].id() != reqs[0].id() {
		t.Errorf("retried as %s, want the failed batch %s again", reqs[1].id(), reqs[0].id())
	}
	checkKeyOrder(t, reqs, func(i int) bool { return i > 0 }, keys, perKey)
	if n := len(h.records(h.names.DLQ())); n != 0 {
		t.Fatalf("%d dead letters, want none", n)
	}
}

// TestOrderedBatchDeadReleasesKeys (invariant 4): an ordered batch that
// fails again with its schedule exhausted dead-letters each of its events
// and releases each key, as a single dead head does: the parked events
// follow, in order.
func TestOrderedBatchDeadReleasesKeys(t *testing.T) {
	keys := []string{"A", "B", "C"}
	const perKey = 3
	h, rc, _, retries := orderedBatchRun(t, keys, perKey, 2, []string{"1s"})
	h.releaseMarked(retries)
	for _, k := range keys {
		dl, err := topics.DecodeDeadLetter(h.waitRecord(h.names.DLQ(), k+"-0").Value)
		if err != nil || dl.FailureCategory != topics.FailureExhausted || dl.Attempts != 2 {
			t.Fatalf("dead letter of %s-0: %+v, %v; want exhausted after 2 attempts", k, dl, err)
		}
	}
	waitFor(t, 20*time.Second, "the parked events delivered", func() bool {
		n := 0
		for _, a := range h.attempts() {
			if a.Outcome == topics.OutcomeSuccess {
				n++
			}
		}
		return n == len(keys)*(perKey-1)
	})
	reqs := rc.all()
	batch := reqs[0].id()
	for _, k := range keys {
		var outcomes []string
		for _, a := range h.attemptsOf(k + "-0") {
			if a.BatchID != batch {
				t.Errorf("attempt record %+v does not name the batch %s", a, batch)
			}
			outcomes = append(outcomes, a.Outcome)
		}
		if !slices.Equal(outcomes, []string{topics.OutcomeRetry, topics.OutcomeDead}) {
			t.Errorf("%s-0: outcomes %v, want retry then dead", k, outcomes)
		}
	}
	// The dead heads count as neither sent last nor delivered: what
	// follows them is each key's seq 1 and 2, in order.
	sent := map[string][]int{}
	for _, r := range reqs {
		for _, e := range keySeqs(t, r) {
			sent[e.Key] = append(sent[e.Key], e.Seq)
		}
	}
	for _, k := range keys {
		if !slices.Equal(sent[k], []int{0, 0, 1, 2}) {
			t.Errorf("key %s sent %v, want its head twice (dead), then 1, 2", k, sent[k])
		}
	}
}

// TestOrderedBatchChargesTheQuotaPerEvent (invariant 5): a batch is one
// request against its subscription's rate limit, and as many deliveries
// as it carries against its tenant's quota. Batches of 10 to a
// subscription limited to 5 requests a second all go; a tenant with a
// quota of 10 a second gets its first batch of 10 through and the
// following ones throttled (tenant_quota), delayed, not dropped.
func TestOrderedBatchChargesTheQuotaPerEvent(t *testing.T) {
	url, prefix := redistest.Shared(t)
	h := newHarness(t, protectEnv(url, prefix, map[string]string{"WEBHOOKS_TENANT_RATE": "10"}))
	rc := newReceiver(t, nil)
	limited := batchSub(t, "sub_limited", rc.url(), 10, 50*time.Millisecond)
	limited.RateLimitPerS, limited.Ordering = 5, topics.OrderingKey
	quoted := batchSub(t, "sub_quoted", rc.url(), 10, 50*time.Millisecond)
	h.putSub(limited)
	h.putSub(quoted)
	var ds []topics.Delivery
	for i := range 20 {
		ds = append(ds, keyed(limited.ID, fmt.Sprintf("L%02d", i), 0))
		d := newDelivery(quoted.ID, fmt.Sprintf("Q%02d", i))
		d.Tenant = "acme"
		ds = append(ds, d)
	}
	var recs []*kgo.Record
	for _, d := range ds {
		recs = append(recs, h.deliveryRecord(d, d.Key))
	}
	h.produce(recs...)
	h.start(nil)
	h.waitOutcomes(len(ds), 30*time.Second)
	throttled := map[string]int{}
	for _, a := range h.attempts() {
		switch a.Outcome {
		case topics.OutcomeSuccess:
		case topics.OutcomeThrottled:
			throttled[a.SubscriptionID]++
			if a.FailureCategory != topics.FailureTenantQuota || a.BatchID == "" || a.Attempt != 1 {
				t.Errorf("throttled attempt record %+v, want a batch's, tenant_quota, attempt 1", a)
			}
		default:
			t.Errorf("%s: outcome %s, want success or throttled", a.EventID, a.Outcome)
		}
	}
	if throttled[limited.ID] != 0 {
		t.Errorf("%d of the rate-limited subscription's events throttled: its batches counted more than a request each", throttled[limited.ID])
	}
	if throttled[quoted.ID] < 10 {
		t.Errorf("%d of the tenant's 20 events throttled, want at least the 10 past its quota: a batch charged less than its events",
			throttled[quoted.ID])
	}
}

// TestVirtualOrderedBatchesKeepKeyOrder (invariant 4): many keys of an
// ordered subscription spread over three partitions, batched, against an
// endpoint failing about a third of its requests at random, over the
// retry tiers and a stand-in retrier in virtual time: every key's events
// are delivered once each in publish order, and no event of a key is sent
// while an earlier one of it waits for a retry.
func TestVirtualOrderedBatchesKeepKeyOrder(t *testing.T) {
	t.Parallel()
	defer testkit.Watchdog(t, 5*time.Minute)()
	const nkeys, perKey, seed = 24, 8, 27
	synctest.Test(t, func(t *testing.T) {
		var vn kfake.VirtualNetwork
		b := newBubbleEnv(t, &vn)
		// Whether the endpoint takes its nth request: a third fail, the
		// first 200 requests at most, so that no schedule is exhausted.
		took := func(n int) bool { return n > 200 || rand.New(rand.NewPCG(seed, uint64(n))).IntN(3) > 0 }
		ep := &memEndpoint{status: func(n int) int {
			if took(n) {
				return http.StatusOK
			}
			return http.StatusServiceUnavailable
		}}
		sub := batchSub(t, "sub_virtual_batches", "https://receiver.example/hooks", 8, 200*time.Millisecond)
		sub.Ordering, sub.Partitions = topics.OrderingKey, 3
		sub.RetrySchedule = []string{"5s", "5s", "5s", "5s", "5s", "5s", "5s", "5s", "5s", "5s"}
		b.putSub(sub)
		b.fakeRetrier()
		b.startDeliverer(ep)
		var keys []string
		for k := range nkeys {
			keys = append(keys, fmt.Sprintf("K%02d", k))
		}
		// Published in rounds, a key's events a little apart, so that
		// they meet their key held, released or free.
		rng := rand.New(rand.NewPCG(seed, 0))
		for seq := range perKey {
			for _, k := range keys {
				d := keyed(sub.ID, k, seq)
				b.produce(&kgo.Record{Topic: b.names.Deliveries(), Key: []byte(topics.DeliveryKeyOf(sub.ID, sub.Partitions, k)),
					Value: d.Encode()})
			}
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		waitVirtual(t, time.Second, time.Hour, "every event delivered", func() bool {
			n := 0
			for _, a := range b.attempts() {
				if a.Outcome == topics.OutcomeSuccess {
					n++
				}
			}
			return n >= nkeys*perKey
		})
		reqs := ep.all()
		checkKeyOrder(t, reqs, func(i int) bool { return took(i + 1) }, keys, perKey)
		if parked := parkedCount(b.attempts()); parked == 0 {
			t.Errorf("no event parked behind a held key: the failures did not test the holds")
		}
		if n := len(b.records(b.names.DLQ())); n != 0 {
			t.Errorf("%d dead letters, want none", n)
		}
		failed := 0
		for i := range reqs {
			if !took(i + 1) {
				failed++
			}
		}
		t.Logf("%d requests for %d events, %d failed", len(reqs), nkeys*perKey, failed)
	})
}
