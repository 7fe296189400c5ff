package deliverer

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/kafka"
	"github.com/hookpipe/hookpipe/topics"
)

// TestUnsettledRequestsBounded (invariant 1, ADR 0029): whatever the commit
// interval, a request is sent only while fewer than MaxInFlight requests
// are made whose records no commit covers yet, so a crash at any moment
// repeats at most MaxInFlight requests. With a one-hour interval every
// request checks the group's commits as it arrives; without the bound the
// first commit would come after an hour and the fifth request already be
// one too many. All 40 arrive: waiting requests have the commit come
// early.
func TestUnsettledRequestsBounded(t *testing.T) {
	t.Parallel()
	const inFlight, n = 4, 40
	h := newHarness(t, nil)
	start := map[int32]int64{} // the harness's topics are its own
	var mu sync.Mutex
	made, worst := 0, 0
	rc := newReceiver(t, func(_ http.ResponseWriter, _ *http.Request, _ []byte) {
		mu.Lock()
		made++
		sent := made
		mu.Unlock()
		covered, ok := h.covered(start)
		mu.Lock()
		defer mu.Unlock()
		if !ok {
			worst = max(worst, sent) // commits unreadable: counted as none
			return
		}
		worst = max(worst, sent-covered)
	})
	h.putSub(newSub(t, "sub_a", rc.url()))
	h.putSub(newSub(t, "sub_b", rc.url()))
	var ds []topics.Delivery
	for _, id := range ids("evt", n/2) {
		ds = append(ds, newDelivery("sub_a", id), newDelivery("sub_b", id))
	}
	h.deliver(ds...)
	for p := range h.ends(h.names.Deliveries()) {
		start[p] = 0
	}
	h.start(map[string]string{
		"WEBHOOKS_DELIVERER_MAX_IN_FLIGHT":        "4",
		"WEBHOOKS_DELIVERER_COMMIT_INTERVAL":      "1h",
		"WEBHOOKS_DELIVERER_MAX_PER_SUBSCRIPTION": "4",
	})
	waitFor(t, 30*time.Second, "every delivery made", func() bool { return rc.count() >= n })
	mu.Lock()
	defer mu.Unlock()
	if worst > inFlight {
		t.Fatalf("a request was made with %d requests not covered by a commit, want at most %d", worst, inFlight)
	}
}

// covered counts the records of the deliveries topic, from start, that the
// group's commit covers: below the watermark or in a finished run.
func (h *harness) covered(start map[int32]int64) (int, bool) {
	offs, err := h.adm.FetchOffsets(testCtx(h.t, 10*time.Second), topics.GroupDeliverer)
	if err != nil {
		return 0, false
	}
	n := 0
	for p, from := range start {
		o, ok := offs.Lookup(h.names.Deliveries(), p)
		if !ok || o.Err != nil || o.At < from {
			continue
		}
		n += int(o.At - from)
		for _, r := range kafka.FinishedAbove(o.Metadata, o.At) {
			n += int(r.To - r.From + 1)
		}
	}
	return n, true
}
