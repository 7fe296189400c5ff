package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookpipe/hookpipe/api/internal/service"
)

// TestTransformations: a subscription's transformation is compiled when
// written (422 naming the field), shown, and can be tried on a sample event,
// which answers the request it would make or why it fails.
func TestTransformations(t *testing.T) {
	t.Parallel()
	r := newCluster(t).replica()
	const script = `function handler(w) { w.payload = {t: w.type, cents: w.data.amount * 100}; w.headers["x-src"] = "hp"; w.path = "/in"; return w; }`
	var sub service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey,
		map[string]any{"url": "https://example.com/hooks", "event_types": []string{"*"}, "transformation": script}, &sub)
	if sub.Transformation != script {
		t.Fatalf("created: %+v", sub)
	}
	var p problem
	r.must(http.StatusUnprocessableEntity, "PATCH", "/v1/subscriptions/"+sub.ID, adminKey, map[string]any{"transformation": "function nope( {"}, &p)
	if len(p.Errors) == 0 || p.Errors[0].Location != "body.transformation" {
		t.Fatalf("a script that does not compile: %+v", p)
	}

	var out struct {
		OK      bool              `json:"ok"`
		Cancel  bool              `json:"cancel"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Body    string            `json:"body"`
		Error   string            `json:"error"`
	}
	r.must(http.StatusOK, "POST", "/v1/transformations/test", adminKey,
		map[string]any{"script": script, "type": "order.paid", "data": map[string]any{"amount": 12}, "url": "https://example.com/hooks"}, &out)
	if !out.OK || out.Body != `{"t":"order.paid","cents":1200}` || out.URL != "https://example.com/in" || out.Headers["X-Src"] != "hp" {
		t.Fatalf("test run: %+v", out)
	}
	out.OK, out.Error = false, ""
	r.must(http.StatusOK, "POST", "/v1/transformations/test", adminKey,
		map[string]any{"script": `function handler(w) { throw new Error("refused " + w.type); }`}, &out)
	if out.OK || !strings.Contains(out.Error, "refused webhook.test") {
		t.Fatalf("a throwing script: %+v", out)
	}
	r.must(http.StatusUnprocessableEntity, "POST", "/v1/transformations/test", adminKey, map[string]any{"script": "return 1"}, &p)
	if p.Errors[0].Location != "body.script" {
		t.Fatalf("a script without handler: %+v", p)
	}
}
