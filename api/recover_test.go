package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookpipe/hookpipe/api/internal/service"
	"github.com/hookpipe/hookpipe/runtime/testkit"
	"github.com/hookpipe/hookpipe/topics"
)

// TestRecoverOperation: of 500 events, 200 whose last attempt in the
// window failed are sent again, each once, across a restart of the replica
// running the operation; the 50 that failed after the window only, those
// delivered since (later or later in the window), those delivered in it,
// and another subscription's failures are not.
func TestRecoverOperation(t *testing.T) {
	t.Parallel()
	t0 := time.Now().UTC().Truncate(time.Second).Add(-time.Hour)
	w0, w1 := t0.Add(10*time.Minute), t0.Add(20*time.Minute)
	var rows [][]any
	attempt := func(id, ev, sub, outcome string, n int, at, published time.Time) {
		category, status := "", uint16(204)
		if outcome != "success" {
			category, status = "server_error", 503
		}
		rows = append(rows, []any{id, ev, "order.created", sub, "acme", uint32(n), outcome, category, status, 2.0, at, "", epoch, published, ""})
	}
	published := func(i int) time.Time { return t0.Add(time.Duration(i/100) * time.Second) }
	for i := range 500 {
		ev, p := fmt.Sprintf("evt_%03d", i), published(i)
		switch {
		case i < 200: // failed in the window: recovered
			attempt("a1_"+ev, ev, "sub_r", "retry", 1, w0.Add(-time.Minute), p)
			attempt("a2_"+ev, ev, "sub_r", "retry", 2, w0.Add(time.Minute), p)
			attempt("a3_"+ev, ev, "sub_r", "dead", 3, w0.Add(2*time.Minute), p)
		case i < 250: // failed after the window only
			attempt("a1_"+ev, ev, "sub_r", "dead", 1, w1.Add(time.Minute), p)
		case i < 300: // failed in the window, delivered after it
			attempt("a1_"+ev, ev, "sub_r", "retry", 1, w0.Add(time.Minute), p)
			attempt("a2_"+ev, ev, "sub_r", "success", 2, w1.Add(time.Minute), p)
		case i < 350: // failed, then delivered in the window
			attempt("a1_"+ev, ev, "sub_r", "retry", 1, w0.Add(time.Minute), p)
			attempt("a2_"+ev, ev, "sub_r", "success", 2, w0.Add(5*time.Minute), p)
		default: // delivered in the window; another subscription failed
			attempt("a1_"+ev, ev, "sub_r", "success", 1, w0.Add(time.Minute), p)
			attempt("o1_"+ev, ev, "sub_other", "dead", 1, w0.Add(time.Minute), p)
		}
	}
	first := recorded(t, rows)
	c := first.c
	var recs []*kgo.Record
	for i := range 500 {
		ev := topics.Event{ID: fmt.Sprintf("evt_%03d", i), Type: "order.created", Tenant: "acme", Key: fmt.Sprint(i), Data: []byte(`{}`)}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: c.names.Events(), Key: []byte(ev.Key), Value: b, Timestamp: published(i)})
	}
	if err := c.cl.ProduceSync(testkit.Ctx(t, 10*time.Second), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sub_r", "sub_other"} {
		first.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"id": id, "tenant": "acme",
			"url": "https://a.example/", "event_types": []string{"*"}}, nil)
	}

	first.must(http.StatusUnprocessableEntity, "POST", "/v1/subscriptions/sub_r/recover", adminKey, map[string]any{"until": w1}, nil)
	first.must(http.StatusNotFound, "POST", "/v1/subscriptions/sub_r/recover", first.tenantKey("globex"), map[string]any{"since": w0}, nil)
	var o service.Operation
	// 40 a second: five seconds for the 200.
	first.must(http.StatusAccepted, "POST", "/v1/subscriptions/sub_r/recover", adminKey, map[string]any{"since": w0, "until": w1, "rate": 40}, &o)
	testkit.WaitEvery(t, 20*time.Millisecond, 30*time.Second, "the recover under way", func() bool {
		var now service.Operation
		first.must(http.StatusOK, "GET", "/v1/operations/"+o.ID, adminKey, nil, &now)
		return now.Sent > 0
	})
	first.stop()
	second := c.replicaWith(first.env)
	var stopped service.Operation
	second.must(http.StatusOK, "GET", "/v1/operations/"+o.ID, adminKey, nil, &stopped)
	if stopped.State != topics.OperationRunning || stopped.Sent >= 200 {
		t.Fatalf("the recover is not running half way when its runner stopped: %+v", stopped)
	}
	o = second.finished(o.ID, adminKey)
	if o.State != topics.OperationDone || o.Kind != topics.OperationRecover || o.Sent != 200 {
		t.Fatalf("resumed recover: %+v, want done with 200 sent", o)
	}
	sent := c.deliveries()
	if len(sent) != 200 {
		t.Fatalf("%d events sent again, want 200", len(sent))
	}
	for i := range 200 {
		if id := fmt.Sprintf("evt_%03d", i); sent[id] != 1 {
			t.Errorf("%s sent %d times, want once", id, sent[id])
		}
	}
}

// TestRecoverFromTheEndpointPage: the endpoint page's form starts a
// recover of its window and shows the operation; a bad time is said.
func TestRecoverFromTheEndpointPage(t *testing.T) {
	t.Parallel()
	r := recorded(t, nil)
	var sub service.Subscription
	r.must(http.StatusCreated, "POST", "/v1/subscriptions", adminKey, map[string]any{"tenant": "acme", "url": "https://a.example/",
		"event_types": []string{"*"}}, &sub)
	u := r.uiClient()
	u.signIn(adminKey)
	page := "/ui/subscriptions/" + sub.ID
	token := u.csrf(page)
	if status, body := u.post(page+"/recover", url.Values{"_csrf": {token}, "since": {"yesterday"}}); status != http.StatusOK ||
		!strings.Contains(body, "since: yesterday is not a time") {
		t.Fatalf("a bad time: %d %.300s", status, body)
	}
	since := time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")
	status, _ := u.post(page+"/recover", url.Values{"_csrf": {token}, "since": {since}})
	if status != http.StatusSeeOther {
		t.Fatalf("recover from the endpoint page: %d, want 303 to the operation", status)
	}
	var list struct{ Data []service.Operation }
	r.must(http.StatusOK, "GET", "/v1/operations", adminKey, nil, &list)
	if len(list.Data) != 1 || list.Data[0].Kind != topics.OperationRecover || list.Data[0].SubscriptionID != sub.ID ||
		list.Data[0].Since.Format("2006-01-02T15:04") != since {
		t.Fatalf("operations %+v, want the recover of %s from %s", list.Data, sub.ID, since)
	}
}
