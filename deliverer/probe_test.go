package deliverer

import (
	"net/http"
	"testing"
)

// TestAttemptCarriesResponseSample: an attempt record holds the first
// bytes of the endpoint's answer, with the subscription's header values
// redacted.
func TestAttemptCarriesResponseSample(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("down for maintenance; you sent " + r.Header.Get("X-Token")))
	})
	sub := newSub(t, "sub_s", rc.url())
	sub.Headers = map[string]string{"X-Token": "s3cret-token"}
	h.putSub(sub)
	h.start(nil)
	h.deliver(newDelivery(sub.ID, "evt_sample"))
	if a := h.waitAttempt("evt_sample"); a.ResponseSample != "down for maintenance; you sent [redacted]" || a.HTTPStatus != 503 {
		t.Fatalf("attempt %+v", a)
	}
}
