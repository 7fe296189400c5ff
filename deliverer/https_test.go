package deliverer

import (
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

// TestRequireHTTPS: with WEBHOOKS_REQUIRE_HTTPS an http:// endpoint is not
// called, and its delivery is dead-lettered at once (retrying cannot help).
func TestRequireHTTPS(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{"WEBHOOKS_REQUIRE_HTTPS": "true"})
	rc := newReceiver(t, nil)
	s := newSub(t, "sub_plain", rc.url())
	h.putSub(s)
	h.start(nil)
	d := newDelivery(s.ID, "evt_plain")
	h.deliver(d)
	a := h.waitAttempt(d.EventID)
	if a.Outcome != topics.OutcomeDead || a.FailureCategory != topics.FailureBlockedAddr {
		t.Errorf("attempt: outcome %q category %q, want dead, %s", a.Outcome, a.FailureCategory, topics.FailureBlockedAddr)
	}
	if dl, err := topics.DecodeDeadLetter(h.waitRecord(h.names.DLQ(), d.EventID).Value); err != nil || dl.FailureCategory != topics.FailureBlockedAddr {
		t.Errorf("dead letter %+v, %v", dl, err)
	}
	if n := rc.count(); n != 0 {
		t.Errorf("the http endpoint got %d requests", n)
	}
}
