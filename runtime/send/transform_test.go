package send

import (
	"net/http"
	"testing"
	"time"

	"github.com/hookpipe/hookpipe/runtime/send/classify"
	"github.com/hookpipe/hookpipe/topics"
)

// TestTransformation: a subscription's transformation shapes the request
// (body, headers, method, path), which is signed as sent; a cancel sends
// nothing and is skipped; a script that throws or loops is dead at once
// with category transformation.
func TestTransformation(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	s := New(loopback, Options{MaxInFlight: 4, MaxResponseBytes: 1024})
	t.Cleanup(s.Close)
	secrets := map[string]string{}
	for _, tc := range []struct {
		name     string
		script   string
		action   classify.Action
		category string
	}{
		{"shaped", `function handler(w) {
			w.payload = {kind: w.type, amount: w.data.n * 100};
			w.headers["x-shaped"] = "yes";
			w.method = "PUT";
			w.path = "/v2/hooks?src=hookpipe";
			return w;
		}`, classify.Success, ""},
		{"cancelled", `function handler(w) { w.cancel = true; return w; }`, classify.Skip, topics.FailureCancelled},
		{"throws", `function handler(w) { throw new Error("no " + w.type); }`, classify.Dead, topics.FailureTransform},
		{"loops", `function handler(w) { for (;;) {} }`, classify.Dead, topics.FailureTransform},
		{"garbage", `function handler(w) { return 42; }`, classify.Dead, topics.FailureTransform},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := newSub(t, "sub_"+tc.name, rc.url())
			sub.Transformation = tc.script
			secrets[tc.name] = sub.Secret
			d := newDelivery(sub.ID, "evt_"+tc.name)
			resp, err := s.Send(testCtx(t, 30*time.Second), &sub, &d, nil)
			if res := classify.For(&sub, resp.Status, err); res.Action != tc.action || res.Category != tc.category {
				t.Fatalf("got %v/%s (%v), want %v/%s", res.Action, res.Category, err, tc.action, tc.category)
			}
		})
	}
	got := rc.waitRequest(t, "evt_shaped")
	if string(got.body) != `{"kind":"order.created","amount":100}` || got.header.Get("X-Shaped") != "yes" ||
		got.method != http.MethodPut || got.uri != "/v2/hooks?src=hookpipe" {
		t.Errorf("shaped request: %s %s %s %v", got.method, got.uri, got.body, got.header)
	}
	verify(t, got.header, got.body, secrets["shaped"])
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, r := range rc.reqs {
		if id := r.header.Get("webhook-id"); id != "evt_shaped" {
			t.Errorf("a request for %s reached the endpoint: only the shaped one should", id)
		}
	}
}
