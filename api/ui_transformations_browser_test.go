package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/testkit/browsertest"
)

// TestPortalTransformationInBrowser: in a real browser, a tenant types a
// transformation on its endpoint's page in the portal, tries it on a
// sample event and sees the request it would make (the shaped body, the
// path the script chose), then saves it, and the script is the
// subscription's. The page keeps to its Content-Security-Policy.
func TestPortalTransformationInBrowser(t *testing.T) {
	ctx := browsertest.New(t, "assets/dist")
	r := newCluster(t).replica()
	var sub service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"tenant": "acme", "url": "https://hooks.acme.example/in",
		"event_types": []string{"order.paid"}}, &sub)
	const script = `function handler(w) { w.payload = {order: w.data.id, cents: w.data.amount * 100}; w.path = "/orders"; return w; }`

	browsertest.Do(ctx, t, "opening the endpoint's page",
		chromedp.Navigate(r.srv.URL+r.portalLink("acme")+"/subscriptions/"+sub.ID),
		chromedp.WaitVisible(chromedp.CSS(`#transformation-script`)),
	)
	if typ := browsertest.Eval[string](ctx, t, `document.querySelector("#sample-type").value`); typ != "order.paid" {
		t.Fatalf("the sample event's type is %q, want the endpoint's order.paid", typ)
	}
	browsertest.Do(ctx, t, "typing a script and trying it",
		chromedp.SendKeys(chromedp.CSS(`#transformation-script`), script),
		chromedp.SetValue(chromedp.CSS(`#sample-data`), `{"id": "ord_1", "amount": 12}`),
		chromedp.Click(chromedp.CSS(`#transformation-try`)),
		chromedp.WaitVisible(chromedp.CSS(`#transformation-result`)),
	)
	if b, u := browsertest.Text(ctx, t, "#transformation-body"), browsertest.Text(ctx, t, "#transformation-url"); b != `{"order":"ord_1","cents":1200}` ||
		u != "https://hooks.acme.example/orders" {
		t.Fatalf("trying it shows %q to %q, want the shaped body to /orders", b, u)
	}
	browsertest.Screenshot(ctx, t, "portal-transformation-try")
	browsertest.NoCSPViolations(ctx, t, "the portal's transformation try")
	if stored, _ := r.s.subs.Get(sub.ID); stored.Transformation != "" {
		t.Fatalf("trying it stored the script")
	}

	browsertest.Do(ctx, t, "saving it",
		chromedp.Click(chromedp.CSS(`#transformation-save`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	if f := browsertest.Text(ctx, t, ".flash"); !strings.Contains(f, "Transformation saved") {
		t.Fatalf("after saving: %q", f)
	}
	if stored, _ := r.s.subs.Get(sub.ID); stored.Transformation != script {
		t.Fatalf("stored %q, want the script typed", stored.Transformation)
	}
	if got := browsertest.Eval[string](ctx, t, `document.querySelector("#transformation-script").value`); got != script {
		t.Fatalf("the page shows %q after saving", got)
	}
	browsertest.NoCSPViolations(ctx, t, "the portal's endpoint page with a transformation")
}
