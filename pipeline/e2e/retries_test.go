package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/topics"
)

// attemptsOf reads the attempt records of one event for one subscription
// until want of them are there, in time order.
func (e *env) attemptsOf(sub, eventID string, want int) []topics.Attempt {
	e.t.Helper()
	var out []topics.Attempt
	e.consume(e.names.Attempts(), 60*time.Second, func(recs []*kgo.Record) bool {
		out = out[:0]
		for _, r := range recs {
			if a, err := topics.DecodeAttempt(r.Value); err == nil && a.EventID == eventID && a.SubscriptionID == sub {
				out = append(out, a)
			}
		}
		return len(out) >= want
	})
	slices.SortFunc(out, func(a, b topics.Attempt) int { return a.TS.Compare(b.TS) })
	return out
}

// attemptsThroughSuccess reads the attempts of an event of a subscription
// up to its successful one (attempts of an event share a partition, so
// every earlier attempt is read by then), in time order.
func (e *env) attemptsThroughSuccess(sub, eventID string) []topics.Attempt {
	e.t.Helper()
	var out []topics.Attempt
	e.consume(e.names.Attempts(), 60*time.Second, func(recs []*kgo.Record) bool {
		out = out[:0]
		done := false
		for _, r := range recs {
			if a, err := topics.DecodeAttempt(r.Value); err == nil && a.EventID == eventID && a.SubscriptionID == sub {
				out = append(out, a)
				done = done || a.Outcome == topics.OutcomeSuccess
			}
		}
		return done
	})
	slices.SortFunc(out, func(a, b topics.Attempt) int { return a.TS.Compare(b.TS) })
	return out
}

// checkNotEarly: every retry (attempt n >= 2) happened at or after the due
// time that an attempt n-1 announced. (A crash may repeat an attempt: the
// redo is not a retry, and each copy's retry is due on its own.)
func checkNotEarly(t *testing.T, atts []topics.Attempt) {
	t.Helper()
	for _, cur := range atts {
		if cur.Attempt < 2 {
			continue
		}
		ok := slices.ContainsFunc(atts, func(prev topics.Attempt) bool {
			return prev.Attempt == cur.Attempt-1 && prev.Outcome == topics.OutcomeRetry && !cur.TS.Before(prev.NextAttemptAt)
		})
		if !ok {
			t.Errorf("event %s attempt %d at %v came before any attempt %d announced it due", cur.EventID, cur.Attempt, cur.TS, cur.Attempt-1)
		}
	}
}

// TestRetryThenSuccess: 500, 500, 200 with a three-step schedule: delivered
// on attempt 3, the same webhook-id every time, three attempt records, no
// retry before its due time.
func TestRetryThenSuccess(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	var calls atomic.Int32
	r.answer(func(request, http.ResponseWriter) int {
		if calls.Add(1) <= 2 {
			return http.StatusInternalServerError
		}
		return http.StatusNoContent
	})
	r.trust(e.subscribe(topics.Subscription{ID: "flaky", URL: r.url("flaky"), EventTypes: []string{"*"}, Enabled: true,
		RetrySchedule: []string{"1s", "1s", "1s"}}))
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	e.publish(topics.Event{ID: "evt_flaky", Type: "order.created", Data: json.RawMessage(`{}`)})
	wait(t, 60*time.Second, "the delivery on attempt 3", func() bool { return r.count() == 1 })
	all := r.attempts("evt_flaky")
	if len(all) != 3 {
		t.Fatalf("%d requests, want 3", len(all))
	}
	for _, q := range all {
		if q.Header.Get("webhook-id") != "evt_flaky" {
			t.Errorf("webhook-id %q on a retry", q.Header.Get("webhook-id"))
		}
	}
	atts := e.attemptsOf("flaky", "evt_flaky", 3)
	var got []string
	for _, a := range atts {
		got = append(got, fmt.Sprintf("%d:%s", a.Attempt, a.Outcome))
	}
	if want := []string{"1:retry", "2:retry", "3:success"}; !slices.Equal(got, want) {
		t.Errorf("attempt records %v, want %v", got, want)
	}
	checkNotEarly(t, atts)
	r.checkSignatures(t)
}

// TestRetryAfterHonoured: a 429 with Retry-After: 7 is not retried sooner
// than 7 seconds later.
func TestRetryAfterHonoured(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	var calls atomic.Int32
	r.answer(func(_ request, w http.ResponseWriter) int {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "7")
			return http.StatusTooManyRequests
		}
		return http.StatusNoContent
	})
	r.trust(e.subscribe(topics.Subscription{ID: "limited", URL: r.url("limited"), EventTypes: []string{"*"}, Enabled: true,
		RetrySchedule: []string{"5s"}}))
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	e.publish(topics.Event{ID: "evt_429", Type: "order.created", Data: json.RawMessage(`{}`)})
	wait(t, 60*time.Second, "the retried delivery", func() bool { return r.count() == 1 })
	all := r.attempts("evt_429")
	if len(all) != 2 {
		t.Fatalf("%d requests, want 2", len(all))
	}
	if gap := all[1].At.Sub(all[0].At); gap < 7*time.Second {
		t.Errorf("retried %v after a 429 with Retry-After: 7", gap)
	}
}

// TestDeadLettersAndRedrive: a 400 is dead-lettered at once, an exhausted
// schedule after its last step; webhookctl redrives both to the (now
// healthy) endpoint, where each arrives exactly once, even when redriven
// twice.
func TestDeadLettersAndRedrive(t *testing.T) {
	ctl := filepath.Join(binaries(t), "webhookctl")
	e := newEnv(t)
	r := newReceiver(t)
	var healthy atomic.Bool
	r.answer(func(q request, _ http.ResponseWriter) int {
		switch {
		case healthy.Load():
			return http.StatusNoContent
		case q.Sub == "bad-request":
			return http.StatusBadRequest
		default:
			return http.StatusInternalServerError
		}
	})
	r.trust(e.subscribe(topics.Subscription{ID: "bad-request", URL: r.url("bad-request"), EventTypes: []string{"*"}, Enabled: true}))
	r.trust(e.subscribe(topics.Subscription{ID: "down", URL: r.url("down"), EventTypes: []string{"*"}, Enabled: true,
		RetrySchedule: []string{"1s"}}))
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	e.publish(topics.Event{ID: "evt_dead", Type: "order.created", Data: json.RawMessage(`{"v":1}`)})

	dls := map[string]topics.DeadLetter{}
	e.consume(e.names.DLQ(), 60*time.Second, func(recs []*kgo.Record) bool {
		for _, rec := range recs {
			if dl, err := topics.DecodeDeadLetter(rec.Value); err == nil && dl.Delivery != nil {
				dls[dl.Delivery.SubscriptionID] = dl
			}
		}
		return len(dls) == 2
	})
	if dl := dls["bad-request"]; dl.FailureCategory != topics.FailurePermanent4xx || dl.Attempts != 1 {
		t.Errorf("400: dead letter category %q after %d attempts", dl.FailureCategory, dl.Attempts)
	}
	if dl := dls["down"]; dl.FailureCategory != topics.FailureExhausted || dl.Attempts != 2 {
		t.Errorf("exhausted: dead letter category %q after %d attempts", dl.FailureCategory, dl.Attempts)
	}

	healthy.Store(true)
	for range 2 {
		cmd := exec.Command(ctl, "dlq", "redrive", "--rate", "100")
		cmd.Env = e.environ()
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("webhookctl dlq redrive: %v: %s", err, stderr.String())
		}
	}
	wait(t, 60*time.Second, "both redriven deliveries", func() bool { return r.count() == 2 })
	wait(t, 30*time.Second, "the deliverer to commit everything", e.drained)
	for _, sub := range []string{"bad-request", "down"} {
		if n := r.pairs()[sub+"/evt_dead"]; n != 1 {
			t.Errorf("%s: redriven delivery arrived %d times, want once", sub, n)
		}
	}
	r.checkSignatures(t)
}

// orderedEvents publishes n events for each key, interleaved by key, with
// ids "<key>-<seq>".
func orderedEvents(keys []string, n int) []topics.Event {
	var evs []topics.Event
	for i := range n {
		for _, k := range keys {
			evs = append(evs, topics.Event{ID: fmt.Sprintf("%s-%03d", k, i), Type: "order.updated", Key: k,
				Data: json.RawMessage(fmt.Sprintf(`{"seq":%d}`, i))})
		}
	}
	return evs
}

// checkKeyOrder: for one subscription and key, no event was attempted
// before the previous event of its key had been accepted (so, by
// induction, before every earlier one). Duplicates of accepted events,
// which at-least-once allows around crashes, are not a violation.
func checkKeyOrder(t *testing.T, r *receiver, sub, key string) {
	t.Helper()
	r.mu.Lock()
	all := slices.Clone(r.all)
	r.mu.Unlock()
	accepted := map[string]bool{}
	for _, q := range all {
		if q.Sub != sub || !strings.HasPrefix(q.ID, key+"-") {
			continue
		}
		var seq int
		if _, err := fmt.Sscanf(strings.TrimPrefix(q.ID, key+"-"), "%d", &seq); err != nil {
			t.Errorf("event id %q: %v", q.ID, err)
		}
		if seq > 0 && !accepted[fmt.Sprintf("%s-%03d", key, seq-1)] {
			t.Fatalf("key %s: %s attempted before %s-%03d was delivered", key, q.ID, key, seq-1)
		}
		if slices.ContainsFunc(r.got(), func(a request) bool { return a.Sub == sub && a.ID == q.ID && !a.At.After(q.At) }) {
			accepted[q.ID] = true
		}
	}
}

// TestOrderedKeyHeldWhileOtherKeysFlow: an endpoint failing for key K
// only: K's events arrive later, in publish order; the other keys' events
// of the same subscription arrive meanwhile.
func TestOrderedKeyHeldWhileOtherKeysFlow(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	failK := failKey(r, "K")
	r.trust(e.subscribe(topics.Subscription{ID: "ordered", URL: r.url("ordered"), EventTypes: []string{"*"}, Enabled: true,
		Ordering: topics.OrderingKey, RetrySchedule: []string{"1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s", "1s"}}))
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	const n = 10
	e.publish(orderedEvents([]string{"K", "J", "L"}, n)...)
	wait(t, 60*time.Second, "every J and L event while K fails", func() bool { return r.count() == 2*n })
	for _, q := range r.got() {
		if strings.HasPrefix(q.ID, "K-") {
			t.Fatalf("%s delivered while K was failing", q.ID)
		}
	}
	for _, q := range r.requests() {
		if strings.HasPrefix(q.ID, "K-") && q.ID != "K-000" {
			t.Fatalf("%s attempted while K-000 was failing", q.ID)
		}
	}
	failK.Store(false)
	wait(t, 60*time.Second, "every K event once K recovers", func() bool { return r.count() >= 3*n })
	for _, k := range []string{"K", "J", "L"} {
		checkKeyOrder(t, r, "ordered", k)
	}
	r.checkSignatures(t)
}

// failKey makes r answer 503 to the events of key k (ids k-NNN) until the
// switch it returns is turned off, 204 to every other request.
func failKey(r *receiver, k string) *atomic.Bool {
	var fail atomic.Bool
	fail.Store(true)
	r.answer(func(q request, _ http.ResponseWriter) int {
		if fail.Load() && strings.HasPrefix(q.ID, k+"-") {
			return http.StatusServiceUnavailable
		}
		return http.StatusNoContent
	})
	return &fail
}

// TestKilledWhileHeldAndParked: deliverer and retrier processes are killed
// (SIGKILL) while a key is held, its head waiting in a tier and later
// events parked; after a restart every event arrives, the key in publish
// order, and no retry happens before its due time.
func TestKilledWhileHeldAndParked(t *testing.T) {
	dir := binaries(t)
	e := newEnv(t)
	r := newReceiver(t)
	failK := failKey(r, "K")
	r.trust(e.subscribe(topics.Subscription{ID: "ordered", URL: r.url("ordered"), EventTypes: []string{"*"}, Enabled: true,
		Ordering: topics.OrderingKey, RetrySchedule: []string{"2s", "2s", "2s", "2s", "2s", "2s", "2s", "2s", "2s", "2s"}}))
	r.trust(e.subscribe(topics.Subscription{ID: "flaky", URL: r.url("flaky"), EventTypes: []string{"*"}, Enabled: true,
		RetrySchedule: []string{"2s", "2s", "2s", "2s", "2s", "2s", "2s", "2s", "2s", "2s"}}))
	e.startDispatcher()
	deliverer := e.startProc(filepath.Join(dir, "deliverer"), "deliverer-a")
	retrier := e.startProc(filepath.Join(dir, "retrier"), "retrier-a")
	const n = 8
	e.publish(orderedEvents([]string{"K", "J"}, n)...)
	// K-000 failed at the ordered subscription and came back from its tier
	// (it is held) and the other K events are parked behind it; J flowed.
	// (K-000's attempts at both subscriptions count two at once, within
	// milliseconds of the start: the kill then came before the key was
	// ever held.)
	wait(t, 60*time.Second, "J delivered to both subscriptions while K is held", func() bool {
		ordered := 0
		for _, q := range r.attempts("K-000") {
			if q.Sub == "ordered" {
				ordered++
			}
		}
		return r.count() >= 2*n && ordered >= 2
	})
	if err := deliverer.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := retrier.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-deliverer.Done()
	<-retrier.Done()
	failK.Store(false)
	e.startProc(filepath.Join(dir, "deliverer"), "deliverer-b")
	e.startProc(filepath.Join(dir, "retrier"), "retrier-b")
	wait(t, 90*time.Second, "every event at both subscriptions", func() bool {
		p := r.pairs()
		for _, k := range []string{"K", "J"} {
			for i := range n {
				id := fmt.Sprintf("%s-%03d", k, i)
				if p["ordered/"+id] == 0 || p["flaky/"+id] == 0 {
					return false
				}
			}
		}
		return true
	})
	checkKeyOrder(t, r, "ordered", "K")
	for i := range n {
		for _, sub := range []string{"ordered", "flaky"} {
			checkNotEarly(t, e.attemptsThroughSuccess(sub, fmt.Sprintf("K-%03d", i)))
		}
	}
	r.checkSignatures(t)
}

// TestOrderedDeadLetteredHeadReleasesKey: when the failing head of an
// ordered key is dead-lettered (J's with a 400 at once, K's once its
// schedule is exhausted), the key's later events go out, in publish order,
// and none of them before its head was given up on; the heads are in dlq.
func TestOrderedDeadLetteredHeadReleasesKey(t *testing.T) {
	e := newEnv(t)
	r := newReceiver(t)
	r.answer(func(q request, _ http.ResponseWriter) int {
		switch q.ID {
		case "K-000":
			return http.StatusServiceUnavailable
		case "J-000":
			return http.StatusBadRequest
		}
		return http.StatusNoContent
	})
	r.trust(e.subscribe(topics.Subscription{ID: "ordered", URL: r.url("ordered"), EventTypes: []string{"*"}, Enabled: true,
		Ordering: topics.OrderingKey, RetrySchedule: []string{"1s", "1s"}}))
	e.startDispatcher()
	e.startDeliverer()
	e.startRetrier()
	const n = 5
	e.publish(orderedEvents([]string{"K", "J"}, n)...)
	wait(t, 60*time.Second, "every event after the heads", func() bool { return r.count() == 2*(n-1) })

	if got := len(r.attempts("K-000")); got != 3 {
		t.Errorf("K-000 attempted %d times, want 3 (a schedule of two retries)", got)
	}
	if got := len(r.attempts("J-000")); got != 1 {
		t.Errorf("J-000 attempted %d times, want 1 (a 400 is not retried)", got)
	}
	for _, k := range []string{"K", "J"} {
		head := r.attempts(k + "-000")
		givenUp := head[len(head)-1].At
		prev := givenUp
		for i := 1; i < n; i++ {
			id := fmt.Sprintf("%s-%03d", k, i)
			as := r.attempts(id)
			if len(as) != 1 {
				t.Fatalf("%s attempted %d times, want once", id, len(as))
			}
			if as[0].At.Before(prev) {
				t.Errorf("%s attempted at %v, before %s (%v)", id, as[0].At.Format(time.StampMicro), fmt.Sprintf("%s-%03d", k, i-1), prev.Format(time.StampMicro))
			}
			prev = as[0].At
		}
	}
	e.consume(e.names.DLQ(), 30*time.Second, func(recs []*kgo.Record) bool {
		dead := map[string]string{}
		for _, rec := range recs {
			if dl, err := topics.DecodeDeadLetter(rec.Value); err == nil {
				dead[dl.Delivery.EventID] = dl.FailureCategory
			}
		}
		return dead["K-000"] == topics.FailureExhausted && dead["J-000"] == topics.FailurePermanent4xx
	})
	r.checkSignatures(t)
}
