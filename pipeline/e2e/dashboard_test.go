package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hookpipe/hookpipe/runtime/testkit/browsertest"
	"github.com/hookpipe/hookpipe/runtime/testkit/redistest"
	"github.com/hookpipe/hookpipe/topics"
)

// TestDashboardOverPipeline: the whole pipeline with Redis and ClickHouse
// behind the dashboard, in a real browser: events published through the
// API show in the message log, delivered with the endpoint's answer as the
// response sample; an endpoint that fails every request shows its breaker
// open and its dead letters (those exhausted before the breaker opened),
// and the endpoints their breakers and 24 h success sparklines; another
// tenant's portal neither lists a message nor shows it by URL; the overview draws its charts. Screenshots of
// each page go under .build/screenshots.
func TestDashboardOverPipeline(t *testing.T) {
	e := newEnv(t)
	url, prefix := redistest.Shared(t)
	e.withRedis(url, prefix, map[string]string{"WEBHOOKS_BREAKER_MIN_CALLS": "8", "WEBHOOKS_BREAKER_SLEEP": "10m"})
	e.vars["WEBHOOKS_API_RATE_LIMIT"] = "0" // the test polls the message log
	base := e.startAllWithClickHouse()
	r := newReceiver(t)
	r.answer(func(q request, _ http.ResponseWriter) int {
		if q.Sub == "bad" {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	r.reply("thanks from the endpoint")
	for _, id := range []string{"good", "bad"} {
		var sub struct{ ID, Secret string }
		call(t, "POST", base+"/v1/subscriptions", apiAdminKey, map[string]any{"id": id, "tenant": "acme", "url": r.url(id),
			"event_types": []string{"order.*"}, "retry_schedule": []string{"1s"}}, &sub, http.StatusCreated)
		r.trust(topics.Subscription{ID: sub.ID, Secret: sub.Secret})
	}
	var events []any
	for i := range 6 {
		events = append(events, map[string]any{"type": "order.created", "tenant": "acme", "key": fmt.Sprint(i), "data": map[string]int{"n": i}})
	}
	var ids struct{ IDs []string }
	call(t, "POST", base+"/v1/events/batch", apiAdminKey, map[string]any{"events": events}, &ids, http.StatusAccepted)
	var last []string
	defer func() {
		if t.Failed() {
			t.Logf("message statuses at the end: %v", last)
		}
	}()
	// bad's six first attempts fail, then two of their retries, which
	// exhausts them (dead) and opens bad's breaker (eight calls): the rest
	// wait behind it (pending).
	wait(t, 90*time.Second, "every event delivered to good, and bad's dead or held behind its breaker", func() bool {
		last = last[:0]
		dead := 0
		for _, id := range ids.IDs {
			m, found := message(t, base, id)
			status := map[string]string{}
			for _, d := range m.Deliveries {
				status[d.SubscriptionID] = d.Status
			}
			last = append(last, fmt.Sprint(id, status))
			if !found || status["good"] != "delivered" || (status["bad"] != "dead" && status["bad"] != "pending") {
				return false
			}
			if status["bad"] == "dead" {
				dead++
			}
		}
		return dead > 0
	})

	ctx := browsertest.New(t, "../../api/assets/dist")
	browsertest.Do(ctx, t, "signing in",
		chromedp.Navigate(base+"/ui/login"),
		chromedp.WaitVisible(chromedp.CSS(`input[name="key"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="key"]`), apiAdminKey),
		chromedp.Submit(chromedp.CSS(`input[name="key"]`)),
		chromedp.WaitVisible(chromedp.CSS(`header nav`)),
		chromedp.WaitVisible(chromedp.CSS(`#chart-outcomes .uplot`)),
		chromedp.WaitVisible(chromedp.CSS(`#chart-latency .uplot`)),
	)
	if n, p99 := browsertest.Text(ctx, t, "#requests"), browsertest.Text(ctx, t, "#p99"); n == "0" || !strings.HasSuffix(p99, " ms") {
		t.Fatalf("the overview counts %s requests, p99 %q", n, p99)
	}
	if b := browsertest.Text(ctx, t, "#breakers"); !strings.Contains(b, "bad (open)") {
		t.Errorf("breakers on the overview: %q, want bad open", b)
	}
	browsertest.Screenshot(ctx, t, "ui-overview")
	browsertest.NoCSPViolations(ctx, t, "overview")

	browsertest.Do(ctx, t, "the endpoints",
		chromedp.Navigate(base+"/ui/subscriptions"),
		chromedp.WaitVisible(chromedp.CSS(`.spark polyline`)),
	)
	if list := browsertest.Text(ctx, t, "main table"); !strings.Contains(list, "100.0 %") || !strings.Contains(list, "open") {
		t.Errorf("the endpoints: %q, want good at 100 %% and bad's breaker open", list)
	}
	browsertest.Screenshot(ctx, t, "ui-endpoints")
	browsertest.NoCSPViolations(ctx, t, "endpoints")
	browsertest.Do(ctx, t, "the message log",
		chromedp.Navigate(base+"/ui/messages?status=delivered"),
		chromedp.WaitVisible(chromedp.CSS(`main table`)),
	)
	if list := browsertest.Text(ctx, t, "main table"); !strings.Contains(list, ids.IDs[0]) || !strings.Contains(list, "good") {
		t.Fatalf("the delivered messages: %q, want %s to good", list, ids.IDs[0])
	}
	browsertest.Screenshot(ctx, t, "ui-messages")
	browsertest.Do(ctx, t, "a message",
		chromedp.Navigate(base+"/ui/messages/"+ids.IDs[0]),
		chromedp.WaitVisible(chromedp.CSS(`main h2`)),
	)
	msg := browsertest.Text(ctx, t, "main")
	for _, want := range []string{"thanks from the endpoint", `"n": 0`, "delivered"} {
		if !strings.Contains(strings.ReplaceAll(msg, `"n":0`, `"n": 0`), want) {
			t.Errorf("the message page lacks %q: %q", want, msg)
		}
	}
	browsertest.Screenshot(ctx, t, "ui-message")
	browsertest.NoCSPViolations(ctx, t, "message page")

	browsertest.Do(ctx, t, "the failing endpoint",
		chromedp.Navigate(base+"/ui/subscriptions/bad"),
		chromedp.WaitVisible(chromedp.CSS(`#chart-outcomes .uplot`)),
	)
	if page := browsertest.Text(ctx, t, "main"); !strings.Contains(page, "open") {
		t.Errorf("the failing endpoint's page does not show its breaker open: %q", page)
	}
	browsertest.Screenshot(ctx, t, "ui-failing-endpoint")
	browsertest.Do(ctx, t, "the dead letters",
		chromedp.Navigate(base+"/ui/dlq?subscription_id=bad"),
		chromedp.WaitVisible(chromedp.CSS(`#dlq-matched`)),
	)
	if n := browsertest.Text(ctx, t, "#dlq-matched"); n == "0" {
		t.Errorf("no dead letters of the failing endpoint on the dead-letter page")
	}
	browsertest.Screenshot(ctx, t, "ui-dead-letters")
	browsertest.NoCSPViolations(ctx, t, "dead letters")

	var link struct{ URL string }
	call(t, "POST", base+"/v1/portal-sessions", apiAdminKey, map[string]any{"tenant": "globex"}, &link, http.StatusCreated)
	portal := base + strings.TrimSuffix(link.URL, "/")
	browsertest.Do(ctx, t, "another tenant's portal",
		chromedp.Navigate(portal+"/messages"),
		chromedp.WaitVisible(chromedp.CSS(`main h1`)),
	)
	if list := browsertest.Text(ctx, t, "main"); strings.Contains(list, ids.IDs[0]) {
		t.Fatalf("globex's portal lists acme's message %s", ids.IDs[0])
	}
	browsertest.Do(ctx, t, "editing the URL to acme's message",
		chromedp.Navigate(portal+"/messages/"+ids.IDs[0]),
		chromedp.WaitReady(chromedp.CSS(`body`)),
	)
	if page := browsertest.Text(ctx, t, "body"); !strings.Contains(page, "not found") || strings.Contains(page, "thanks from the endpoint") {
		t.Fatalf("acme's message in globex's portal: %q", page)
	}
}
