package deliverer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/hookpipe/hookpipe/deliverer/internal/lanes"
	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/runtime/table"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestRequest checks the request an endpoint receives against the public
// contract: method, content type, the body byte for byte, the Standard
// Webhooks headers verified independently, the subscription's headers, and
// both signatures during a secret rotation, and no Accept-Encoding.
func TestRequest(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	rc := newReceiver(t, nil)

	plain := newSub(t, "sub_plain", rc.url())
	plain.Headers = map[string]string{"X-Team": "payments", "Authorization": "Bearer t0ken"}
	rotating := newSub(t, "sub_rotating", rc.url())
	rotating.PreviousSecret = newSub(t, "x", rc.url()).Secret
	rotating.PreviousSecretUntil = time.Now().Add(time.Hour)
	rotating.Headers = map[string]string{"user-agent": "acme-hooks/2"}
	rotated := newSub(t, "sub_rotated", rc.url())
	rotated.PreviousSecret = newSub(t, "x", rc.url()).Secret
	rotated.PreviousSecretUntil = time.Now().Add(-time.Minute) // grace period over
	for _, s := range []topics.Subscription{plain, rotating, rotated} {
		h.putSub(s)
	}

	// Data with odd whitespace and escapes must arrive untouched; the id
	// has characters the body must escape.
	const data = "{ \"b\" :[1, 2 ,3],\n\t\"a\":\"x\\u00e9\" , \"n\":1.50 }"
	d := newDelivery(plain.ID, `evt_"q"\1`)
	d.Data = []byte(data)
	d.EventType = "invoice.paid"
	d.Timestamp = "2026-11-22T10:00:00.5Z"
	dr := newDelivery(rotating.ID, "evt_rotating")
	dd := newDelivery(rotated.ID, "evt_rotated")
	h.start(nil)
	h.deliver(d, dr, dd)

	r := rc.waitRequest(t, d.EventID)
	if r.method != http.MethodPost {
		t.Fatalf("method = %s, want POST", r.method)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("content-type = %q, want application/json", ct)
	}
	wantBody := `{"id":` + jsonString(d.EventID) + `,"type":"invoice.paid","timestamp":"2026-11-22T10:00:00.5Z","data":` + data + `}`
	if string(r.body) != wantBody {
		t.Fatalf("body =\n%s\nwant\n%s", r.body, wantBody)
	}
	var parsed struct {
		ID   string          `json:"id"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(r.body, &parsed); err != nil || parsed.ID != d.EventID {
		t.Fatalf("body is not the JSON a receiver can read back: %v, id %q", err, parsed.ID)
	}
	if got := r.header.Get("webhook-id"); got != d.EventID {
		t.Fatalf("webhook-id = %q, want %q", got, d.EventID)
	}
	ts, err := strconv.ParseInt(r.header.Get("webhook-timestamp"), 10, 64)
	if err != nil {
		t.Fatalf("webhook-timestamp %q: %v", r.header.Get("webhook-timestamp"), err)
	}
	if skew := r.at.Unix() - ts; skew < -2 || skew > 2 {
		t.Fatalf("webhook-timestamp %d is %ds away from the time of the request", ts, skew)
	}
	verify(t, r.header, r.body, plain.Secret)
	if r.header.Get("X-Team") != "payments" || r.header.Get("Authorization") != "Bearer t0ken" {
		t.Fatalf("subscription headers missing: %v", r.header)
	}
	if ua := r.header.Values("User-Agent"); len(ua) != 1 || ua[0] != "hookpipe/1" {
		t.Fatalf("User-Agent %q, want hookpipe/1", ua)
	}
	if ae, ok := r.header["Accept-Encoding"]; ok { // only a sample of the answer is kept
		t.Fatalf("the request asks for a compressed answer: Accept-Encoding %q", ae)
	}

	r = rc.waitRequest(t, dr.EventID)
	verify(t, r.header, r.body, rotating.Secret, rotating.PreviousSecret)
	if ua := r.header.Values("User-Agent"); len(ua) != 1 || ua[0] != "acme-hooks/2" {
		t.Fatalf("User-Agent %q, want the subscription's alone", ua)
	}
	r = rc.waitRequest(t, dd.EventID)
	verify(t, r.header, r.body, rotated.Secret)
}

// TestOutcomes drives one deliverer through every kind of answer and checks
// what each produces on attempts, the retry tiers, dlq and subscriptions.
func TestOutcomes(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	status := func(code int, hdr ...string) func(http.ResponseWriter, *http.Request, []byte) {
		return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
			for i := 0; i+1 < len(hdr); i += 2 {
				w.Header().Set(hdr[i], hdr[i+1])
			}
			w.WriteHeader(code)
		}
	}
	elsewhere := newReceiver(t, nil)
	endpoints := map[string]*receiver{
		"sub_ok":        newReceiver(t, status(200)),
		"sub_500":       newReceiver(t, status(500)),
		"sub_503_after": newReceiver(t, status(503, "Retry-After", "8")),
		"sub_429":       newReceiver(t, status(429)),
		"sub_400":       newReceiver(t, status(400)),
		"sub_404_retry": newReceiver(t, status(404)),
		"sub_410":       newReceiver(t, status(410)),
		"sub_302":       newReceiver(t, status(302, "Location", elsewhere.url())),
		"sub_hang":      newReceiver(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) { <-r.Context().Done() }),
		"sub_last":      newReceiver(t, status(500)),
		"sub_deleted":   newReceiver(t, nil),
		"sub_disabled":  newReceiver(t, nil),
	}
	subs := map[string]topics.Subscription{}
	for id, rc := range endpoints {
		s := newSub(t, id, rc.url())
		switch id {
		case "sub_hang":
			s.TimeoutMS = 300
		case "sub_last":
			s.RetrySchedule = []string{"1s"}
		case "sub_disabled":
			s.Enabled = false
		case "sub_404_retry":
			s.RetryStatuses = []int{404}
		}
		subs[id] = s
		h.putSub(s)
	}
	h.deleteSub("sub_deleted")

	dels := map[string]topics.Delivery{}
	for id := range endpoints {
		d := newDelivery(id, "evt_"+strings.TrimPrefix(id, "sub_"))
		if id == "sub_last" {
			d.Attempt = 2 // the one retry of its schedule
		}
		dels[id] = d
		h.deliver(d)
	}
	h.produce(&kgo.Record{Topic: h.names.Deliveries(), Key: []byte("sub_ok/garbage"), Value: []byte(`{"not":"a delivery"`)})
	h.start(nil)

	type want struct {
		outcome, category string
		status, attempt   int
		http              bool
	}
	for id, w := range map[string]want{
		"sub_ok":        {topics.OutcomeSuccess, "", 200, 1, true},
		"sub_500":       {topics.OutcomeRetry, topics.FailureServerError, 500, 1, true},
		"sub_503_after": {topics.OutcomeRetry, topics.FailureServerError, 503, 1, true},
		"sub_429":       {topics.OutcomeRetry, topics.FailureRateLimited, 429, 1, true},
		"sub_400":       {topics.OutcomeDead, topics.FailurePermanent4xx, 400, 1, true},
		"sub_404_retry": {topics.OutcomeRetry, topics.FailurePermanent4xx, 404, 1, true},
		"sub_410":       {topics.OutcomeDead, topics.FailureGone, 410, 1, true},
		"sub_302":       {topics.OutcomeRetry, topics.FailureRedirect, 302, 1, true},
		"sub_hang":      {topics.OutcomeRetry, topics.FailureTimeout, 0, 1, true},
		"sub_last":      {topics.OutcomeDead, topics.FailureServerError, 500, 2, true},
		"sub_deleted":   {topics.OutcomeSkipped, topics.FailureDeleted, 0, 1, false},
		"sub_disabled":  {topics.OutcomeSkipped, topics.FailureDisabled, 0, 1, false},
	} {
		d := dels[id]
		a := h.waitAttempt(d.EventID)
		if a.Outcome != w.outcome || a.FailureCategory != w.category || a.HTTPStatus != w.status || a.Attempt != w.attempt {
			t.Errorf("%s: attempt = outcome %q, category %q, status %d, attempt %d; want %q, %q, %d, %d",
				id, a.Outcome, a.FailureCategory, a.HTTPStatus, a.Attempt, w.outcome, w.category, w.status, w.attempt)
		}
		if a.SubscriptionID != id || a.EventType != d.EventType || a.AttemptID == "" || a.TS.IsZero() {
			t.Errorf("%s: attempt record %+v lacks its identity", id, a)
		}
		if n := endpoints[id].count(); w.http && n != 1 || !w.http && n != 0 {
			t.Errorf("%s: endpoint got %d requests", id, n)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The hung endpoint was cut at its timeout_ms (300ms), not the default
	// 15s: the upper bound only tells the two apart, so a loaded machine
	// does not fail it.
	if a := h.waitAttempt(dels["sub_hang"].EventID); a.DurationMS < 250 || a.DurationMS >= float64(topics.DefaultTimeout.Milliseconds()) {
		t.Errorf("timeout attempt took %vms, want about 300", a.DurationMS)
	}
	// The redirect was not followed.
	if n := elsewhere.count(); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}

	// Retries: on the tier topic for the schedule's first delay (5s ->
	// the 1s tier of "1s,1m"), same key, attempt 2, due in the future. A
	// timeout waits at least the retry floor (60s by default: the 1m tier).
	for id, delay := range map[string]time.Duration{
		"sub_500":       5 * time.Second, // 5s ± 20%
		"sub_503_after": 8 * time.Second, // Retry-After 8, within [5s, 10s]
		"sub_302":       5 * time.Second,
		"sub_404_retry": 5 * time.Second, // a permanent status the subscription retries
		"sub_hang":      time.Minute,
		"sub_429":       time.Minute, // a 429 without Retry-After waits the floor too
	} {
		d := dels[id]
		a := h.waitAttempt(d.EventID)
		tier := time.Second
		if id == "sub_hang" || id == "sub_429" {
			tier = time.Minute
		}
		r := h.waitRecord(h.names.Retry(tier), d.EventID)
		read := time.Now()
		if string(r.Key) != id+"/"+d.EventID {
			t.Errorf("%s: retry key = %q, want the delivery's key", id, r.Key)
		}
		next, err := topics.DecodeDelivery(r.Value)
		if err != nil {
			t.Fatalf("%s: retry record: %v", id, err)
		}
		nb, ok := topics.NotBeforeOf(r)
		if !ok {
			t.Fatalf("%s: retry record has no %s header", id, topics.HeaderNotBefore)
		}
		// Counted from the answer: after the attempt started and lasted
		// its duration, before the test read the retry.
		answered := a.TS.Add(time.Duration(a.DurationMS * float64(time.Millisecond)))
		lo, hi := answered.Add(delay*8/10-time.Millisecond), read.Add(delay*12/10+time.Millisecond)
		if id == "sub_503_after" || id == "sub_hang" || id == "sub_429" {
			lo, hi = answered.Add(delay-time.Millisecond), read.Add(delay+time.Millisecond)
		}
		if nb.Before(lo) || nb.After(hi) {
			t.Errorf("%s: not-before %v is not within [%v, %v]", id, nb, lo, hi)
		}
		// The header has millisecond precision, the JSON times more.
		if next.Attempt != 2 || next.EventID != d.EventID || next.NotBefore.UnixMilli() != nb.UnixMilli() ||
			a.NextAttemptAt.UnixMilli() != nb.UnixMilli() || next.FirstAttemptAt.IsZero() ||
			string(next.Data) != string(d.Data) {
			t.Errorf("%s: retry delivery = %+v (attempt next at %v), want attempt 2 due %v", id, next, a.NextAttemptAt, nb)
		}
	}

	// Dead letters.
	for id, w := range map[string]struct {
		category, last string
		status         int
		attempts       int
	}{
		"sub_400":      {topics.FailurePermanent4xx, "", 400, 1},
		"sub_410":      {topics.FailureGone, "", 410, 1},
		"sub_last":     {topics.FailureExhausted, topics.FailureServerError, 500, 2},
		"sub_disabled": {topics.FailureDisabled, "", 0, 0},
	} {
		d := dels[id]
		r := h.waitRecord(h.names.DLQ(), d.EventID)
		dl, err := topics.DecodeDeadLetter(r.Value)
		if err != nil {
			t.Fatalf("%s: dlq record: %v", id, err)
		}
		if dl.FailureCategory != w.category || dl.LastFailureCategory != w.last || dl.HTTPStatus != w.status || dl.Attempts != w.attempts ||
			dl.Delivery == nil || dl.Delivery.EventID != d.EventID || dl.Reason == "" ||
			dl.Source.Topic != h.names.Deliveries() || string(r.Key) != id+"/"+d.EventID {
			t.Errorf("%s: dead letter %+v keyed %q; want category %q (last %q), status %d, attempts %d", id, dl, r.Key, w.category, w.last, w.status, w.attempts)
		}
	}
	for _, id := range []string{"sub_ok", "sub_500", "sub_404_retry", "sub_deleted"} {
		for _, r := range h.records(h.names.DLQ()) {
			if strings.Contains(string(r.Value), strconv.Quote(dels[id].EventID)) {
				t.Errorf("%s: unexpected dead letter %s", id, r.Value)
			}
		}
	}
	// An undecodable delivery is dead-lettered as it was consumed.
	var garbage *topics.DeadLetter
	waitFor(t, 20*time.Second, "the dead letter of the undecodable record", func() bool {
		for _, r := range h.records(h.names.DLQ()) {
			if dl, err := topics.DecodeDeadLetter(r.Value); err == nil && dl.Delivery == nil {
				garbage = &dl
				return true
			}
		}
		return false
	})
	if garbage.FailureCategory != topics.FailureInvalid || string(garbage.RawEvent) != `{"not":"a delivery"` {
		t.Errorf("dead letter of the undecodable record = %+v", garbage)
	}

	// 410 disables the subscription, keeping everything else.
	var disabled *topics.Subscription
	waitFor(t, 20*time.Second, "sub_410 to be republished", func() bool {
		recs := h.readAll(h.names.Subscriptions())
		for _, r := range slices.Backward(recs) {
			if string(r.Key) == "sub_410" && r.Value != nil {
				s, err := topics.DecodeSubscriptionWith(r.Value, testKeys(t))
				if err != nil {
					t.Fatalf("republished subscription: %v", err)
				}
				if bytes.Contains(r.Value, []byte(topics.SecretPrefix)) {
					t.Fatalf("republished subscription holds a plaintext secret")
				}
				disabled = &s
				break
			}
		}
		return disabled != nil && !disabled.Enabled
	})
	if disabled.DisabledReason == "" || disabled.Secret != subs["sub_410"].Secret || disabled.URL != subs["sub_410"].URL {
		t.Errorf("republished subscription = %+v", disabled)
	}
}

// warmDeliverer starts a deliverer and waits until it delivered one
// record, so its table and group are up; it returns the receiver, which
// answers 200.
func warmDeliverer(t *testing.T) (*harness, *receiver) {
	t.Helper()
	h := newHarness(t, nil)
	rc := newReceiver(t, nil)
	h.putSub(newSub(t, "sub_warm", rc.url()))
	h.start(nil)
	h.deliver(newDelivery("sub_warm", "evt_warm"))
	if a := h.waitAttempt("evt_warm"); a.Outcome != topics.OutcomeSuccess {
		t.Fatalf("warm-up attempt: %+v", a)
	}
	return h, rc
}

// TestSubscriptionCreatedJustBefore: a delivery can reach the deliverer
// before its subscription reaches the deliverer's table. The deliverer
// must wait for the table to catch up, not skip the delivery as deleted.
// The test holds the table's fetches of the subscriptions topic so the lag
// is certain.
func TestSubscriptionCreatedJustBefore(t *testing.T) {
	t.Parallel()
	h, rc := warmDeliverer(t)

	subsTopic := h.names.Subscriptions()
	details, err := h.adm.ListTopics(testCtx(t, 10*time.Second), subsTopic)
	if err != nil {
		t.Fatal(err)
	}
	subsID := details[subsTopic].ID
	release := make(chan struct{})
	holding := make(chan struct{}, 1)
	h.cluster.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		for _, ft := range kreq.(*kmsg.FetchRequest).Topics {
			if ft.Topic != subsTopic && ft.TopicID != subsID {
				continue
			}
			select {
			case <-release:
			default:
				select {
				case holding <- struct{}{}:
				default:
				}
				h.cluster.SleepControl(func() { <-release })
			}
		}
		return nil, nil, false // then answer normally
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	// Wake the table's pending long poll so its next fetch is the one held.
	h.deleteSub("sub_nobody")
	select {
	case <-holding:
	case <-testCtx(t, 20*time.Second).Done():
		t.Fatal("the table never fetched the subscriptions topic")
	}
	asked := h.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: subsTopic, Observe: true, Count: -1})

	h.putSub(newSub(t, "sub_new", rc.url()))
	h.deliver(newDelivery("sub_new", "evt_new"))
	waitFor(t, 20*time.Second, "the deliverer to ask where the subscriptions topic ends", func() bool {
		if as := h.attemptsOf("evt_new"); len(as) > 0 {
			t.Fatalf("evt_new attempted while the table lags: %+v", as)
		}
		return asked.Hits() > 0
	})
	if n := len(h.attemptsOf("evt_new")); n != 0 {
		t.Fatalf("%d attempts of evt_new while the table lags: %+v", n, h.attemptsOf("evt_new"))
	}
	close(release)
	rc.waitRequest(t, "evt_new")
	if a := h.waitAttempt("evt_new"); a.Outcome != topics.OutcomeSuccess {
		t.Fatalf("attempt of evt_new = %+v, want success", a)
	}
}

// TestCatchUpFailureIsNotADeletion: when the deliverer cannot learn where
// the subscriptions topic ends, a delivery whose subscription it does not
// know yet waits; it is not skipped as deleted (and so lost).
func TestCatchUpFailureIsNotADeletion(t *testing.T) {
	t.Parallel()
	h, rc := warmDeliverer(t)

	failing := h.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: h.names.Subscriptions(), Count: -1})
	h.deliver(newDelivery("sub_late", "evt_late"))
	if err := failing.Wait(testCtx(t, 20*time.Second), 2); err != nil {
		t.Fatalf("the deliverer never asked twice where the subscriptions topic ends: %v", err)
	}
	if as := h.attemptsOf("evt_late"); len(as) != 0 {
		t.Fatalf("evt_late settled while the subscriptions could not be read: %+v", as)
	}
	h.putSub(newSub(t, "sub_late", rc.url()))
	failing.Remove()
	rc.waitRequest(t, "evt_late")
	if a := h.waitAttempt("evt_late"); a.Outcome != topics.OutcomeSuccess {
		t.Fatalf("attempt of evt_late = %+v, want success", a)
	}
}

// TestPerKeyOrder: with ordering "key", each key's deliveries reach the
// endpoint in publish order while different keys run concurrently.
func TestPerKeyOrder(t *testing.T) {
	t.Parallel()
	const keys, perKey = 5, 40
	h := newHarness(t, nil)
	var (
		mu      sync.Mutex
		arrived = map[string][]int{}
	)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, body []byte) {
		var b struct {
			Data struct {
				Key string `json:"key"`
				Seq int    `json:"seq"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		arrived[b.Data.Key] = append(arrived[b.Data.Key], b.Data.Seq)
		mu.Unlock()
		// A random pause provokes reordering if anything allowed it.
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
	})
	s := newSub(t, "sub_ordered", rc.url())
	s.Ordering = topics.OrderingKey
	h.putSub(s)
	var recs []*kgo.Record
	for seq := range perKey {
		for k := range keys {
			key := fmt.Sprintf("k%d", k)
			d := newDelivery(s.ID, fmt.Sprintf("evt_%s_%02d", key, seq))
			d.Key = key
			d.Data = fmt.Appendf(nil, `{"key":%q,"seq":%d}`, key, seq)
			recs = append(recs, h.deliveryRecord(d, key))
		}
	}
	h.produce(recs...)
	h.start(nil)
	// Counted where the handler records it: the receiver counts a request
	// before its handler runs.
	waitFor(t, 30*time.Second, "every delivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, seqs := range arrived {
			n += len(seqs)
		}
		return n >= keys*perKey
	})

	mu.Lock()
	defer mu.Unlock()
	for k := range keys {
		key := fmt.Sprintf("k%d", k)
		want := make([]int, perKey)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(arrived[key], want) {
			t.Errorf("key %s arrived in order %v", key, arrived[key])
		}
	}
	if _, peak := rc.concurrency(); peak < 2 {
		t.Errorf("at most %d request at a time: different keys did not run concurrently", peak)
	}
}

// TestCommitsAfterCleanStop (invariant 1): once the deliveries are done and
// Run has returned, the group's committed offsets are the end offsets.
func TestCommitsAfterCleanStop(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	rc := newReceiver(t, nil)
	var ds []topics.Delivery
	for _, sub := range []string{"sub_a", "sub_b", "sub_c", "sub_d"} {
		h.putSub(newSub(t, sub, rc.url()))
		for _, id := range ids("evt_"+sub, 8) {
			ds = append(ds, newDelivery(sub, id))
		}
	}
	h.deliver(ds...)
	// A long commit interval: what is committed is committed on the way out.
	r := h.start(map[string]string{"WEBHOOKS_DELIVERER_COMMIT_INTERVAL": "1h"})
	waitFor(t, 20*time.Second, "every delivery", func() bool { return rc.count() == len(ds) })
	waitFor(t, 20*time.Second, "every attempt record", func() bool { return len(h.attempts()) == len(ds) })
	if err := r.Stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	ends := h.ends(h.names.Deliveries())
	if got := h.committed(); !equalOffsets(got, ends) {
		t.Fatalf("committed %v, want the end offsets %v", got, ends)
	}
}

func equalOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range a {
		if b[p] != o {
			return false
		}
	}
	return true
}

// TestNoCommitBeforeAttemptAcked (invariant 1): while the broker refuses
// the attempt records, the deliveries that caused them are not committed,
// even though their HTTP requests succeeded; once it accepts them,
// everything is committed and every attempt record exists.
func TestNoCommitBeforeAttemptAcked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	rc := newReceiver(t, nil)
	h.putSub(newSub(t, "sub_a", rc.url()))
	h.start(nil)

	first := ids("evt_first", 5)
	for _, id := range first {
		h.deliver(newDelivery("sub_a", id))
	}
	waitFor(t, 20*time.Second, "the first deliveries to be committed", func() bool {
		return equalOffsets(h.committed(), h.ends(h.names.Deliveries()))
	})
	before := h.committed()

	refuse := h.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: h.names.Attempts(),
		Err: kerr.NotEnoughReplicas, Count: -1})
	second := ids("evt_second", 5)
	for _, id := range second {
		h.deliver(newDelivery("sub_a", id))
	}
	waitFor(t, 20*time.Second, "the second requests", func() bool { return rc.count() == 10 })
	waitFor(t, 20*time.Second, "attempt records to be refused", func() bool { return refuse.Hits() > 0 })
	// Many commit intervals (50ms) long: nothing may be committed.
	keepsHolding(t, time.Second, "the committed offset", func() bool { return equalOffsets(h.committed(), before) })
	for _, id := range second {
		if n := len(h.attemptsOf(id)); n != 0 {
			t.Fatalf("an attempt record of %s was written while the broker refused them", id)
		}
	}

	refuse.Remove()
	waitFor(t, 30*time.Second, "everything to be committed", func() bool {
		return equalOffsets(h.committed(), h.ends(h.names.Deliveries()))
	})
	for _, id := range append(first, second...) {
		if a := h.waitAttempt(id); a.Outcome != topics.OutcomeSuccess {
			t.Fatalf("attempt of %s = %+v", id, a)
		}
	}
}

// TestBackpressure (invariant 6): with a blocked endpoint, no more than
// MaxInFlight requests run, and everything arrives once it unblocks even
// though at most MaxBuffered records are held at a time.
func TestBackpressure(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := newGate(t)
	rc := newReceiver(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) { g.wait(r) })
	var ds []topics.Delivery
	for _, sub := range []string{"sub_a", "sub_b"} {
		h.putSub(newSub(t, sub, rc.url()))
		for _, id := range ids("evt_"+sub, 50) {
			ds = append(ds, newDelivery(sub, id))
		}
	}
	h.deliver(ds...)
	h.start(map[string]string{"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT": "2", "WEBHOOKS_DELIVERER_MAX_BUFFERED": "4"})
	waitFor(t, 20*time.Second, "two requests in flight", func() bool { now, _ := rc.concurrency(); return now == 2 })
	keepsHolding(t, 500*time.Millisecond, "at most two requests", func() bool {
		_, peak := rc.concurrency()
		return peak <= 2 && rc.count() == 2
	})
	g.open()
	waitFor(t, 30*time.Second, "every delivery", func() bool { return rc.count() >= len(ds) })
	if _, peak := rc.concurrency(); peak > 2 {
		t.Fatalf("%d requests ran at once, MaxInFlight is 2", peak)
	}
	for id, n := range rc.perID() {
		if n != 1 {
			t.Fatalf("%s delivered %d times", id, n)
		}
	}
}

// TestDueRetriesKeepOutOfTheWay (invariant 5, issue 3): a storm of due
// retries in the redeliveries topic takes at most half of the buffer, so
// fresh deliveries are fetched and delivered while the storm's endpoint
// still holds every request. (With the storm on the fresh topic, or with no
// share of its own, the storm fills the buffer and fetching stops.) The
// storm's subscription is busy, not slow: its queue limit is above the
// storm, so nothing spills and only the share keeps the buffer free.
func TestDueRetriesKeepOutOfTheWay(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := newGate(t)
	storm := newReceiver(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) { g.wait(r) })
	fresh := newReceiver(t, nil)
	stormSub := newSub(t, "sub_storm", storm.url())
	stormSub.TimeoutMS = 300_000 // no request ends before the gate opens
	h.putSub(stormSub)
	h.putSub(newSub(t, "sub_fresh", fresh.url()))
	var due []*kgo.Record
	for _, id := range ids("evt_storm", 100) {
		d := newDelivery("sub_storm", id)
		d.Attempt = 2
		r := h.deliveryRecord(d, "")
		r.Topic = h.names.Redeliveries()
		due = append(due, r)
	}
	h.produce(due...)
	h.start(map[string]string{
		"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT":               "4",
		"WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION":        "2",
		"WEBHOOKS_DELIVERER_MAX_BUFFERED":                "40",
		"WEBHOOKS_DELIVERER_MAX_QUEUED_PER_SUBSCRIPTION": "1000",
	})
	waitFor(t, 20*time.Second, "the storm's requests in flight", func() bool { now, _ := storm.concurrency(); return now == 2 })
	var fs []topics.Delivery
	for _, id := range ids("evt_fresh", 10) {
		fs = append(fs, newDelivery("sub_fresh", id))
	}
	h.deliver(fs...)
	waitFor(t, 20*time.Second, "the fresh deliveries while the storm's endpoint holds every request", func() bool { return fresh.count() == len(fs) })
	if n := storm.count(); n != 2 {
		t.Fatalf("the storm's endpoint got %d requests with its gate closed, want the 2 it holds", n)
	}
	g.open()
	waitFor(t, 30*time.Second, "the storm delivered and committed", func() bool {
		return storm.count() == len(due) && equalOffsets(h.committedIn(h.names.Redeliveries()), h.ends(h.names.Redeliveries()))
	})
	for id, n := range storm.perID() {
		if n != 1 {
			t.Fatalf("%s delivered %d times", id, n)
		}
	}
}

// TestPollBackpressure drives the poll loop alone, with the test as the only
// worker: it holds exactly MaxBuffered records and no more while nothing
// finishes, and refills as records finish until all have passed.
func TestPollBackpressure(t *testing.T) {
	t.Parallel()
	for _, maxBuffered := range []int{4, 1} {
		t.Run(fmt.Sprintf("max_buffered=%d", maxBuffered), func(t *testing.T) {
			t.Parallel()
			const n = 20
			h := newHarness(t, nil)
			cfg, err := LoadConfig(func(k string) string {
				switch k {
				case "WEBHOOKS_DELIVERER_MAX_IN_FLIGHT":
					return "1"
				case "WEBHOOKS_DELIVERER_MAX_BUFFERED":
					return strconv.Itoa(maxBuffered)
				}
				return h.env[k]
			})
			if err != nil {
				t.Fatal(err)
			}
			subs, err := table.NewTable(baseOpts(cfg, h.log), cfg.Kafka.Names.Subscriptions(), nil, h.log)
			if err != nil {
				t.Fatal(err)
			}
			defer subs.Close()
			holdTable, err := table.NewHoldTable(baseOpts(cfg, h.log), cfg.Kafka.Names.Holds(), h.log)
			if err != nil {
				t.Fatal(err)
			}
			defer holdTable.Close()
			tableCtx, stopTable := context.WithCancel(context.Background())
			defer stopTable()
			go holdTable.Run(tableCtx)
			d := &deliverer{cfg: cfg, names: cfg.Kafka.Names, log: h.log, lanes: newLanes(cfg), holds: newHolds(holdTable),
				fatal: make(chan error, 1), table: subs, unsettled: newUnsettled(cfg.MaxInFlight)}
			d.cl, err = kgo.NewClient(d.opts(baseOpts(cfg, h.log))...)
			if err != nil {
				t.Fatal(err)
			}
			d.wms = kafka.NewWatermarks(d.cl, h.log)
			defer d.cl.Close()
			h.deliver(func() []topics.Delivery {
				var ds []topics.Delivery
				for _, id := range ids("evt", n) {
					ds = append(ds, newDelivery("sub_a", id))
				}
				return ds
			}()...)
			ctx, cancel := context.WithCancel(context.Background())
			polled := make(chan error, 1)
			go func() { polled <- d.poll(ctx) }()
			defer func() {
				cancel()
				if err := <-polled; err != nil {
					t.Errorf("poll = %v", err)
				}
			}()

			waitFor(t, 20*time.Second, "the buffer to fill", func() bool { return d.lanes.Buffered() == maxBuffered })
			keepsHolding(t, 300*time.Millisecond, "the buffer cap", func() bool { return d.lanes.Buffered() == maxBuffered })
			for i := range int64(n) {
				it := nextItem(t, d.lanes)
				if it.Rec.Offset != i {
					t.Fatalf("record %d is offset %d", i, it.Rec.Offset)
				}
				if b := d.lanes.Buffered(); b > maxBuffered {
					t.Fatalf("%d records buffered, cap %d", b, maxBuffered)
				}
				d.lanes.Done(it, true)
			}
		})
	}
}

// nextItem is lanes.Next with a deadline.
func nextItem(tb testing.TB, l *lanes.Lanes) *lanes.Item {
	tb.Helper()
	ch := make(chan *lanes.Item, 1)
	go func() {
		it, _ := l.Next()
		ch <- it
	}()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case it := <-ch:
		if it == nil {
			tb.Fatal("lanes closed")
		}
		return it
	case <-timer.C:
		l.Close()
		tb.Fatalf("no record became runnable (%d buffered): polling stalled", l.Buffered())
		return nil
	}
}

// TestCleanShutdown: cancelling Run lets the requests in flight finish and
// commits them; a second deliverer in the same group delivers the rest, and
// no event reaches the endpoint twice.
func TestCleanShutdown(t *testing.T) {
	t.Parallel()
	const n = 20
	h := newHarness(t, nil)
	g := newGate(t)
	rc := newReceiver(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) { g.wait(r) })
	h.putSub(newSub(t, "sub_a", rc.url()))
	var ds []topics.Delivery
	for _, id := range ids("evt", n) {
		ds = append(ds, newDelivery("sub_a", id))
	}
	h.deliver(ds...)
	env := map[string]string{"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT": "4"}
	r := h.start(env)
	waitFor(t, 20*time.Second, "four requests in flight", func() bool { now, _ := rc.concurrency(); return now == 4 })

	r.Cancel()
	g.open()
	if err := r.Stop(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if now, _ := rc.concurrency(); now != 0 {
		t.Fatalf("%d requests still in flight after Run returned", now)
	}
	waitFor(t, 20*time.Second, "the stopped deliverer's connections closed", func() bool { return rc.conns.Load() == 0 })
	firstRun := rc.all()
	if len(firstRun) < 4 || len(firstRun) == n {
		t.Fatalf("first run delivered %d of %d", len(firstRun), n)
	}
	for _, req := range firstRun {
		if a := h.waitAttempt(req.id()); a.Outcome != topics.OutcomeSuccess {
			t.Fatalf("attempt of %s = %+v", req.id(), a)
		}
	}
	// One subscription, one partition: the first run started a prefix of
	// it, finished all of it, and committed exactly that.
	committed := h.committed()
	total := int64(0)
	for _, o := range committed {
		total += o
	}
	if len(committed) != 1 || total != int64(len(firstRun)) {
		t.Fatalf("committed %v after the first run delivered %d", committed, len(firstRun))
	}

	r2 := h.start(env)
	waitFor(t, 30*time.Second, "the rest to be delivered", func() bool { return rc.count() >= n })
	if err := r2.Stop(t); err != nil {
		t.Fatalf("second Run = %v", err)
	}
	counts := rc.perID()
	for _, d := range ds {
		if counts[d.EventID] != 1 {
			t.Fatalf("%s delivered %d times (all: %v)", d.EventID, counts[d.EventID], counts)
		}
	}
	if got, ends := h.committed(), h.ends(h.names.Deliveries()); !equalOffsets(got, ends) {
		t.Fatalf("committed %v, want %v", got, ends)
	}
}

// TestShutdownPastBudgetCommitsNothingUnacked: the broker refuses attempt
// records and the shutdown budget runs out. Run still returns, the refused
// deliveries stay uncommitted, and the next deliverer redoes them.
func TestShutdownPastBudgetCommitsNothingUnacked(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	rc := newReceiver(t, nil)
	h.putSub(newSub(t, "sub_a", rc.url()))
	h.deliver(newDelivery("sub_a", "evt_1"))
	env := map[string]string{"WEBHOOKS_SHUTDOWN_TIMEOUT": "500ms"}
	r := h.start(env)
	waitFor(t, 20*time.Second, "the first delivery to be committed", func() bool {
		return equalOffsets(h.committed(), h.ends(h.names.Deliveries()))
	})
	before := h.committed()

	refuse := h.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: h.names.Attempts(),
		Err: kerr.NotEnoughReplicas, Count: -1})
	h.deliver(newDelivery("sub_a", "evt_2"))
	rc.waitRequest(t, "evt_2")
	waitFor(t, 20*time.Second, "attempt records to be refused", func() bool { return refuse.Hits() > 0 })
	if err := r.Stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if got := h.committed(); !equalOffsets(got, before) {
		t.Fatalf("committed %v after a shutdown with an unacknowledged attempt, want %v", got, before)
	}

	refuse.Remove()
	h.start(env)
	waitFor(t, 20*time.Second, "evt_2 to be redone", func() bool { return rc.perID()["evt_2"] == 2 })
	if a := h.waitAttempt("evt_2"); a.Outcome != topics.OutcomeSuccess {
		t.Fatalf("attempt of evt_2 = %+v", a)
	}
	waitFor(t, 20*time.Second, "everything to be committed", func() bool {
		return equalOffsets(h.committed(), h.ends(h.names.Deliveries()))
	})
}

// TestFinishedAboveWatermarkNotRedone (invariant 3): records that finished
// while one below them still ran are committed, with the watermark, as
// finished; a deliverer that takes the partition over redoes only the one
// that did not finish. Here the first deliverer stops past its budget with
// the first delivery's request hanging (as a crash leaves it).
func TestFinishedAboveWatermarkNotRedone(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	g := newGate(t)
	rc := newReceiver(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) {
		if r.Header.Get("webhook-id") == "evt_000" {
			g.wait(r)
		}
	})
	h.putSub(newSub(t, "sub_a", rc.url()))
	var ds []topics.Delivery
	for _, id := range ids("evt", 6) {
		ds = append(ds, newDelivery("sub_a", id))
	}
	h.deliver(ds...)
	env := map[string]string{"WEBHOOKS_SHUTDOWN_TIMEOUT": "500ms"}
	r := h.start(env)
	part, end := int32(-1), int64(0)
	for p, e := range h.ends(h.names.Deliveries()) {
		part, end = p, e
	}
	waitFor(t, 20*time.Second, "the five records above the hanging one committed as finished", func() bool {
		offs, err := h.adm.FetchOffsets(testCtx(t, 10*time.Second), topics.GroupDeliverer)
		if err != nil {
			return false
		}
		o, ok := offs.Lookup(h.names.Deliveries(), part)
		runs := kafka.FinishedAbove(o.Metadata, o.At)
		return ok && o.At == end-6 && slices.Equal(runs, []kafka.Run{{From: end - 5, To: end - 1}})
	})
	if err := r.Stop(t); err != nil {
		t.Fatalf("Run = %v", err)
	}
	g.open()
	h.start(env)
	waitFor(t, 20*time.Second, "everything committed after the takeover", func() bool {
		return equalOffsets(h.committed(), h.ends(h.names.Deliveries()))
	})
	want := map[string]int{"evt_000": 2, "evt_001": 1, "evt_002": 1, "evt_003": 1, "evt_004": 1, "evt_005": 1}
	if got := rc.perID(); !maps.Equal(got, want) {
		t.Fatalf("requests per event = %v, want %v (only the hanging one redone)", got, want)
	}
}

// subsOnDistinctPartitions returns n subscription ids whose deliveries land
// on n different partitions of the deliveries topic.
func (h *harness) subsOnDistinctPartitions(n int) []string {
	h.t.Helper()
	part := topics.Partitioner().ForTopic(h.names.Deliveries())
	taken := map[int]bool{}
	var out []string
	for i := 0; len(out) < n; i++ {
		if i > 1000 {
			h.t.Fatal("no subscription ids on distinct partitions")
		}
		id := fmt.Sprintf("sub_%d", i)
		p := part.Partition(&kgo.Record{Key: []byte(id + "/x")}, 3)
		if !taken[p] {
			taken[p] = true
			out = append(out, id)
		}
	}
	return out
}

// TestRebalanceHandsOver: a second deliverer joins the group while the first
// has requests in flight. The first hands over the partitions it loses
// after finishing what runs there (and committing it); every event arrives
// exactly once, and in the end everything is committed.
func TestRebalanceHandsOver(t *testing.T) {
	t.Parallel()
	const perSub = 20
	h := newHarness(t, nil)
	g := newGate(t)
	rc := newReceiver(t, func(_ http.ResponseWriter, r *http.Request, _ []byte) { g.wait(r) })
	var ds []topics.Delivery
	for _, sub := range h.subsOnDistinctPartitions(3) {
		h.putSub(newSub(t, sub, rc.url()))
		for _, id := range ids("evt_"+sub, perSub) {
			ds = append(ds, newDelivery(sub, id))
		}
	}
	h.deliver(ds...)
	env := map[string]string{"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT": "3", "WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION": "1"}
	first := h.start(env)
	waitFor(t, 20*time.Second, "a request in flight on every partition", func() bool { now, _ := rc.concurrency(); return now == 3 })
	second := h.start(env)
	// The group rebalanced: two members, and partitions taken from the
	// first are not yet assigned to anyone, because the first is still
	// finishing the requests it runs there (its revoke waits for them).
	waitFor(t, 20*time.Second, "the first deliverer to give partitions up", func() bool {
		gs, err := h.adm.DescribeGroups(testCtx(t, 10*time.Second), topics.GroupDeliverer)
		if err != nil {
			t.Fatal(err)
		}
		d := gs[topics.GroupDeliverer]
		return d.State == "Stable" && len(d.Members) == 2 && len(d.AssignedPartitions()[h.names.Deliveries()]) < 3
	})
	if n := rc.count(); n != 3 {
		t.Fatalf("%d requests before the gate opened, want the 3 in flight", n)
	}
	g.open()
	waitFor(t, 30*time.Second, "every delivery", func() bool { return rc.count() >= len(ds) })
	for _, r := range []*testkit.Running{first, second} {
		if err := r.Stop(t); err != nil {
			t.Fatalf("Run = %v", err)
		}
	}
	counts := rc.perID()
	for _, d := range ds {
		if counts[d.EventID] != 1 {
			t.Fatalf("%s delivered %d times", d.EventID, counts[d.EventID])
		}
	}
	if got, ends := h.committed(), h.ends(h.names.Deliveries()); !equalOffsets(got, ends) {
		t.Fatalf("committed %v, want %v", got, ends)
	}
}

// TestFatalProduceErrorEndsRun: when the broker refuses an attempt record
// for good (not retriable), Run returns an error instead of carrying on with
// a watermark that can never move, and nothing past the record is
// committed.
func TestFatalProduceErrorEndsRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	rc := newReceiver(t, nil)
	h.putSub(newSub(t, "sub_a", rc.url()))
	h.cluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: h.names.Attempts(),
		Err: kerr.TopicAuthorizationFailed, Count: -1})
	r := h.start(nil)
	h.deliver(newDelivery("sub_a", "evt_1"))
	rc.waitRequest(t, "evt_1")
	select {
	case <-r.Done():
	case <-testCtx(t, 20*time.Second).Done():
		t.Fatal("Run still running 20s after a fatal produce error")
	}
	if r.Err() == nil || !strings.Contains(r.Err().Error(), "TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("Run = %v, want the produce error", r.Err())
	}
	for p, o := range h.committed() {
		if o != 0 { // evt_1 is the only record, at offset 0
			t.Fatalf("committed offset %d on partition %d, past the record whose attempt was refused", o, p)
		}
	}
}
