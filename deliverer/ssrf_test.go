package deliverer

import (
	"net"
	"testing"

	"github.com/hookpipe/hookpipe/topics"
)

// TestSSRFGuard: without an allowlist the deliverer's own transport refuses
// loopback (by address, by a name resolving to it, IPv6), private and
// metadata addresses: no request arrives, and each delivery is dead-lettered
// at once as blocked_address.
func TestSSRFGuard(t *testing.T) {
	t.Parallel()
	h := newHarness(t, map[string]string{EnvAllowCIDRs: ""})
	rc := newReceiver(t, nil)
	_, port, err := net.SplitHostPort(rc.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	urls := map[string]string{
		"sub_loopback":  rc.url(),
		"sub_localhost": "http://localhost:" + port + "/hooks",
		"sub_ipv6":      "http://[::1]:" + port + "/hooks",
		"sub_private":   "http://10.1.2.3:" + port + "/hooks",
		"sub_metadata":  "http://169.254.169.254/latest/meta-data/",
		"sub_mapped":    "http://[::ffff:127.0.0.1]:" + port + "/hooks",
	}
	var dels []topics.Delivery
	for id, u := range urls {
		h.putSub(newSub(t, id, u))
		dels = append(dels, newDelivery(id, "evt_"+id))
	}
	h.start(nil)
	h.deliver(dels...)
	for _, d := range dels {
		a := h.waitAttempt(d.EventID)
		if a.Outcome != topics.OutcomeDead || a.FailureCategory != topics.FailureBlockedAddr {
			t.Errorf("%s: outcome %q category %q (%s), want dead, %s", urls[d.SubscriptionID], a.Outcome, a.FailureCategory, a.Error,
				topics.FailureBlockedAddr)
		}
	}
	if n := rc.count(); n != 0 {
		t.Errorf("the loopback endpoint got %d requests", n)
	}
}
