package api

import (
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/hookpipe/hookpipe/deliverer"
	"github.com/hookpipe/hookpipe/runtime/testkit"
)

// watchCSP records, in every page the browser opens, what the
// Content-Security-Policy refused (window.cspViolations).
var watchCSP chromedp.Action[chromedp.Void] = func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
	_, err := cdp.Call(ctx, t, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.cspViolations = []; document.addEventListener("securitypolicyviolation",
			e => window.cspViolations.push(e.violatedDirective + " " + e.blockedURI));`,
	})
	return chromedp.Void{}, err
}

// do runs steps, failing t with what.
func do(ctx context.Context, t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text is the text of the first element sel matches.
func text(ctx context.Context, t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// noCSPViolations fails t when the page broke its Content-Security-Policy.
func noCSPViolations(ctx context.Context, t *testing.T, where string) {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.cspViolations || []`))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) > 0 {
		t.Errorf("%s: the Content-Security-Policy refused %v", where, got)
	}
}

// TestDashboardInBrowser: in a real browser, an operator signs in, adds an
// endpoint (its secret shown once), sends it a test event and sees the
// answer, redrives its dead letters and watches the progress bar reach
// 100 %; a portal link shows the tenant its own endpoint, and another
// tenant's, reached by editing the URL, is not found. Every page keeps to
// its Content-Security-Policy, also at 360 px wide.
func TestDashboardInBrowser(t *testing.T) {
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"received":true}`))
	}))
	t.Cleanup(endpoint.Close)
	ctx := browser(t)
	c := newCluster(t)
	env := maps.Clone(c.env)
	env[deliverer.EnvAllowCIDRs] = "127.0.0.0/8"
	r := c.replicaWith(env)
	var theirs Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"tenant": "globex", "url": endpoint.URL + "/g",
		"event_types": []string{"*"}}, &theirs)
	base := r.srv.URL
	do(ctx, t, "watching the CSP", watchCSP)

	do(ctx, t, "signing in",
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="key"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="key"]`), adminKey),
		chromedp.Submit(chromedp.CSS(`input[name="key"]`)),
		// The sign-in page has no navigation: this waits for the next page.
		chromedp.WaitVisible(chromedp.CSS(`header nav`)),
	)
	if h := text(ctx, t, "main h1"); h != "Overview" {
		t.Fatalf("after signing in: %q, want the overview", h)
	}
	screenshot(ctx, t, "ui-overview")
	noCSPViolations(ctx, t, "overview")

	do(ctx, t, "adding an endpoint",
		chromedp.Navigate(base+"/ui/subscriptions"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="url"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="url"]`), endpoint.URL+"/hooks"),
		chromedp.SendKeys(chromedp.CSS(`input[name="tenant"]`), "acme"),
		chromedp.Submit(chromedp.CSS(`input[name="url"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	if f := text(ctx, t, ".flash"); !strings.Contains(f, "whsec_") {
		t.Fatalf("after adding: %q, want the secret shown once", f)
	}
	id := strings.TrimPrefix(text(ctx, t, "main h1"), "Endpoint ")

	do(ctx, t, "sending a test event", chromedp.Click(chromedp.CSS(`#test-send`)), chromedp.WaitVisible(chromedp.CSS(`#test-answer`)))
	if a := text(ctx, t, "#test-result"); !strings.Contains(a, "delivered") || !strings.Contains(a, "HTTP 200") || !strings.Contains(a, `{"received":true}`) {
		t.Fatalf("test-send shows %q, want delivered, 200 and the answer's body", a)
	}
	screenshot(ctx, t, "ui-subscription")
	noCSPViolations(ctx, t, "endpoint page")

	c.deadLetters(30, "dead", id, "acme")
	do(ctx, t, "redriving the dead letters",
		chromedp.Navigate(base+"/ui/dlq?subscription_id="+id),
		chromedp.WaitVisible(chromedp.CSS(`#redrive`)),
	)
	if m := text(ctx, t, "#dlq-matched"); m != "30" {
		t.Fatalf("%s dead letters match, want 30", m)
	}
	do(ctx, t, "starting the redrive",
		chromedp.SetValue(chromedp.CSS(`input[name="rate"]`), "10"),
		chromedp.Click(chromedp.CSS(`#redrive`)),
		chromedp.WaitVisible(chromedp.CSS(`#op-percent`)),
	)
	var seen []string
	testkit.WaitEvery(t, 100*time.Millisecond, 60*time.Second, "the progress bar at 100 %", func() bool {
		p := text(ctx, t, "#op-percent")
		if len(seen) == 0 || seen[len(seen)-1] != p {
			seen = append(seen, p)
		}
		return p == "100.0 %"
	})
	if len(seen) < 3 {
		t.Errorf("the progress bar went %v: want it seen on its way, not only done", seen)
	}
	if s := text(ctx, t, "#op-state"); s != "done" {
		t.Fatalf("operation %s at 100 %%", s)
	}
	screenshot(ctx, t, "ui-redrive")
	noCSPViolations(ctx, t, "operation page")

	var link portalSessionOutput
	r.must(http.StatusCreated, "POST", "/v1/portal-sessions", adminKey, map[string]any{"tenant": "acme"}, &link.Body)
	do(ctx, t, "opening the portal at 360 px",
		chromedp.EmulateViewport(360, 740),
		chromedp.Navigate(base+link.Body.URL),
		chromedp.WaitVisible(chromedp.CSS(`main h1`)),
	)
	body := text(ctx, t, "main")
	if !strings.Contains(body, id) || strings.Contains(body, theirs.ID) {
		t.Fatalf("the portal shows %q: want acme's %s, not globex's %s", body, id, theirs.ID)
	}
	screenshot(ctx, t, "portal")
	noCSPViolations(ctx, t, "portal")
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil || width > 360 {
		t.Errorf("the portal is %d px wide at a 360 px viewport (%v)", width, err)
	}
	portalBase := strings.TrimSuffix(link.Body.URL, "/")
	do(ctx, t, "editing the URL to another tenant's endpoint",
		chromedp.Navigate(base+portalBase+"/subscriptions/"+theirs.ID),
		chromedp.WaitReady(chromedp.CSS(`body`)),
	)
	if b := text(ctx, t, "body"); !strings.Contains(b, "not found") || strings.Contains(b, endpoint.URL+"/g") {
		t.Fatalf("globex's endpoint in acme's portal: %q", b)
	}
}
