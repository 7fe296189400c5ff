package api

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookpipe/hookpipe/deliverer"
)

// TestTestSend: test-send posts a signed webhook.test event to the
// endpoint now and answers what it did; the SSRF guard applies as in the
// deliverer; another tenant's subscription answers 404.
func TestTestSend(t *testing.T) {
	t.Parallel()
	var verified, got string
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = r.Header.Get("webhook-id")
		wh, err := standardwebhooks.NewWebhook(verified)
		if err == nil {
			err = wh.Verify(body, r.Header)
		}
		if err != nil || !strings.Contains(string(body), `"type":"webhook.test"`) {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(endpoint.Close)
	c := newCluster(t)
	env := maps.Clone(c.env)
	env[deliverer.EnvAllowCIDRs] = "127.0.0.0/8"
	r := c.replicaWith(env)
	var sub Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"url": endpoint.URL + "/hooks", "event_types": []string{"*"}, "tenant": "acme"}, &sub)
	verified = sub.Secret
	var res struct {
		EventID         string  `json:"event_id"`
		FailureCategory string  `json:"failure_category"`
		ResponseBody    string  `json:"response_body"`
		Delivered       bool    `json:"delivered"`
		Status          int     `json:"status"`
		DurationMS      float64 `json:"duration_ms"`
	}
	r.must(http.StatusOK, "POST", "/v1/subscriptions/"+sub.ID+"/test", adminKey, nil, &res)
	if !res.Delivered || res.Status != http.StatusAccepted || res.ResponseBody != `{"ok":true}` || res.DurationMS <= 0 || res.EventID != got {
		t.Fatalf("test-send answered %+v (the endpoint saw %q)", res, got)
	}
	other := r.tenantKey("globex")
	if a := r.do("POST", "/v1/subscriptions/"+sub.ID+"/test", other, nil); a.status != http.StatusNotFound {
		t.Fatalf("test-send on another tenant's subscription: %d, want 404", a.status)
	}

	guarded := c.replica() // no allowlist: loopback is refused
	res = struct {
		EventID         string  `json:"event_id"`
		FailureCategory string  `json:"failure_category"`
		ResponseBody    string  `json:"response_body"`
		Delivered       bool    `json:"delivered"`
		Status          int     `json:"status"`
		DurationMS      float64 `json:"duration_ms"`
	}{}
	guarded.must(http.StatusOK, "POST", "/v1/subscriptions/"+sub.ID+"/test", adminKey, nil, &res)
	if res.Delivered || res.Status != 0 || res.FailureCategory != "blocked_address" {
		t.Fatalf("test-send to a refused address answered %+v", res)
	}
}
