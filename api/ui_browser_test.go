package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/runtime/testkit/browsertest"
)

// TestDashboardInBrowser: in a real browser, an operator signs in, adds an
// endpoint (its secret shown once), sends it a test event and sees the
// answer, redrives two selected dead letters, then all the others,
// watching the progress bar reach 100 %; a portal link shows the tenant its own endpoint, and another
// tenant's, reached by editing the URL, is not found. Every page keeps to
// its Content-Security-Policy, also at 360 px wide.
func TestDashboardInBrowser(t *testing.T) {
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"received":true}`))
	}))
	t.Cleanup(endpoint.Close)
	ctx := browsertest.New(t, "assets/dist")
	c := newCluster(t)
	r := c.loopbackReplica()
	var theirs service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"tenant": "globex", "url": endpoint.URL + "/g",
		"event_types": []string{"*"}}, &theirs)
	base := r.srv.URL

	browsertest.Do(ctx, t, "signing in",
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="key"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="key"]`), adminKey),
		chromedp.Submit(chromedp.CSS(`input[name="key"]`)),
		// The sign-in page has no navigation: this waits for the next page.
		chromedp.WaitVisible(chromedp.CSS(`header nav`)),
	)
	if h := browsertest.Text(ctx, t, "main h1"); h != "Overview" {
		t.Fatalf("after signing in: %q, want the overview", h)
	}
	browsertest.Screenshot(ctx, t, "ui-first-sign-in")
	browsertest.NoCSPViolations(ctx, t, "overview")

	browsertest.Do(ctx, t, "adding an endpoint",
		chromedp.Navigate(base+"/ui/subscriptions"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="url"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="url"]`), endpoint.URL+"/hooks"),
		chromedp.SendKeys(chromedp.CSS(`input[name="tenant"]`), "acme"),
		chromedp.Submit(chromedp.CSS(`input[name="url"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	if f := browsertest.Text(ctx, t, ".flash"); !strings.Contains(f, "whsec_") {
		t.Fatalf("after adding: %q, want the secret shown once", f)
	}
	id := strings.TrimPrefix(browsertest.Text(ctx, t, "main h1"), "Endpoint ")

	browsertest.Do(ctx, t, "sending a test event", chromedp.Click(chromedp.CSS(`#test-send`)), chromedp.WaitVisible(chromedp.CSS(`#test-answer`)))
	if a := browsertest.Text(ctx, t, "#test-result"); !strings.Contains(a, "delivered") || !strings.Contains(a, "HTTP 200") || !strings.Contains(a, `{"received":true}`) {
		t.Fatalf("test-send shows %q, want delivered, 200 and the answer's body", a)
	}
	browsertest.Screenshot(ctx, t, "ui-subscription")
	browsertest.NoCSPViolations(ctx, t, "endpoint page")

	c.deadLetters(30, "dead", id, "acme")
	browsertest.Do(ctx, t, "redriving the dead letters",
		chromedp.Navigate(base+"/ui/dlq?subscription_id="+id),
		chromedp.WaitVisible(chromedp.CSS(`#redrive`)),
	)
	if m := browsertest.Text(ctx, t, "#dlq-matched"); m != "30" {
		t.Fatalf("%s dead letters match, want 30", m)
	}
	browsertest.Do(ctx, t, "redriving two selected dead letters",
		chromedp.Click(chromedp.CSS(`tbody tr:nth-child(2) input[name="dl"]`)),
		chromedp.Click(chromedp.CSS(`tbody tr:nth-child(5) input[name="dl"]`)),
		chromedp.Click(chromedp.CSS(`#redrive-selected`)),
		chromedp.WaitVisible(chromedp.CSS(`#op-percent`)),
	)
	testkit.WaitEvery(t, 100*time.Millisecond, 60*time.Second, "the selected redrive done", func() bool {
		return browsertest.Polled(ctx, t, "#op-state") == "done"
	})
	if p := browsertest.Text(ctx, t, "#progress"); !strings.Contains(p, "2 sent") {
		t.Fatalf("the selected redrive: %q, want 2 sent", p)
	}
	browsertest.Do(ctx, t, "the dead letters left",
		chromedp.Navigate(base+"/ui/dlq?subscription_id="+id),
		chromedp.WaitVisible(chromedp.CSS(`#redrive`)),
	)
	if m := browsertest.Text(ctx, t, "#dlq-matched"); m != "28" {
		t.Fatalf("%s dead letters match after redriving two, want 28", m)
	}
	browsertest.Do(ctx, t, "starting the redrive",
		chromedp.SetValue(chromedp.CSS(`input[name="rate"]`), "10"),
		chromedp.Click(chromedp.CSS(`#redrive`)),
		chromedp.WaitVisible(chromedp.CSS(`#op-percent`)),
	)
	var seen []string
	testkit.WaitEvery(t, 100*time.Millisecond, 60*time.Second, "the progress bar at 100 %", func() bool {
		p := browsertest.Polled(ctx, t, "#op-percent")
		if len(seen) == 0 || seen[len(seen)-1] != p {
			seen = append(seen, p)
		}
		return p == "100.0 %"
	})
	if len(seen) < 3 {
		t.Errorf("the progress bar went %v: want it seen on its way, not only done", seen)
	}
	if s := browsertest.Text(ctx, t, "#op-state"); s != "done" {
		t.Fatalf("operation %s at 100 %%", s)
	}
	browsertest.Screenshot(ctx, t, "ui-redrive")
	browsertest.NoCSPViolations(ctx, t, "operation page")

	var link portalSessionOutput
	r.must(http.StatusCreated, "POST", "/v1/portal-sessions", adminKey, map[string]any{"tenant": "acme"}, &link.Body)
	browsertest.Do(ctx, t, "opening the portal at 360 px",
		chromedp.EmulateViewport(360, 740),
		chromedp.Navigate(base+link.Body.URL),
		chromedp.WaitVisible(chromedp.CSS(`main h1`)),
	)
	body := browsertest.Text(ctx, t, "main")
	if !strings.Contains(body, id) || strings.Contains(body, theirs.ID) {
		t.Fatalf("the portal shows %q: want acme's %s, not globex's %s", body, id, theirs.ID)
	}
	browsertest.Screenshot(ctx, t, "portal")
	browsertest.NoCSPViolations(ctx, t, "portal")
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil || width > 360 {
		t.Errorf("the portal is %d px wide at a 360 px viewport (%v)", width, err)
	}
	portalBase := strings.TrimSuffix(link.Body.URL, "/")
	browsertest.Do(ctx, t, "editing the URL to another tenant's endpoint",
		chromedp.Navigate(base+portalBase+"/subscriptions/"+theirs.ID),
		chromedp.WaitReady(chromedp.CSS(`body`)),
	)
	if b := browsertest.Text(ctx, t, "body"); !strings.Contains(b, "not found") || strings.Contains(b, endpoint.URL+"/g") {
		t.Fatalf("globex's endpoint in acme's portal: %q", b)
	}
}

// TestEventCatalogInBrowser: in a real browser, a tenant opens the
// portal's event types and a type's schema table, adds an endpoint
// ticking that type and test-sends its example; an admin's breaking change
// to the type shows every reason and is saved only after "save anyway".
// Every page keeps to its Content-Security-Policy.
func TestEventCatalogInBrowser(t *testing.T) {
	got := make(chan string, 10)
	endpoint := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
	}))
	t.Cleanup(endpoint.Close)
	ctx := browsertest.New(t, "assets/dist")
	c := newCluster(t)
	r := c.loopbackReplica()
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "order.placed", "description": "An order was placed.",
		"schema": json.RawMessage(shopSchema), "examples": []any{map[string]any{"id": "ord_1", "lines": []any{map[string]any{"sku": "X"}}}}}, nil)
	r.must(http.StatusCreated, "POST", "/v1/event-types", adminKey, map[string]any{"name": "invoice.paid"}, nil)
	base := r.srv.URL
	portal := base + r.portalLink("acme")
	// shows waits until the element sel has want in its text, read afresh
	// each time: a page just loaded may still swap the document under the
	// nodes chromedp found.
	shows := func(sel, want string) {
		t.Helper()
		testkit.WaitEvery(t, 50*time.Millisecond, 30*time.Second, sel+" showing "+want, func() bool {
			return strings.Contains(browsertest.Polled(ctx, t, sel), want)
		})
	}

	browsertest.Do(ctx, t, "opening the portal's event types",
		chromedp.Navigate(portal+"/event-types"),
		chromedp.WaitVisible(chromedp.CSS(`#event-types`)),
		chromedp.Click(chromedp.CSS(`a[href$="/event-types/order.placed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#schema`)),
	)
	shows("#schema tbody tr:nth-child(4)", "customer.email")
	shows("#schema tbody tr:nth-child(4)", "format: email")
	shows("pre.example", "\"sku\": \"X\"")
	browsertest.Screenshot(ctx, t, "portal-event-type")
	browsertest.NoCSPViolations(ctx, t, "the portal's event type")

	browsertest.Do(ctx, t, "adding an endpoint ticking a catalog type",
		chromedp.Navigate(portal+"/subscriptions"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="url"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="url"]`), endpoint.URL+"/hooks"),
		chromedp.Click(chromedp.CSS(`input[name="event_type"][value="order.placed"]`)),
	)
	browsertest.Screenshot(ctx, t, "portal-add-endpoint")
	browsertest.Do(ctx, t, "adding the endpoint",
		chromedp.Click(chromedp.CSS(`form[action$="/subscriptions"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	shows("#sub-event-types", "order.placed")
	browsertest.Do(ctx, t, "test-sending the type's example",
		chromedp.SetValue(chromedp.CSS(`#test-example`), "order.placed#0"),
		chromedp.Click(chromedp.CSS(`#test-send`)),
		chromedp.WaitVisible(chromedp.CSS(`#test-answer`)),
	)
	// The answer shown, the endpoint had the request.
	select {
	case body := <-got:
		if !strings.Contains(body, `"type":"order.placed"`) || !strings.Contains(body, `"id":"ord_1"`) {
			t.Fatalf("the endpoint got %s, want the example", body)
		}
	default:
		t.Fatalf("test-send answered %q, and the endpoint got nothing", browsertest.Polled(ctx, t, "#test-result"))
	}
	browsertest.NoCSPViolations(ctx, t, "the portal's endpoint")

	browsertest.Do(ctx, t, "signing in",
		chromedp.Navigate(base+"/ui/login"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="key"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="key"]`), adminKey),
		chromedp.Submit(chromedp.CSS(`input[name="key"]`)),
		chromedp.WaitVisible(chromedp.CSS(`header nav`)),
	)
	stricter := strings.Replace(shopSchema, `"required": ["id"]`, `"required": ["id", "status"]`, 1)
	browsertest.Do(ctx, t, "a breaking change",
		chromedp.Navigate(base+"/ui/event-types/order.placed"),
		chromedp.WaitVisible(chromedp.CSS(`textarea[name="schema"]`)),
		chromedp.SetValue(chromedp.CSS(`textarea[name="schema"]`), stricter),
		chromedp.SetValue(chromedp.CSS(`textarea[name="examples"]`), `[{"id": "ord_1", "status": "paid"}]`),
		chromedp.Click(chromedp.CSS(`#save-type`)),
		chromedp.WaitVisible(chromedp.CSS(`#breaking`)),
	)
	shows("#breaking ul", `property "status" is now required`)
	var et service.EventType
	r.must(http.StatusOK, "GET", "/v1/event-types/order.placed", adminKey, nil, &et)
	if et.Version != 1 {
		t.Fatalf("version %d before saving anyway, want 1", et.Version)
	}
	browsertest.Screenshot(ctx, t, "ui-event-type-breaking")
	browsertest.NoCSPViolations(ctx, t, "the breaking change")
	browsertest.Do(ctx, t, "saving anyway",
		chromedp.Click(chromedp.CSS(`#force`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	shows(".flash", "Saved as version 2.")
	r.must(http.StatusOK, "GET", "/v1/event-types/order.placed", adminKey, nil, &et)
	if et.Version != 2 || !strings.Contains(string(et.Schema), `"status"]`) {
		t.Fatalf("after saving anyway: version %d, schema %s", et.Version, et.Schema)
	}
}

// TestPortalKafkaDestinationInBrowser: in a real browser, a tenant adds an
// endpoint in the portal choosing "Kafka topic" (the HTTP URL's field goes
// away, the brokers and topic come), saves it, and its page shows the kind
// and the address; the edit form shows the kind's fields filled in (not
// the password), and a test event lands on the customer's topic. Every
// page keeps to its Content-Security-Policy.
func TestPortalKafkaDestinationInBrowser(t *testing.T) {
	customer, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(customer.Close)
	ctx := browsertest.New(t, "assets/dist")
	c := newCluster(t)
	r := c.loopbackReplica()
	portal := r.srv.URL + r.portalLink("acme")
	brokers := strings.Join(customer.ListenAddrs(), ",")
	visible := func(sel string) bool {
		return browsertest.Eval[bool](ctx, t, fmt.Sprintf(`document.querySelector(%q).offsetParent !== null`, sel))
	}

	browsertest.Do(ctx, t, "opening the portal's endpoints",
		chromedp.Navigate(portal+"/subscriptions"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="url"]`)),
	)
	testkit.WaitFor(t, 10*time.Second, "the Kafka fields to hide before Kafka is chosen", func() bool {
		return !visible(`input[name="kafka.brokers"]`)
	})
	browsertest.Do(ctx, t, "choosing a Kafka topic",
		chromedp.SendKeys(chromedp.CSS(`#destination`), "Kafka"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="kafka.brokers"]`)),
	)
	testkit.WaitFor(t, 10*time.Second, "the other kinds' fields to hide with Kafka chosen", func() bool {
		return !visible(`input[name="url"]`) && !visible(`input[name="nats.subject"]`)
	})
	browsertest.Do(ctx, t, "filling in the Kafka topic",
		chromedp.SendKeys(chromedp.CSS(`input[name="kafka.brokers"]`), brokers),
		chromedp.SendKeys(chromedp.CSS(`input[name="kafka.topic"]`), "t"),
	)
	browsertest.Screenshot(ctx, t, "portal-add-kafka")
	browsertest.NoCSPViolations(ctx, t, "the portal's add form")
	browsertest.Do(ctx, t, "saving",
		chromedp.Click(chromedp.CSS(`form[action$="/subscriptions"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	if kind, addr := browsertest.Text(ctx, t, "#sub-kind"), browsertest.Text(ctx, t, "#sub-address"); kind != "Kafka topic" || addr != "kafka://"+brokers+"/t" {
		t.Fatalf("the endpoint page shows %q at %q, want Kafka topic at kafka://%s/t", kind, addr, brokers)
	}
	// The page's script shows the chosen kind's fields once it has run.
	testkit.WaitFor(t, 10*time.Second, "the edit form to show the Kafka fields only", func() bool {
		return visible(`input[name="kafka.brokers"]`) && !visible(`input[name="url"]`)
	})
	if got := browsertest.Eval[string](ctx, t, `document.querySelector('input[name="kafka.brokers"]').value + " " +
		document.querySelector('input[name="kafka.topic"]').value + " [" + document.querySelector('input[name="kafka.password"]').value + "]"`); got != brokers+" t []" {
		t.Fatalf("the edit form has %q, want the brokers, the topic and no password", got)
	}

	browsertest.Do(ctx, t, "sending a test event", chromedp.Click(chromedp.CSS(`#test-send`)), chromedp.WaitVisible(chromedp.CSS(`#test-answer`)))
	if a := browsertest.Text(ctx, t, "#test-result"); !strings.Contains(a, "delivered") {
		t.Fatalf("test-send to the Kafka topic shows %q", a)
	}
	browsertest.Screenshot(ctx, t, "portal-kafka-endpoint")
	browsertest.NoCSPViolations(ctx, t, "the portal's Kafka endpoint")
	reader, err := kgo.NewClient(kgo.SeedBrokers(customer.ListenAddrs()...), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reader.Close)
	fs := reader.PollFetches(testkit.Ctx(t, 30*time.Second))
	if err := fs.Err0(); err != nil || fs.NumRecords() != 1 {
		t.Fatalf("the customer's topic has %d records (%v), want the test event", fs.NumRecords(), err)
	}
}

// TestPortalAlertChannelInBrowser: in a real browser, a tenant adds a
// Slack channel in the portal, opens it from the list, finds its settings
// filled in (the URL masked, not in the field), changes its types and
// window leaving the URL empty, and the list shows the change while a
// test message still reaches the URL kept. Every page keeps to its
// Content-Security-Policy, at 360 px wide too.
func TestPortalAlertChannelInBrowser(t *testing.T) {
	got := make(chan string, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.URL.Path }))
	t.Cleanup(hook.Close)
	ctx := browsertest.New(t, "assets/dist")
	c := newCluster(t)
	r := c.loopbackReplica()
	portal := r.srv.URL + r.portalLink("acme")

	browsertest.Do(ctx, t, "adding a Slack channel",
		chromedp.EmulateViewport(360, 740),
		chromedp.Navigate(portal+"/alerts"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="url"]`)),
		chromedp.SetValue(chromedp.CSS(`select[name="kind"]`), "slack"),
		chromedp.SendKeys(chromedp.CSS(`input[name="url"]`), hook.URL+"/services/T0/B0/s3cret"),
		chromedp.Submit(chromedp.CSS(`input[name="url"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	browsertest.Do(ctx, t, "opening it",
		chromedp.Click(chromedp.CSS(`tbody a[href*="/alerts/ach_"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#alert-form`)),
	)
	form := browsertest.Eval[string](ctx, t, `[...document.querySelectorAll('#alert-form select, #alert-form input:not([type=hidden])')].map(e => e.name + "=" + e.value).join(" ")`)
	if form != "kind=slack url= types= digest_minutes=5" || strings.Contains(browsertest.Text(ctx, t, "main"), "s3cret") ||
		!strings.Contains(browsertest.Text(ctx, t, "main"), hook.URL+"/…") {
		t.Fatalf("the channel's form: %q; page %q", form, browsertest.Text(ctx, t, "main"))
	}
	browsertest.Screenshot(ctx, t, "portal-alert-channel")
	browsertest.NoCSPViolations(ctx, t, "the portal's alert channel")
	width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	if err != nil || width > 360 {
		t.Errorf("the alert channel's page is %d px wide at a 360 px viewport (%v)", width, err)
	}
	browsertest.Do(ctx, t, "changing its types and window",
		chromedp.SendKeys(chromedp.CSS(`input[name="types"]`), "webhook.endpoint.disabled"),
		chromedp.SetValue(chromedp.CSS(`input[name="digest_minutes"]`), "1.5"),
		chromedp.Click(chromedp.CSS(`#save-alert`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	if row := browsertest.Text(ctx, t, "tbody tr"); !strings.Contains(row, "webhook.endpoint.disabled") || !strings.Contains(row, "90000 ms") {
		t.Fatalf("the list after the change: %q", row)
	}
	browsertest.Do(ctx, t, "testing it",
		chromedp.Click(chromedp.CSS(`form[action$="/test"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	select {
	case p := <-got:
		if p != "/services/T0/B0/s3cret" {
			t.Errorf("the test message went to %s, want the URL kept", p)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("no test message; the page says %q", browsertest.Text(ctx, t, "main"))
	}
}
