package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

// TestTestSend: test-send posts a signed webhook.test event to the
// endpoint now and answers what it did; the SSRF guard applies as in the
// deliverer; another tenant's subscription answers 404.
func TestTestSend(t *testing.T) {
	t.Parallel()
	var verified, got, gotBody string
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got, gotBody = r.Header.Get("webhook-id"), string(body)
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
	r := c.loopbackReplica()
	var sub service.Subscription
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
	// A catalog type's example, signed like the rest.
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "webhook.test", "schema": map[string]any{"type": "object"},
		"examples": []any{map[string]any{"n": 0}, map[string]any{"n": 1, "type": "example"}}}, nil)
	r.must(http.StatusOK, "POST", "/v1/subscriptions/"+sub.ID+"/test", adminKey, map[string]any{"event_type": "webhook.test", "example": 1}, &res)
	if !res.Delivered || !strings.Contains(gotBody, `"data":{"n":1,"type":"example"}`) {
		t.Fatalf("test-send of an example answered %+v; the endpoint saw %s", res, gotBody)
	}
	for body, location := range map[string]string{`{"event_type": "nope.nope"}`: "body.event_type", `{"event_type": "webhook.test", "example": 2}`: "body.example"} {
		var p problem
		r.must(http.StatusUnprocessableEntity, "POST", "/v1/subscriptions/"+sub.ID+"/test", adminKey, body, &p)
		if len(p.Errors) != 1 || p.Errors[0].Location != location {
			t.Fatalf("test-send %s answered %+v, want %s", body, p, location)
		}
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

// TestVerifyOnCreate: with verify, a subscription is created only when its
// endpoint echoes the signed challenge; otherwise a 422 says what it
// answered, and nothing is written.
func TestVerifyOnCreate(t *testing.T) {
	t.Parallel()
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Type string `json:"type"`
			Data struct {
				Challenge string `json:"challenge"`
			} `json:"data"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &body) != nil || body.Type != "webhook.verify" || r.Header.Get("webhook-signature") == "" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/fail") {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/echo") {
			_, _ = w.Write([]byte(`{"challenge":"` + body.Data.Challenge + `"}`))
			return
		}
		_, _ = w.Write([]byte("ok, but no challenge"))
	}))
	t.Cleanup(echo.Close)
	c := newCluster(t)
	r := c.loopbackReplica()
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"id": "sub_echo", "url": echo.URL + "/echo",
		"event_types": []string{"*"}, "verify": true}, nil)
	before := len(c.records(c.names.Subscriptions()))
	for _, tc := range []struct{ path, says string }{
		{"/quiet", "without the challenge"},
		{"/fail", "answered 500"},
	} {
		a := r.do("POST", "/v1/subscriptions", adminKey, map[string]any{"url": echo.URL + tc.path, "event_types": []string{"*"}, "verify": true})
		var p problem
		a.decode(t, &p)
		if a.status != http.StatusUnprocessableEntity || len(p.Errors) == 0 || p.Errors[0].Location != "body.url" ||
			!strings.Contains(p.Errors[0].Message, tc.says) {
			t.Errorf("verify against %s: %d %s, want a 422 saying %q", tc.path, a.status, a.body, tc.says)
		}
	}
	if n := len(c.records(c.names.Subscriptions())); n != before {
		t.Errorf("%d subscriptions written by failed verifications", n-before)
	}
}
